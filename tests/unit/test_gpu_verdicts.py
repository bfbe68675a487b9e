"""GPU verdicts from per-GPU series: idle, starved, busy, no metrics, too early."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard.aws.alarms import alarm_request
from costguard.detect.gpu import Thresholds, Verdict, gpu_instance_findings, read_gpus
from costguard.model import MARK_TAG_KEY, Accelerators, Ec2Instance, Reason
from costguard.pricing import Price

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
T = Thresholds()


def series(value: float | list[float], minutes: int = 180) -> list[tuple[datetime, float]]:
    values = value if isinstance(value, list) else [value] * minutes
    return [(NOW - timedelta(minutes=len(values) - i), v) for i, v in enumerate(values)]


def fleet(n: int, value: float) -> dict[int, list[tuple[datetime, float]]]:
    return {i: series(value) for i in range(n)}


def test_all_gpus_under_threshold_for_the_window_is_idle() -> None:
    reading = read_gpus(fleet(8, 1.0), NOW, T, 8)
    assert reading.verdict is Verdict.IDLE
    assert reading.busiest_gpu_percent == 1.0


def test_one_busy_gpu_among_idle_ones_is_not_idle_and_not_starved() -> None:
    gpus = fleet(8, 1.0)
    gpus[7] = series(90.0)
    reading = read_gpus(gpus, NOW, T, 8)
    assert reading.verdict is Verdict.BUSY
    assert reading.busiest_gpu_index == 7


def test_a_single_spike_inside_the_window_prevents_idle() -> None:
    gpus = fleet(4, 1.0)
    gpus[2] = series([1.0] * 170 + [30.0] + [1.0] * 9)
    assert read_gpus(gpus, NOW, T, 4).verdict is not Verdict.IDLE


def test_a_spike_before_the_window_does_not_prevent_idle() -> None:
    gpus = fleet(4, 1.0)
    gpus[2] = series([1.0] * 100 + [99.0] + [1.0] * 79)  # 79 quiet minutes > the 30-minute window
    assert read_gpus(gpus, NOW, T, 4).verdict is Verdict.IDLE


def test_uniform_middling_utilization_is_starved() -> None:
    reading = read_gpus(fleet(4, 45.0), NOW, T, 4)
    assert reading.verdict is Verdict.STARVED
    assert reading.mean_percent == pytest.approx(45.0)
    assert (reading.working_share, reading.working_mean_percent) == (1.0, 45.0)


def test_middling_utilization_with_idle_breaks_is_not_starved() -> None:
    # More idle than STARVED_MIN_WORKING_SHARE allows: the idle minutes never pull the mean into "starved"
    # (every case: tests/unit/test_starved_verdict.py).
    reading = read_gpus({i: series(([45.0] * 20 + [0.0] * 10) * 6) for i in range(4)}, NOW, T, 4)
    assert reading.verdict is Verdict.BUSY


def test_busy_gpus_are_busy() -> None:
    assert read_gpus(fleet(8, 92.0), NOW, T, 8).verdict is Verdict.BUSY


def test_no_series_is_no_metrics_never_idle() -> None:
    assert read_gpus({}, NOW, T, 8).verdict is Verdict.NO_METRICS
    assert read_gpus({0: []}, NOW, T, 1).verdict is Verdict.NO_METRICS


def test_a_gpu_that_does_not_report_keeps_the_instance_from_idle() -> None:
    reading = read_gpus(fleet(7, 1.0), NOW, T, 8)  # eight GPUs, seven series
    assert reading.verdict is not Verdict.IDLE


def test_a_window_not_yet_covered_is_too_early() -> None:
    gpus = {i: series(1.0, minutes=10) for i in range(2)}  # an instance up for ten minutes
    assert read_gpus(gpus, NOW, T, 2).verdict is Verdict.TOO_EARLY


def test_thresholds_are_the_settings_not_constants() -> None:
    strict = Thresholds(idle_percent=0.5)
    assert read_gpus(fleet(2, 1.0), NOW, strict, 2).verdict is not Verdict.IDLE


def _instance(tags: dict[str, str] | None = None, lifecycle: str | None = None) -> Ec2Instance:
    return Ec2Instance(
        id="i-0123456789abcdef0",
        type="p4d.24xlarge",
        state="running",
        account="123456789012",
        region="us-east-1",
        launch_time=NOW - timedelta(days=1),
        tags=tags or {},
        lifecycle=lifecycle,
        accelerators=Accelerators(kind="nvidia_gpu", count=8, model="A100", memory_mib=40960),
    )


def test_idle_finding_is_remediable_and_priced() -> None:
    reading = read_gpus(fleet(8, 1.0), NOW, T, 8)
    [finding] = gpu_instance_findings(_instance(), reading, price=Price(21.958, "t"), thresholds=T, now=NOW)
    assert finding.reason is Reason.GPU_IDLE
    assert finding.remediable is True
    assert finding.hourly_usd == 21.958


def test_starved_finding_is_notify_only_with_the_underuse_cost() -> None:
    reading = read_gpus(fleet(8, 40.0), NOW, T, 8)
    [finding] = gpu_instance_findings(_instance(), reading, price=Price(20.0, "t"), thresholds=T, now=NOW)
    assert finding.reason is Reason.GPU_STARVED
    assert finding.remediable is False
    # The unused share of the working minutes (here every minute): idle minutes are not starvation.
    assert reading.working_mean_percent == reading.mean_percent == 40.0
    assert finding.evidence["underuse_usd_per_hour"] == round(20.0 * (1 - 40.0 / 100), 2)
    assert "pipeline" in finding.summary


def test_missing_metrics_finding_says_how_to_fix() -> None:
    reading = read_gpus({}, NOW, T, 8)
    [finding] = gpu_instance_findings(_instance(), reading, price=None, thresholds=T, now=NOW)
    assert finding.reason is Reason.GPU_METRICS_MISSING
    assert finding.remediable is False
    assert "nvidia_gpu" in str(finding.evidence["how_to_fix"])
    assert finding.hourly_usd is None


@pytest.mark.parametrize(
    ("tags", "lifecycle", "blocked"),
    [
        ({"aws:autoscaling:groupName": "workers"}, None, "Auto Scaling group workers"),
        ({}, "spot", "spot instance"),
        ({}, "capacity-block", "Capacity Block"),
        ({}, None, None),
    ],
)
def test_instances_that_must_not_be_stopped_say_why(
    tags: dict[str, str], lifecycle: str | None, blocked: str | None
) -> None:
    reading = read_gpus(fleet(8, 1.0), NOW, T, 8)
    [finding] = gpu_instance_findings(_instance(tags, lifecycle), reading, price=None, thresholds=T, now=NOW)
    if blocked is None:
        assert finding.resource.stop_blocker is None
    else:
        assert blocked in (finding.resource.stop_blocker or "")


def test_a_marked_instance_that_works_again_cancels_its_mark() -> None:
    reading = read_gpus(fleet(8, 92.0), NOW, T, 8)
    marked = _instance({MARK_TAG_KEY: (NOW - timedelta(minutes=5)).isoformat()})
    [finding] = gpu_instance_findings(marked, reading, price=None, thresholds=T, now=NOW)
    assert finding.reason is Reason.GPU_ACTIVE_AGAIN
    assert finding.cancels_mark is True


def test_the_alarm_watches_the_busiest_gpu_over_the_idle_window() -> None:
    request = alarm_request(
        "i-0123456789abcdef0", Thresholds(idle_percent=5, idle_window=timedelta(minutes=30))
    )
    [query] = request["Metrics"]
    assert query["Expression"] == (
        "SELECT MAX(nvidia_smi_utilization_gpu) FROM CWAgent WHERE InstanceId = 'i-0123456789abcdef0'"
    )
    assert request["Threshold"] == 5
    assert request["ComparisonOperator"] == "LessThanThreshold"
    assert request["EvaluationPeriods"] * query["Period"] == 30 * 60
    assert request["TreatMissingData"] == "notBreaching"  # no data is never idle


def test_the_alarm_refuses_anything_but_an_instance_id() -> None:
    with pytest.raises(ValueError, match="not an instance id"):
        alarm_request("i-1' OR '1'='1", Thresholds())
