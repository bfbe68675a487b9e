"""gpu_starved means GPUs that were working, under-fed, through most of the window (issue #14).

Over the starved window, per GPU: the periods it was working (at or above the idle threshold) must be at least
STARVED_MIN_WORKING_SHARE of its reported periods, and its mean over those periods under the starved threshold,
for every GPU. Idle periods never pull the mean down into "starved"; one busy GPU beside idle ones is a sizing
matter (the audit's rightsize_downsize), never a data one. The series are each minute's Maximum, as the sweep
reads them. The same readings through the deployed sweep: tests/integration/test_starved_flow.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard.detect.gpu import (
    STARVED_MIN_WORKING_SHARE,
    Series,
    Thresholds,
    Verdict,
    gpu_instance_findings,
    read_gpus,
)
from costguard.detect.sagemaker import notebook_findings, read_training_job, training_job_findings
from costguard.model import (
    MARK_TAG_KEY,
    Accelerators,
    Ec2Instance,
    Finding,
    NotebookInstance,
    Reason,
    TrainingJob,
)
from costguard.pricing import Price

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
T = Thresholds()  # 5% idle over 30 minutes, 70% starved over 120 minutes, 1-minute periods
ACCOUNT, REGION = "123456789012", "us-east-1"
A100X8 = Accelerators(kind="nvidia_gpu", count=8, model="A100", memory_mib=40960)
A10G = Accelerators(kind="nvidia_gpu", count=1, model="A10G", memory_mib=24576)
A10GX4 = Accelerators(kind="nvidia_gpu", count=4, model="A10G", memory_mib=24576)


def ending_now(values: list[float], step: timedelta = timedelta(minutes=1)) -> Series:
    """``values`` one period apart, the last stamped at NOW."""
    return [(NOW - step * (len(values) - 1 - n), v) for n, v in enumerate(values)]


def steady(percent: float, minutes: int = 180) -> Series:
    return ending_now([percent] * minutes)


def idle_noise(gpu: int, minutes: int = 180) -> Series:
    """An idle GPU read as each minute's Maximum: 0-3%, never a flat zero."""
    return ending_now([float((n * 7 + gpu) % 4) for n in range(minutes)])


def bursts_and_breaks(burst: float = 95.0, on: int = 10, off: int = 10, minutes: int = 180) -> list[float]:
    """``on`` minutes at ``burst``, ``off`` minutes at 0%, repeated (the breaks end at NOW's side last)."""
    return [burst if n % (on + off) < on else 0.0 for n in range(minutes)]


def instance(accelerators: Accelerators = A100X8, tags: dict[str, str] | None = None) -> Ec2Instance:
    return Ec2Instance(
        "i-0123456789abcdef0",
        "p4d.24xlarge" if accelerators.count == 8 else "g5.12xlarge",
        "running",
        ACCOUNT,
        REGION,
        NOW - timedelta(days=1),
        tags or {},
        None,
        accelerators,
    )


def notebook() -> NotebookInstance:
    return NotebookInstance(
        name="dana-lab",
        arn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:notebook-instance/dana-lab",
        account=ACCOUNT,
        region=REGION,
        instance_type="ml.g5.xlarge",
        status="InService",
        accelerators=A10G,
    )


def training_job(count: int = 2) -> TrainingJob:
    return TrainingJob(
        name="bert-pretrain",
        arn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/bert-pretrain",
        account=ACCOUNT,
        region=REGION,
        instance_type="ml.p4d.24xlarge",
        instance_count=count,
        started=NOW - timedelta(hours=5),
        accelerators=A100X8,
    )


def findings_of(
    gpus: dict[int, Series], accelerators: Accelerators = A100X8, tags: dict[str, str] | None = None
) -> list[Finding]:
    reading = read_gpus(gpus, NOW, T, accelerators.count)
    resource = instance(accelerators, tags)
    return gpu_instance_findings(resource, reading, price=Price(20.0, "t"), thresholds=T, now=NOW)


# -- the working-minutes rule ---------------------------------------------------------------------


