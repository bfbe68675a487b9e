"""The evidence a GPU-idle stop needs, unit by unit: EC2's own CPU and network held against the GPU series
(detect/host_evidence.py), and GPU readings outside 0-100% as no reading (detect/gpu.py). Through the embedded
stack: tests/integration/test_evidence_gpu_idle_flow.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard.aws.metrics import evidence_queries
from costguard.detect.gpu import Thresholds, Verdict, gpu_instance_findings, read_gpus
from costguard.detect.host_evidence import (
    Agreement,
    HostReading,
    HostThresholds,
    corroborated,
    read_host,
)
from costguard.model import MARK_TAG_KEY, Accelerators, Ec2Instance, Reason

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
T = Thresholds()
WINDOW = T.idle_window
L40S = Accelerators("nvidia_gpu", 1, "L40S")
A10G_4 = Accelerators("nvidia_gpu", 4, "A10G")


def minutes(value: float, count: int = 120, step: int = 1, lag: int = 0) -> list[tuple[datetime, float]]:
    """A series of ``value`` every ``step`` minutes up to ``lag`` minutes before NOW, oldest first."""
    return [(NOW - timedelta(minutes=lag + step * n), value) for n in reversed(range(count))]


def ec2(tags: dict[str, str] | None = None, accelerators: Accelerators = L40S) -> Ec2Instance:
    kind = "g6e.xlarge" if accelerators is L40S else "g5.12xlarge"
    return Ec2Instance(
        "i-0e71de0ce000000a1",
        kind,
        "running",
        "123456789012",
        "us-east-1",
        None,
        tags or {},
        None,
        accelerators,
    )


def idle_finding(tags: dict[str, str] | None = None) -> object:
    reading = read_gpus({0: minutes(1.0)}, NOW, T, 1)
    assert reading.verdict is Verdict.IDLE
    [finding] = gpu_instance_findings(ec2(tags), reading, price=None, thresholds=T, now=NOW)
    return finding


# -- EC2's own metrics -----------------------------------------------------------------------------------------


def test_an_idle_host_under_detailed_monitoring_agrees() -> None:
    host = read_host(minutes(1.0), minutes(50_000.0), minutes(5_000.0), NOW, WINDOW)
    assert host.agreement is Agreement.AGREES
    assert (host.cpu_percent, host.network_mb_per_minute) == (1.0, 0.055)


def test_basic_monitoring_five_minute_sums_arriving_late_read_as_detailed_ones() -> None:
    """One datapoint every 5 minutes (each the bytes of its 5 minutes), the newest 10 minutes not arrived yet."""
    host = read_host(
        minutes(1.0, 24, step=5, lag=10),
        minutes(5 * 50_000.0, 24, step=5, lag=10),
        minutes(5 * 5_000.0, 24, step=5, lag=10),
        NOW,
        WINDOW,
    )
    assert host.agreement is Agreement.AGREES
    assert host.network_mb_per_minute == pytest.approx(0.055)


@pytest.mark.parametrize(
    ("cpu", "network_in", "why"),
    [(35.0, 50_000.0, "busy CPU"), (1.0, 80e6, "busy network"), (5.0, 0.0, "CPU at the threshold")],
)
def test_a_host_working_on_cpu_or_network_disagrees(cpu: float, network_in: float, why: str) -> None:
    host = read_host(minutes(cpu), minutes(network_in), minutes(0.0), NOW, WINDOW)
    assert host.agreement is Agreement.DISAGREES, why


def test_network_out_counts_too() -> None:
    host = read_host(minutes(1.0), minutes(0.0), minutes(3e6), NOW, WINDOW)
    assert (host.agreement, host.network_mb_per_minute) == (Agreement.DISAGREES, 3.0)


@pytest.mark.parametrize(
    ("cpu", "network_in", "network_out", "problem"),
    [
        ([], minutes(0.0), minutes(0.0), "CPUUtilization had datapoints in fewer than 3 of the 6"),
        (minutes(1.0), [], minutes(0.0), "NetworkIn"),
        (minutes(1.0), minutes(0.0), [], "NetworkOut"),
        (minutes(1.0, 10), minutes(0.0), minutes(0.0), "CPUUtilization"),  # the last 10 minutes only: 2 slots
        (minutes(1.0, 200, lag=40), minutes(0.0), minutes(0.0), "CPUUtilization"),  # nothing in the window
        (minutes(-3.0), minutes(0.0), minutes(0.0), "no EC2 metric can take"),
        (minutes(1.0), minutes(-1.0), minutes(0.0), "no EC2 metric can take"),
    ],
)
def test_too_few_or_impossible_datapoints_are_unreadable(
    cpu: list[tuple[datetime, float]],
    network_in: list[tuple[datetime, float]],
    network_out: list[tuple[datetime, float]],
    problem: str,
) -> None:
    host = read_host(cpu, network_in, network_out, NOW, WINDOW)
    assert host.agreement is Agreement.UNREADABLE
    assert host.problem is not None and problem in host.problem


def test_thresholds_are_the_callers() -> None:
    strict = HostThresholds(cpu_percent=0.5, network_mb_per_minute=0.01)
    assert (
        read_host(minutes(1.0), minutes(0.0), minutes(0.0), NOW, WINDOW, strict).agreement
        is Agreement.DISAGREES
    )


# -- what a GPU-idle finding becomes -------------------------------------------------------------------------------


def test_agreement_keeps_the_stop_and_says_what_ec2_saw() -> None:
    finding = idle_finding()
    held = corroborated(finding, HostReading(Agreement.AGREES, 1.0, 0.055), 30)  # type: ignore[arg-type]
    assert held.remediable
    assert held.report_note is None
    assert (
        "EC2's own metrics agree: CPU averaged 1.0% and network 0.06 MB a minute over the same 30"
        in held.summary
    )
    assert held.evidence["ec2_metrics"] == "agrees" and held.evidence["ec2_cpu_percent"] == 1.0


def test_disagreement_tells_it_but_never_marks_nor_stops() -> None:
    finding = idle_finding()
    held = corroborated(finding, HostReading(Agreement.DISAGREES, 35.0, 80.0), 30)  # type: ignore[arg-type]
    assert not held.remediable
    assert held.report_note is not None
    assert held.report_note.startswith("not marked or stopped: only its GPU series")
    assert "cloudwatch:PutMetricData" in held.report_note
    assert "CPU averaged 35.0% (idle is under 5%)" in held.summary
    assert "network 80.00 MB a minute (idle is under 2)" in held.summary
    assert held.evidence["ec2_metrics"] == "disagrees"


@pytest.mark.parametrize(
    "host",
    [
        HostReading(
            Agreement.UNREADABLE, problem="NetworkOut had datapoints in fewer than 3 of the 6 periods"
        ),
        None,
    ],
    ids=["unreadable", "not-read"],
)
def test_ec2_metrics_that_cannot_be_read_never_stop(host: HostReading | None) -> None:
    held = corroborated(idle_finding(), host, 30)  # type: ignore[arg-type]
    assert not held.remediable
    assert held.report_note is not None and "could not be read" in held.report_note
    if host is not None:
        assert "NetworkOut" in held.report_note


def test_a_marked_instance_whose_ec2_metrics_disagree_is_not_stopped() -> None:
    finding = idle_finding({MARK_TAG_KEY: (NOW - timedelta(hours=1)).isoformat()})
    held = corroborated(finding, HostReading(Agreement.DISAGREES, 35.0, 0.0), 30)  # type: ignore[arg-type]
    assert not held.remediable


def test_other_findings_are_left_as_they_are() -> None:
    reading = read_gpus({0: minutes(1.0)}, NOW, T, 2)  # GPU 1 silent
    [partial] = gpu_instance_findings(ec2(), reading, price=None, thresholds=T, now=NOW)
    assert corroborated(partial, None, 30) is partial


# -- readings outside a GPU's physical range -------------------------------------------------------------------------


@pytest.mark.parametrize("value", [-400.0, -0.5, 100.5, 250.0])
def test_a_reading_outside_0_to_100_percent_makes_the_read_unreadable(value: float) -> None:
    gpus = {0: minutes(1.0), 1: minutes(1.0)}
    gpus[1][-7] = (gpus[1][-7][0], value)
    reading = read_gpus(gpus, NOW, T, 2)
    assert reading.verdict is Verdict.OUT_OF_RANGE
    assert [(i, v) for i, v, _ in reading.out_of_range] == [(1, value)]
    assert reading.busiest_gpu_percent is None and reading.working_mean_percent is None


def test_the_reading_furthest_out_is_named() -> None:
    series = minutes(1.0)
    series[-3] = (series[-3][0], 120.0)
    series[-2] = (series[-2][0], -400.0)
    [(index, value, at)] = read_gpus({0: series}, NOW, T, 1).out_of_range
    assert (index, value, at) == (0, -400.0, series[-2][0])


def test_a_reading_out_of_range_before_the_lookback_is_not_read() -> None:
    old = [(NOW - T.lookback - timedelta(minutes=5), -400.0)]
    assert read_gpus({0: old + minutes(1.0)}, NOW, T, 1).verdict is Verdict.IDLE


def test_zero_and_one_hundred_are_in_range() -> None:
    assert read_gpus({0: minutes(0.0)}, NOW, T, 1).verdict is Verdict.IDLE
    assert read_gpus({0: minutes(100.0)}, NOW, T, 1).verdict is Verdict.BUSY


def test_an_out_of_range_read_is_told_as_cannot_tell_and_cancels_a_pending_stop() -> None:
    gpus = {i: minutes(1.0) for i in range(3)} | {3: minutes(-400.0)}
    reading = read_gpus(gpus, NOW, T, 4)
    [told] = gpu_instance_findings(ec2(accelerators=A10G_4), reading, price=None, thresholds=T, now=NOW)
    assert told.reason is Reason.GPU_METRICS_PARTIAL and not told.remediable
    assert "reading out of range" in told.summary and "GPU 3: -400%" in told.summary
    assert "will not call it idle, starved or busy" in told.summary
    assert told.repeat_scope == "out_of_range:3"
    marked = ec2({MARK_TAG_KEY: (NOW - timedelta(hours=1)).isoformat()}, A10G_4)
    found = gpu_instance_findings(marked, reading, price=None, thresholds=T, now=NOW)
    assert [f.reason for f in found] == [Reason.GPU_METRICS_PARTIAL, Reason.GPU_ACTIVE_AGAIN]
    assert found[1].cancels_mark and "out of range" in found[1].summary


# -- the reads --------------------------------------------------------------------------------------------------------


def test_network_out_is_read_only_for_the_instances_asked() -> None:
    a, b = ec2(), Ec2Instance("i-0e71de0ce000000a2", "g6e.xlarge", "running", "1", "us-east-1", None)
    keys = [q.key for q in evidence_queries([a, b], network=frozenset(), outbound=frozenset({a.id}))]
    assert keys == [
        (a.id, "cpu", ""),
        (a.id, "network_in", ""),
        (a.id, "network_out", ""),
        (b.id, "cpu", ""),
    ]
    assert [q.metric for q in evidence_queries([b])] == ["CPUUtilization", "NetworkIn"]  # as before
