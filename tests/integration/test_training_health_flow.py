"""The training sweep's health checks end to end on the local stack: a diverged run (training_diverged) and a stale
checkpoint (checkpoint_stale), their dollar figures from the world and the price table, the calls they add, and
the demo."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from costguard.aws import clients
from costguard.local.demo import run_demo
from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import TrainingJob, TrainingMetric, World
from costguard.model import Reason
from costguard.notify.titles import TITLES
from costguard.pricing import bundled_table
from tests.conftest import EVENTS, job_status, later, load_event, replay_with_status, with_reason

CEILINGS = EVENTS / "schedule-training-ceilings-1200.json"
CHECKPOINTED = EVENTS / "sagemaker-training-job-inprogress-spot-checkpointed.json"
PRICES = bundled_table()["sagemaker"]
DIVERGED, STALE = "llm-sft-2026-11-20-09-00-00", "vision-detr-spot-2026-11-20-07-00-00"
# How a group message counts them: by their titles.
DIVERGED_TITLE, STALE_TITLE = TITLES[Reason.TRAINING_DIVERGED], TITLES[Reason.CHECKPOINT_STALE]


def world_job(world: World, name: str) -> TrainingJob:
    [job] = [j for j in world.training_jobs if j.name == name]
    return job


def hourly_usd(job: TrainingJob) -> float:
    """The job's own $/h from the world file: instance count x price."""
    return round(job.instance_count * PRICES[job.instance_type], 2)


def rest_of_run_usd(job: TrainingJob, now: datetime) -> float:
    """What is left of the job's max runtime at ``now`` x instance count x price, from the world file."""
    assert job.started is not None and job.max_runtime_seconds is not None
    left = job.max_runtime_seconds - (now - job.started).total_seconds()
    return round(left / 3600 * job.instance_count * PRICES[job.instance_type], 2)


def at_risk_usd(job: TrainingJob, now: datetime) -> float:
    """The hours since the world's last checkpoint write x instance count x price."""
    hours = (now - max(job.checkpoints_written)).total_seconds() / 3600
    return round(hours * job.instance_count * PRICES[job.instance_type], 2)


def test_the_noon_sweep_reports_the_diverged_run_and_the_stale_checkpoint(
    stack: LocalStack, world: World
) -> None:
    results = replay(stack, [CHECKPOINTED, CEILINGS])
    assert all(r.ok for r in results), [r.error for r in results]
    assert results[0].findings == []  # a well-launched spot job: nothing to say at its start
    [diverged] = with_reason(results, "training_diverged", "findings")
    [stale] = with_reason(results, "checkpoint_stale", "findings")
    assert (diverged["resource_id"], stale["resource_id"]) == (DIVERGED, STALE)
    # Only those two: busy jobs without metric definitions, and the hung job, are not judged here.
    judged = {
        f["resource_id"]
        for f in results[1].findings
        if f["reason"] in ("training_diverged", "checkpoint_stale")
    }
    assert judged == {DIVERGED, STALE}

    assert diverged["evidence"]["rule"] == "NaN or infinity"
    assert diverged["evidence"]["recent_values"][-1] == "NaN"
    assert diverged["evidence"]["rest_of_run_usd"] == rest_of_run_usd(world_job(world, DIVERGED), world.now)
    assert diverged["evidence"]["rest_of_run_usd"] == 297.78  # the figure worked out in worlds/demo.yaml
    assert stale["evidence"]["at_risk_usd"] == at_risk_usd(world_job(world, STALE), world.now) == 15.30
    assert stale["evidence"]["newest_checkpoint_at"].startswith("2026-11-20T10:00:00")

    [mark] = with_reason(results, "training_diverged")
    assert (mark["action"], mark["dry_run"]) == ("mark", True)  # notify mode: what remediate would do
    [told] = with_reason(results, "checkpoint_stale")
    assert told["action"] == "notify"
    # Five training jobs found at noon (the world's vit-eval run nears its ceiling, gpt-eval is over its own, and
    # the four-node pretraining run is hung): more than a few of one kind, so one group message. Its total counts
    # each job once at its own price; each row shows the job's $/h and its verdict (a row carries no evidence
    # figure: the two above are the findings' own).
    judged_at_noon = {f["resource_id"] for f in results[1].findings}
    assert len(judged_at_noon) == 5 and "llm-pretrain-4node" in judged_at_noon
    hourly = {name: hourly_usd(world_job(world, name)) for name in judged_at_noon}
    [group] = stack.sink.messages
    total = f"${sum(hourly.values()):,.2f}/h"
    assert group["text"] == f"costguard: 5 findings (123456789012/us-east-1): {total}"  # $113.74/h
    rows = {
        name: [b["text"]["text"] for b in group["blocks"] if name in json.dumps(b)] for name in judged_at_noon
    }
    assert all(len(lines) == 1 for lines in rows.values()), rows
    assert f"${hourly[DIVERGED]:,.2f}/h · {DIVERGED_TITLE} · " in rows[DIVERGED][0]
    assert f"${hourly[STALE]:,.2f}/h · {STALE_TITLE} · " in rows[STALE][0]