def test_the_working_share_is_most_of_the_window() -> None:
    assert 0.5 < STARVED_MIN_WORKING_SHARE <= 0.8


def test_a_notebook_alternating_95_percent_bursts_and_idle_breaks_is_not_starved() -> None:
    gpus = {0: ending_now(bursts_and_breaks())}
    reading = read_gpus(gpus, NOW, T, 1)
    # The old rule's trap: over all minutes the GPU averages about 47.5%, under the 70% starved threshold.
    assert reading.mean_percent == pytest.approx(47.5, abs=1.0)
    assert reading.verdict is Verdict.BUSY
    assert reading.working_share == pytest.approx(0.5, abs=0.01)
    assert reading.working_mean_percent == 95.0
    assert gpu_instance_findings(instance(A10G), reading, price=None, thresholds=T, now=NOW) == []
    assert notebook_findings(notebook(), reading, price=None, thresholds=T, now=NOW) == []


@pytest.mark.parametrize(("on", "off"), [(5, 5), (20, 10), (45, 15), (3, 1)])
def test_bursts_and_breaks_of_any_rhythm_are_not_starved(on: int, off: int) -> None:
    reading = read_gpus({0: ending_now(bursts_and_breaks(on=on, off=off))}, NOW, T, 1)
    assert reading.verdict is Verdict.BUSY


def test_under_fed_bursts_with_long_breaks_are_not_starved_either() -> None:
    # 40% while working, but working only half the time: the idle half is not the data pipeline's doing.
    reading = read_gpus({0: ending_now(bursts_and_breaks(burst=40.0))}, NOW, T, 1)
    assert reading.working_mean_percent == 40.0
    assert reading.verdict is Verdict.BUSY


def test_a_job_at_a_steady_40_percent_is_starved_with_the_cost_of_the_working_underuse() -> None:
    gpus = {i: ending_now([40.0 + (n + i) % 3 for n in range(180)]) for i in range(8)}  # 40-42% each minute
    reading = read_gpus(gpus, NOW, T, 8)
    assert reading.verdict is Verdict.STARVED
    assert reading.working_share == 1.0
    assert reading.working_mean_percent == pytest.approx(41.0, abs=0.05)
    [finding] = gpu_instance_findings(instance(), reading, price=Price(20.0, "t"), thresholds=T, now=NOW)
    assert finding.reason is Reason.GPU_STARVED
    assert finding.remediable is False
    assert finding.evidence["mean_gpu_percent_while_working"] == reading.working_mean_percent
    assert finding.evidence["working_share_of_minutes"] == "100%"
    assert finding.evidence["underuse_usd_per_hour"] == round(20.0 * (1 - 41.0 / 100), 2) == 11.8
    assert "waiting for data" in finding.summary
    assert "in every reported minute of the last 120" in finding.summary
    assert "averaged only 41.0% while working" in finding.summary


def test_the_starved_notice_says_how_much_of_the_window_the_gpus_worked() -> None:
    gpus = {i: ending_now(([40.0] * 9 + [0.0]) * 18) for i in range(8)}  # idle one minute in ten
    reading = read_gpus(gpus, NOW, T, 8)
    assert (reading.verdict, reading.working_share) == (Verdict.STARVED, 0.9)
    [finding] = gpu_instance_findings(instance(), reading, price=None, thresholds=T, now=NOW)
    assert "in at least 90% of the reported minutes of the last 120" in finding.summary
    assert finding.evidence["underuse_usd_per_hour"] is None  # unknown price: unknown, never zero


def test_a_job_idle_for_50_minutes_then_at_95_percent_is_not_starved() -> None:
    gpus = {i: ending_now([0.0] * 110 + [95.0] * 70) for i in range(8)}  # idle 50 of the window's 120 minutes
    reading = read_gpus(gpus, NOW, T, 8)
    assert reading.mean_percent == pytest.approx(95.0 * 70 / 120, abs=0.6)  # the old rule's "starved" mean
    assert reading.verdict is Verdict.BUSY
    assert findings_of(gpus) == []


