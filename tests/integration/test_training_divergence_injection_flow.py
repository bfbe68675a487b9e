"""Datapoints added to a training job's own metrics, through the real PutMetricData, never stop a healthy run; a
genuinely diverged run is still marked and then stopped. The training sweep on the embedded AWS, in remediate."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard.aws import clients
from costguard.aws.sagemaker import TRAINING_NAMESPACE
from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import TrainingJob, TrainingMetric, World
from tests.conftest import EVENTS, job_status, later, with_reason

CEILINGS = EVENTS / "schedule-training-ceilings-1200.json"  # 12:00; the second sweep comes at 12:20
JOB = "llm-sft-healthy"


def one_job(world: World, metric: TrainingMetric) -> World:
    """A two-instance job started at 09:00, tagged to be stopped on divergence, alone in the world."""
    job = TrainingJob(
        name=JOB,
        instance_type="ml.g5.12xlarge",
        instance_count=2,
        started=world.now - timedelta(hours=3),
        tags={"costguard:stop-on-divergence": "true"},
        max_runtime_seconds=86400,
        metrics=[metric],
    )
    return World(account=world.account, region=world.region, now=world.now, training_jobs=[job])


def sweeps(
    world: World, sink: SlackSink, tmp_path: Path, added: Sequence[tuple[datetime, float]] = ()
) -> tuple[list[Any], str, int]:
    """Two training sweeps in remediate, 20 minutes apart (past the grace period), after ``added`` train:loss
    datapoints were put into the job's series by someone else: the results, the job's status, and the
    GetMetricData calls the sweeps made."""
    with LocalStack(world, mode="remediate", sink=sink, until=world.now + timedelta(minutes=30)) as stack:
        if added:
            clients.cloudwatch().put_metric_data(
                Namespace=TRAINING_NAMESPACE,
                MetricData=[
                    {
                        "MetricName": "train:loss",
                        "Dimensions": [{"Name": "TrainingJobName", "Value": JOB}],
                        "Timestamp": at,
                        "Value": value,
                    }
                    for at, value in added
                ],
            )
        clients.calls.clear()
        results = replay(stack, [CEILINGS, later(CEILINGS, tmp_path, 20)])
        reads = clients.calls[("cloudwatch", "GetMetricData")]
        status = job_status(JOB)
    assert all(r.ok for r in results), [r.error for r in results]
    return results, status, reads


def test_one_added_zero_at_0930_stops_nothing(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    """It once made the run's best reading, which no later one beat: a plateau, and a stop."""
    healthy = one_job(world, TrainingMetric(name="train:loss"))
    results, status, _ = sweeps(healthy, sink, tmp_path, [(world.now - timedelta(hours=2, minutes=30), 0.0)])
    assert with_reason(results, "training_diverged", "findings") == []
    assert status == "InProgress"


def test_thirteen_added_rising_points_stop_nothing_and_say_why(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    """0.01 to 0.13 every 5 minutes from 11:00, on the job's own minutes: each minute's Minimum climbs, but those
    minutes hold two samples where the job writes one. The rise is told, never acted on."""
    healthy = one_job(world, TrainingMetric(name="train:loss"))
    added = [(world.now - timedelta(minutes=60 - 5 * n), 0.01 * (n + 1)) for n in range(13)]
    results, status, _ = sweeps(healthy, sink, tmp_path, added)
    decisions = with_reason(results, "training_diverged")
    assert decisions and {d["action"] for d in decisions} == {"notify"}
    [finding, *_] = with_reason(results, "training_diverged", "findings")
    assert finding["evidence"]["rule"] == "rising loss" and finding["evidence"]["stop_on_divergence"]
    assert finding["evidence"]["added_datapoints"].startswith("2 samples in the 1-minute period from")
    assert "datapoints the job did not write" in finding["summary"]
    assert "costguard will not stop it" in json.dumps(sink.messages)
    assert status == "InProgress"


@pytest.mark.parametrize(
    ("metric", "rule"),
    [
        (TrainingMetric(name="train:loss", nan_from=datetime.fromisoformat("2026-11-20T11:30:00Z")), "NaN"),
        (TrainingMetric(name="train:loss", shape="rising", step_minutes=10), "rising loss"),
    ],
)
def test_a_genuinely_diverged_run_is_still_marked_then_stopped(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path, metric: TrainingMetric, rule: str
) -> None:
    """Its loss and its sample counts are read in one GetMetricData call a sweep."""
    results, status, reads = sweeps(one_job(world, metric), sink, tmp_path)
    actions = [(d["action"], d["dry_run"]) for d in with_reason(results, "training_diverged")]
    assert actions == [("mark", False), ("stop", False)]
    [finding, *_] = with_reason(results, "training_diverged", "findings")
    assert finding["evidence"]["rule"].startswith(rule) and finding["evidence"]["added_datapoints"] is None
    assert status == "Stopped"
    assert reads == 2