def test_the_shipped_event_names_the_metrics_the_world_publishes(world: World) -> None:
    detail = load_event(CHECKPOINTED.name)["detail"]
    defined = [d["Name"] for d in detail["AlgorithmSpecification"]["MetricDefinitions"]]
    job = world_job(world, detail["TrainingJobName"])
    assert defined == [m.name for m in job.metrics]
    assert detail["CheckpointConfig"]["S3Uri"] == job.checkpoint_s3_uri


def run_twice(world: World, sink: SlackSink, mode: str | None, tmp_path: Path) -> tuple[list[Any], str]:
    """The noon sweep, then another 20 minutes later (past the 15-minute grace)."""
    return replay_with_status(world, sink, mode, [CEILINGS, later(CEILINGS, tmp_path, 20)], DIVERGED)


def test_a_diverged_job_tagged_to_allow_it_is_marked_then_stopped_in_remediate(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    results, status = run_twice(world, sink, "remediate", tmp_path)
    assert all(r.ok for r in results), [r.error for r in results]
    first = [(d["action"], d["dry_run"]) for d in with_reason(results[:1], "training_diverged")]
    second = [(d["action"], d["dry_run"]) for d in with_reason(results[1:], "training_diverged")]
    assert (first, second) == ([("mark", False)], [("stop", False)])
    assert status == "Stopped"


def test_an_untagged_diverged_job_is_only_reported_even_in_remediate(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    jobs = [
        j.model_copy(
            update={"tags": {k: v for k, v in j.tags.items() if k != "costguard:stop-on-divergence"}}
        )
        if j.name == DIVERGED
        else j
        for j in world.training_jobs
    ]
    results, status = run_twice(world.model_copy(update={"training_jobs": jobs}), sink, "remediate", tmp_path)
    decisions = with_reason(results, "training_diverged")
    assert decisions and {d["action"] for d in decisions} == {"notify"}
    [finding, *_] = with_reason(results, "training_diverged", "findings")
    assert "costguard:stop-on-divergence=true" in finding["summary"]
    assert status == "InProgress"


def test_the_health_checks_add_one_batched_metric_walk_and_a_list_per_checkpointing_job(
    sink: SlackSink, sleeps: list[float], world: World
) -> None:
    """300 jobs with two metrics each: 600 queries, two GetMetricData calls (500 a call), not one per job. A third
    of them are managed spot with a checkpoint location: one ListObjectsV2 each, except those younger than the
    interval and the one opted out; no S3 call for any other job."""
    n, started = 300, world.now - timedelta(hours=2)
    bucket = "s3://sagemaker-us-east-1-123456789012/ckpt"
    jobs = []
    for i in range(n):
        spot = i % 3 == 0
        young = spot and i % 2 == 0 and i < 60  # ten jobs started 20 minutes ago: no checkpoint owed yet
        jobs.append(
            TrainingJob(
                name=f"health-job-{i:03d}",
                instance_type="ml.g5.xlarge",
                started=world.now - timedelta(minutes=20) if young else started,
                gpu_pattern="none",
                managed_spot=spot,
                checkpoint_s3_uri=f"{bucket}/health-job-{i:03d}/" if spot else None,
                checkpoints_written=[world.now - timedelta(minutes=10)] if spot else [],
                tags={"costguard:checkpoint": "false"} if i == 3 else {},
                metrics=[TrainingMetric(name="train:loss"), TrainingMetric(name="validation:loss")],
            )
        )
    spot_jobs = [j for j in jobs if j.managed_spot]
    owed = [j for j in spot_jobs if j.started == started and j.tags.get("costguard:checkpoint") != "false"]
    assert len(spot_jobs) == 100 and len(owed) == 89
    big = World(account=world.account, region=world.region, now=world.now, training_jobs=jobs)
    with LocalStack(big, sink=sink) as stack:
        [result] = replay(stack, [CEILINGS])
        calls = dict(clients.calls)
    assert result.ok, result.error
    assert calls.get(("cloudwatch", "GetMetricData")) == math.ceil(2 * n / 500) == 2
    s3 = {op: c for (service, op), c in calls.items() if service == "s3"}
    assert s3 == {"ListObjectsV2": len(owed)}
    # Falling losses and fresh checkpoints: healthy, nothing to say.
    assert not [f for f in result.findings if f["reason"] in ("training_diverged", "checkpoint_stale")]


def test_jobs_without_metric_definitions_or_checkpoints_cost_no_call(
    sink: SlackSink, sleeps: list[float], world: World
) -> None:
    jobs = [
        TrainingJob(name=f"plain-{i}", instance_type="ml.g5.xlarge", started=world.now - timedelta(hours=2))
        for i in range(20)
    ]
    plain = World(account=world.account, region=world.region, now=world.now, training_jobs=jobs)
    with LocalStack(plain, sink=sink) as stack:
        [result] = replay(stack, [CEILINGS])
        calls = dict(clients.calls)
    assert result.ok, result.error
    assert not {op for (service, op) in calls if service in ("cloudwatch", "s3")}


def test_a_rising_loss_is_reported_with_its_readings(
    sink: SlackSink, sleeps: list[float], world: World
) -> None:
    rising = TrainingJob(
        name="rising-loss",
        instance_type="ml.p3.2xlarge",
        started=world.now - timedelta(hours=3),
        max_runtime_seconds=10 * 3600,
        metrics=[TrainingMetric(name="train:loss", shape="rising", step_minutes=10)],
    )
    one = World(account=world.account, region=world.region, now=world.now, training_jobs=[rising])
    with LocalStack(one, sink=sink) as stack:
        [result] = replay(stack, [CEILINGS])
    [finding] = with_reason([result], "training_diverged", "findings")
    assert finding["evidence"]["rule"] == "rising loss"
    # 0.5 + minutes / 100, every 10 minutes: the last reading before now (GetMetricData's end is exclusive) is
    # 170 minutes in.
    assert finding["evidence"]["recent_values"][-1] == "2.2"
    assert finding["evidence"]["rest_of_run_usd"] == round(7 * PRICES["ml.p3.2xlarge"], 2)


def test_the_demo_stops_the_diverged_run_in_remediate_and_tells_the_stale_checkpoint(
    world: World, sink: SlackSink, sleeps: list[float]
) -> None:
    """`costguard demo` in remediate: the 12:00 training sweep marks the NaN-loss job (told in the noon group
    with the stale checkpoint), the midnight run stops it and tells the checkpoint, staler, again."""
    run = run_demo(world, "remediate", sink=sink)
    assert all(r.ok for r in run.results), [r.error for r in run.results if not r.ok]
    actions = [(d["action"], d["dry_run"]) for d in with_reason(run.results, "training_diverged")]
    assert actions == [("mark", False), ("stop", False)]
    assert [d["action"] for d in with_reason(run.results, "checkpoint_stale")] == ["notify", "notify"]
    midnight = datetime.fromisoformat(
        load_event("schedule-training-digest-0000.json")["time"].replace("Z", "+00:00")
    )
    [stopped] = [m for m in run.posted if DIVERGED in m["text"] and "Stopped" in json.dumps(m["blocks"])]
    assert f"${rest_of_run_usd(world_job(world, DIVERGED), midnight):,.2f}" in json.dumps(stopped)  # $127.62
    # Told at noon, then again in its thread at midnight with what is at risk by then.
    *_, told = [m for m in run.posted if m["text"].startswith(f"costguard: Checkpoints stopped: {STALE}")]
    assert f"${at_risk_usd(world_job(world, STALE), midnight):,.2f}" in json.dumps(told)  # 14h: $107.10
    # Both opened in the channel at noon: one group of training jobs, or each alone when the notifier's batch of
    # the noon sweep's notices is split between two invocations (the demo's noon batch is larger than one).
    opened = [json.dumps(m) for m in run.channel_messages]
    assert any(DIVERGED in m and (DIVERGED_TITLE in m) for m in opened)
    assert any(STALE in m and (STALE_TITLE in m) for m in opened)


def test_the_adapter_reads_one_page_and_says_when_there_is_more() -> None:
    from moto import mock_aws

    from costguard.aws.buckets import PAGE
    from costguard.aws.checkpoints import newest_object

    with mock_aws():
        clients.reset()
        s3 = clients.client("s3", "us-east-1")
        s3.create_bucket(Bucket="ckpt")
        s3.put_object(Bucket="ckpt", Key="elsewhere/x.pt", Body=b"x")
        for n in range(PAGE + 1):
            s3.put_object(Bucket="ckpt", Key=f"run/shard-{n:05d}.pt", Body=b"x")
        clients.calls.clear()
        big = newest_object("us-east-1", "ckpt", "run/")
        small = newest_object("us-east-1", "ckpt", "elsewhere/")
        empty = newest_object("us-east-1", "ckpt", "nothing/")
        calls = dict(clients.calls)
    clients.reset()
    assert (big.objects, big.truncated, big.newest is not None) == (PAGE, True, True)
    assert (small.objects, small.truncated, small.newest is not None) == (1, False, True)
    assert (empty.objects, empty.truncated, empty.newest) == (0, False, None)
    assert calls == {("s3", "ListObjectsV2"): 3}  # one call each, whatever the prefix holds


def test_the_sagemaker_sweep_between_two_training_sweeps_leaves_the_divergence_mark(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    """The SageMaker idle sweep runs between two training sweeps and sees the marked job busy: a divergence mark
    is not the idle sweep's to cancel (model.mark_text), so the stop still comes at the next training sweep."""
    sagemaker_sweep = later(EVENTS / "schedule-sagemaker-sweep.json", tmp_path, 10)
    with LocalStack(world, sink=sink, mode="remediate") as stack:
        results = replay(stack, [CEILINGS, sagemaker_sweep, later(CEILINGS, tmp_path, 20)])
        status = job_status(DIVERGED)
    assert all(r.ok for r in results), [r.error for r in results]
    assert not [d for d in with_reason(results[1:2], "gpu_active_again") if d["resource_id"] == DIVERGED]
    assert [d["action"] for d in with_reason(results[2:], "training_diverged")] == ["stop"]
    assert status == "Stopped"