def test_a_job_restarting_after_idle_is_starved_only_once_it_has_worked_most_of_the_window() -> None:
    # Idle until 11:10, then under-fed at 40%. At 12:00 it has worked 50 of 120 minutes; from 12:40 on, 90.
    times = [NOW + timedelta(minutes=m) for m in range(-179, 41)]  # 09:01 .. 12:40, one a minute
    series = [(t, 0.0 if t <= NOW - timedelta(minutes=50) else 40.0) for t in times]
    gpus = {i: series for i in range(4)}
    assert read_gpus(gpus, NOW, T, 4).verdict is Verdict.BUSY
    later = read_gpus(gpus, NOW + timedelta(minutes=40), T, 4)
    assert later.verdict is Verdict.STARVED
    assert later.working_mean_percent == 40.0
    assert later.mean_percent == pytest.approx(40.0 * 90 / 120, abs=0.5)  # the working mean is what is judged


def test_idle_minutes_do_not_pull_a_well_fed_gpu_down_into_starved() -> None:
    # At 80% while working, idle 20 of 120 minutes: the mean over every minute (66.7%) is under 70%.
    gpus = {i: ending_now(([80.0] * 50 + [0.0] * 10) * 3) for i in range(4)}
    reading = read_gpus(gpus, NOW, T, 4)
    assert reading.mean_percent is not None and reading.mean_percent < T.starved_percent
    assert reading.working_mean_percent == 80.0
    assert reading.verdict is Verdict.BUSY


