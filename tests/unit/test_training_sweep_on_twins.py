"""The training sweep's health check (flows/training_ceilings.divergence_findings) on in-memory twins: how the
jobs' own metrics are read, and what becomes of a divergence mark once the run recovers."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.aws.sagemaker import TRAINING_NAMESPACE
from costguard.aws.training_metrics import MAX_POINTS, read_groups
from costguard.events.sagemaker import TrainingJobDetail
from costguard.flows.training_ceilings import divergence_findings
from costguard.model import MARK_TAG_KEY, Reason, mark_text
from costguard.notify.dedupe import MemoryRepeatGate
from costguard.notify.queue import MemoryNoticeQueue
from costguard.pricing import price_book
from costguard.runtime import Runtime
from costguard.settings import Mode, Settings
from costguard.twins import MemoryMetrics, RecordingRemediator, memory_reads

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
REGION, ACCOUNT = "us-east-1", "123456789012"
ALLOWED = {"costguard:stop-on-divergence": "true"}
DIVERGED_MARK = {MARK_TAG_KEY: mark_text(NOW - timedelta(minutes=20), Reason.TRAINING_DIVERGED.value)}


@pytest.fixture(autouse=True)
def default_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("COSTGUARD_")]:
        monkeypatch.delenv(name)


def job(name: str, *, started: datetime, tags: dict[str, str] | None = None) -> TrainingJobDetail:
    raw: dict[str, Any] = {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{name}",
        "TrainingJobStatus": "InProgress",
        "AlgorithmSpecification": {
            "TrainingImage": "image",
            "MetricDefinitions": [{"Name": "train:loss", "Regex": "loss=(\\S+)"}],
        },
        "ResourceConfig": {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 1},
        "StoppingCondition": {"MaxRuntimeInSeconds": 30 * 24 * 3600},
        "TrainingStartTime": started.isoformat(),
        "Tags": tags or {},
    }
    return TrainingJobDetail.model_validate(raw)


def loss(
    metrics: MemoryMetrics, name: str, values: list[float], *, end: datetime = NOW - timedelta(minutes=1)
) -> None:
    """``values`` of the job's train:loss every 10 minutes, the last at ``end``."""
    points = [(end - timedelta(minutes=10 * (len(values) - 1 - n)), v) for n, v in enumerate(values)]
    metrics.put(REGION, TRAINING_NAMESPACE, "train:loss", {"TrainingJobName": name}, points)


def runtime(metrics: MemoryMetrics) -> tuple[Runtime, RecordingRemediator]:
    remediator = RecordingRemediator()
    return (
        Runtime(
            settings=Settings(mode=Mode.REMEDIATE),
            remediator=remediator,
            queue=MemoryNoticeQueue(),
            gate=MemoryRepeatGate(),
            prices=price_book(),
            reads=memory_reads(metrics=metrics),
        ),
        remediator,
    )


FALLING = [2.0 - 0.1 * k for k in range(12)]  # two hours of a loss falling again
RISING = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6]


def test_a_recovered_run_has_its_divergence_mark_cancelled() -> None:
    """The bug: nothing cancelled a divergence mark, so a later divergence found the old mark and was stopped at
    once, with no grace period. A marked run whose loss falls again through the window is unmarked."""
    metrics = MemoryMetrics()
    loss(metrics, "recovered", FALLING)
    detail = job("recovered", started=NOW - timedelta(hours=3), tags=ALLOWED | DIVERGED_MARK)
    run, remediator = runtime(metrics)
    [finding] = divergence_findings([detail], REGION, run, NOW, None)
    assert (finding.reason, finding.cancels_mark, finding.resource.id) == (
        Reason.GPU_ACTIVE_AGAIN,
        True,
        "recovered",
    )
    run.act([finding], NOW)
    assert remediator.calls == [("unmark", "recovered")]


def test_a_divergence_mark_stays_while_the_run_diverges_or_shows_nothing() -> None:
    metrics = MemoryMetrics()
    loss(metrics, "still-rising", FALLING[:5] + RISING)
    loss(metrics, "silent", FALLING, end=NOW - timedelta(hours=2))  # nothing in the window: proves nothing
    jobs = [
        job(name, started=NOW - timedelta(hours=4), tags=ALLOWED | DIVERGED_MARK)
        for name in ("still-rising", "silent")
    ]
    run, _ = runtime(metrics)
    findings = divergence_findings(jobs, REGION, run, NOW, None)
    assert [(f.reason, f.resource.id, f.cancels_mark) for f in findings] == [
        (Reason.TRAINING_DIVERGED, "still-rising", False)
    ]


def test_a_job_another_finding_may_stop_keeps_its_mark() -> None:
    """A job over its cost ceiling this sweep (``held``): that finding decides on the mark it carries."""
    metrics = MemoryMetrics()
    loss(metrics, "over-ceiling", FALLING)
    detail = job("over-ceiling", started=NOW - timedelta(hours=3), tags=ALLOWED | DIVERGED_MARK)
    run, _ = runtime(metrics)
    assert divergence_findings([detail], REGION, run, NOW, None, held={"over-ceiling"}) == []


def test_an_unmarked_healthy_run_gives_no_finding() -> None:
    metrics = MemoryMetrics()
    loss(metrics, "healthy", FALLING)
    run, _ = runtime(metrics)
    assert (
        divergence_findings([job("healthy", started=NOW - timedelta(hours=3))], REGION, run, NOW, None) == []
    )


def test_each_job_is_read_at_the_period_of_its_own_run_not_the_oldest_jobs() -> None:
    """The bug: the oldest job set the period for every job of the region (a 14-day job: 14 minutes), leaving a
    young job's 60-minute window too few readings to see its loss rise. Jobs are now read in one walk per
    period their own runs call for."""
    metrics = MemoryMetrics()
    loss(metrics, "young-rising", FALLING[:5] + RISING)
    loss(metrics, "old", FALLING)
    loss(metrics, "also-young", FALLING)
    jobs = [
        job("young-rising", started=NOW - timedelta(hours=3), tags=ALLOWED),
        job("old", started=NOW - timedelta(days=14)),
        job("also-young", started=NOW - timedelta(hours=5)),
    ]
    run, _ = runtime(metrics)
    findings = divergence_findings(jobs, REGION, run, NOW, None)
    # The twin returns the points as put, whatever the period: the periods asked for are what is checked. The
    # young walk holds the two losses and the sample counts of the one job that may be stopped.
    walks = sorted((c[2], c[3], c[5]) for c in metrics.calls if c[0] == "get_metric_data")
    assert walks == [(1, NOW - timedelta(days=14), 14 * 60), (3, NOW - timedelta(hours=5), 60)]
    assert [(f.reason, f.resource.id) for f in findings] == [(Reason.TRAINING_DIVERGED, "young-rising")]


def test_read_groups_give_each_period_one_walk_from_its_oldest_start() -> None:
    starts = {
        "a": NOW - timedelta(hours=2),
        "b": NOW - timedelta(hours=20),
        "c": NOW - timedelta(days=1, hours=6),
        "d": NOW - timedelta(days=30),  # beyond CloudWatch's one-minute data: read from LOOKBACK
    }
    groups = read_groups(starts, NOW)
    assert groups == [
        (NOW - timedelta(hours=20), 60, ["a", "b"]),
        (NOW - timedelta(days=1, hours=6), 120, ["c"]),
        (NOW - timedelta(days=14), 14 * 60, ["d"]),
    ]
    for start, period, _ in groups:
        assert (NOW - start).total_seconds() / period <= MAX_POINTS
    assert read_groups({}, NOW) == []