@pytest.mark.parametrize(("working", "verdict"), [(90, Verdict.STARVED), (89, Verdict.BUSY)])
def test_the_working_share_boundary_is_three_quarters_of_the_reported_minutes(
    working: int, verdict: Verdict
) -> None:
    # The window's 120 minutes: ``working`` at 40%, the rest idle, spread so no idle window is all idle.
    window = [40.0 if n * working // 120 != (n + 1) * working // 120 else 1.0 for n in range(120)]
    assert sum(v >= T.idle_percent for v in window) == working
    reading = read_gpus({0: ending_now([40.0] * 60 + window)}, NOW, T, 1)
    assert reading.verdict is verdict


def test_the_share_counts_reported_minutes_not_gaps_in_publishing() -> None:
    # 100 of the window's 120 minutes reported (over the 80% coverage), all at 40%: starved.
    gpus = {0: [(t, v) for n, (t, v) in enumerate(steady(40.0)) if n % 6 != 0]}
    reading = read_gpus(gpus, NOW, T, 1)
    assert reading.verdict is Verdict.STARVED
    assert reading.working_share == 1.0


def test_working_is_judged_against_the_configured_idle_threshold() -> None:
    gpus = {0: ending_now([8.0 if n % 4 else 60.0 for n in range(180)])}  # 8% three minutes in four
    assert read_gpus(gpus, NOW, T, 1).verdict is Verdict.STARVED
    assert read_gpus(gpus, NOW, Thresholds(idle_percent=10.0), 1).verdict is Verdict.BUSY


def test_five_minute_periods_read_the_same_way() -> None:
    # The backtest reads 5-minute datapoints: bursts and breaks are still not starved, steady 40% still is.
    five = timedelta(minutes=5)
    thresholds = Thresholds(period=five)
    burst = ending_now([95.0 if n % 4 < 2 else 0.0 for n in range(36)], five)
    assert read_gpus({0: burst}, NOW, thresholds, 1).verdict is Verdict.BUSY
    assert read_gpus({0: ending_now([40.0] * 36, five)}, NOW, thresholds, 1).verdict is Verdict.STARVED


# -- every GPU: busy GPUs beside idle ones are a sizing matter ------------------------------------


def test_one_gpu_at_90_percent_beside_seven_at_0_to_3_percent_is_not_starved() -> None:
    gpus = {i: idle_noise(i) for i in range(1, 8)} | {0: steady(90.0)}
    reading = read_gpus(gpus, NOW, T, 8)
    assert reading.verdict is Verdict.BUSY
    assert reading.busiest_gpu_index == 0
    assert findings_of(gpus) == []


def test_two_gpus_at_60_percent_beside_six_idle_is_not_starved() -> None:
    # Under the old rule: every GPU's mean under 70% and the overall mean (15.7%) above idle, so "starved".
    gpus = {i: idle_noise(i) for i in range(2, 8)} | {0: steady(60.0), 1: steady(60.0)}
    reading = read_gpus(gpus, NOW, T, 8)
    assert reading.mean_percent is not None and T.idle_percent < reading.mean_percent < T.starved_percent
    assert reading.working_share == 0.0
    assert reading.verdict is Verdict.BUSY
    assert findings_of(gpus) == []


def test_the_audits_one_gpu_trainer_is_not_called_data_starved() -> None:
    # The demo's vision-g5-one-gpu-trainer (the audit recommends a g5.2xlarge): GPU 0 at about 45%, 1-3 idle.
    gpus = {i: idle_noise(i) for i in range(1, 4)} | {0: ending_now([45.0 + (n % 9 - 4) for n in range(180)])}
    assert read_gpus(gpus, NOW, T, 4).verdict is Verdict.BUSY
    assert findings_of(gpus, A10GX4) == []


def test_a_marked_instance_with_busy_gpus_beside_idle_ones_only_gets_its_mark_cancelled() -> None:
    gpus = {i: idle_noise(i) for i in range(2, 8)} | {0: steady(60.0), 1: steady(60.0)}
    marked = {MARK_TAG_KEY: (NOW - timedelta(minutes=5)).isoformat()}
    [finding] = findings_of(gpus, tags=marked)
    assert finding.reason is Reason.GPU_ACTIVE_AGAIN


def test_every_gpu_must_be_under_fed() -> None:
    under_fed = {i: steady(40.0) for i in range(8)}
    assert read_gpus(under_fed, NOW, T, 8).verdict is Verdict.STARVED
    # One GPU well fed: the others' low use is not the shared pipeline's doing.
    assert read_gpus(under_fed | {7: steady(90.0)}, NOW, T, 8).verdict is Verdict.BUSY
    # One GPU bursting between breaks: it is not working most of the window.
    assert read_gpus(under_fed | {7: ending_now(bursts_and_breaks())}, NOW, T, 8).verdict is Verdict.BUSY


# -- SageMaker: the same reading, and no gpu_starved notice -----------------------------------------


def test_a_training_job_bursting_between_breaks_is_not_starved() -> None:
    summed = [v * 8 for v in bursts_and_breaks()]  # SageMaker sums a host's eight GPUs
    reading = read_training_job({1: ending_now(summed), 2: ending_now(summed)}, training_job(), NOW, T)
    assert reading.verdict is Verdict.BUSY
    assert training_job_findings(training_job(), reading, price=None, thresholds=T, now=NOW) == []


def test_a_training_job_restarting_after_50_idle_minutes_is_not_starved() -> None:
    summed = ending_now([0.0] * 110 + [8 * 95.0] * 70)
    reading = read_training_job({1: summed, 2: summed}, training_job(), NOW, T)
    assert reading.verdict is Verdict.BUSY


def test_a_training_job_at_a_steady_40_percent_per_gpu_reads_starved_but_gives_no_notice() -> None:
    summed = steady(8 * 40.0)
    reading = read_training_job({1: summed, 2: summed}, training_job(), NOW, T)
    assert reading.verdict is Verdict.STARVED
    assert reading.working_mean_percent == 40.0
    # SageMaker's per-host series cannot tell under-fed GPUs from idle ones beside a busy one: no notice.
    assert training_job_findings(training_job(), reading, price=None, thresholds=T, now=NOW) == []


def test_a_notebook_at_a_steady_40_percent_reads_starved_but_gives_no_notice() -> None:
    reading = read_gpus({0: steady(40.0)}, NOW, T, 1)
    assert reading.verdict is Verdict.STARVED
    assert notebook_findings(notebook(), reading, price=None, thresholds=T, now=NOW) == []
