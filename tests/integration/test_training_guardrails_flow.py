"""Training-job guardrails end to end on the local stack: loops, ceilings, the digest and the sweep's calls."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from costguard.aws import clients
from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import TrainingJob, World
from costguard.pricing import bundled_table
from tests.conftest import EVENTS, later, load_event, replay_with_status, with_reason

LOOP = [
    EVENTS / "sagemaker-training-job-failed-llama-0300.json",
    EVENTS / "sagemaker-training-job-failed-llama-0500.json",
    EVENTS / "sagemaker-training-job-failed-resnet.json",
    EVENTS / "sagemaker-training-job-failed.json",
]
OVER = EVENTS / "sagemaker-training-job-inprogress-over-ceiling.json"
CEILINGS = EVENTS / "schedule-training-ceilings-1200.json"
DIGEST_RUN = EVENTS / "schedule-training-digest-0000.json"
PRICES = bundled_table()["sagemaker"]


def cost_of(path: Path) -> float:
    detail = load_event(path.name)["detail"]
    config = detail["ResourceConfig"]
    return round(
        detail["BillableTimeInSeconds"] / 3600 * config["InstanceCount"] * PRICES[config["InstanceType"]], 2
    )


def test_a_burst_of_one_family_gives_exactly_one_loop_alert(stack: LocalStack, tmp_path: Path) -> None:
    again = load_event(LOOP[-1].name) | {"id": "another-delivery-of-the-same-failure"}
    (tmp_path / "again.json").write_text(json.dumps(again))
    results = replay(stack, [*LOOP, tmp_path / "again.json"])
    assert all(r.ok for r in results), [r.error for r in results]
    [loop] = with_reason(results, "job_failure_loop")
    assert (loop["resource_id"], loop["resource_kind"], loop["action"]) == (
        "llama-ft-nightly",
        "job_family",
        "notify",
    )
    llama = [p for p in LOOP if "llama" in p.name or p.name == "sagemaker-training-job-failed.json"]
    total = round(sum(cost_of(p) for p in llama), 2)
    assert loop["cost_usd"] == total
    [finding] = with_reason(results, "job_failure_loop", "findings")
    assert finding["evidence"]["failures"] == 3
    assert not any("resnet" in job for job in finding["evidence"]["jobs"])  # two families never merge
    messages = [m for m in stack.sink.messages if "Training job failing in a loop" in m["text"]]
    assert len(messages) == 1
    assert f"${total:,.2f}" in json.dumps(messages[0])


def test_two_families_never_merge(stack: LocalStack, tmp_path: Path) -> None:
    # Two llama failures and one resnet failure: three failures, but no family reaches three.
    results = replay(stack, [LOOP[0], LOOP[1], LOOP[2]])
    assert all(r.ok for r in results)
    assert with_reason(results, "job_failure_loop") == []


def ceiling_run(world: World, sink: SlackSink, mode: str | None, tmp_path: Path) -> tuple[list[Any], str]:
    """The job past its ceiling seen running, then the ceilings sweep 20 minutes later."""
    name = load_event(OVER.name)["detail"]["TrainingJobName"]
    return replay_with_status(world, sink, mode, [OVER, later(CEILINGS, tmp_path, 20)], name)


def test_job_past_its_ceiling_is_stopped_in_remediate(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    results, status = ceiling_run(world, sink, "remediate", tmp_path)
    assert all(r.ok for r in results), [r.error for r in results]
    first = with_reason(results[:1], "job_cost_ceiling")
    second = with_reason(results[1:2], "job_cost_ceiling")
    assert [(d["action"], d["dry_run"]) for d in first] == [("mark", False)]
    assert [(d["action"], d["dry_run"]) for d in second] == [("stop", False)]
    assert status == "Stopped"
    detail = load_event(OVER.name)["detail"]
    started = datetime.fromtimestamp(int(detail["TrainingStartTime"]) / 1000, world.now.tzinfo)
    hours = (world.now - started).total_seconds() / 3600
    assert first[0]["cost_usd"] == round(
        hours * detail["ResourceConfig"]["InstanceCount"] * PRICES["ml.p3.2xlarge"], 2
    )


def test_job_past_its_ceiling_is_only_reported_in_notify(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    results, status = ceiling_run(world, sink, None, tmp_path)
    decisions = with_reason(results, "job_cost_ceiling")
    assert decisions and all(d["dry_run"] for d in decisions)
    assert status == "InProgress"


def test_protected_job_is_never_stopped(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    jobs = [
        j.model_copy(update={"tags": j.tags | {"costguard:protect": "true"}})
        if j.name.startswith("gpt-eval")
        else j
        for j in world.training_jobs
    ]
    protected = world.model_copy(update={"training_jobs": jobs})
    results, status = ceiling_run(protected, sink, "remediate", tmp_path)
    # The event's own tags do not carry the protect tag: the sweep reads it with ListTags.
    swept = with_reason(results[1:2], "job_cost_ceiling")
    assert [d["action"] for d in swept] == ["notify"]
    assert "protected" in swept[0]["note"]
    # It may have been marked from the event (whose tags lack the protect tag), but it is never stopped.
    assert status == "InProgress"


def test_daily_digest(stack: LocalStack) -> None:
    finished = [
        EVENTS / "sagemaker-training-job-completed-spot.json",
        EVENTS / "sagemaker-training-job-stopped.json",
    ]
    results = replay(stack, [*finished, CEILINGS, DIGEST_RUN])
    assert all(r.ok for r in results)
    assert with_reason(results[2:3], "training_digest") == []  # not the first run of a day
    [digest] = with_reason(results[3:4], "training_digest")
    assert digest["action"] == "notify"
    assert digest["cost_usd"] == round(sum(cost_of(p) for p in finished), 2)
    spot = load_event(finished[0].name)["detail"]
    saved = round(
        (spot["TrainingTimeInSeconds"] - spot["BillableTimeInSeconds"])
        / 3600
        * spot["ResourceConfig"]["InstanceCount"]
        * PRICES[spot["ResourceConfig"]["InstanceType"]],
        2,
    )
    [finding] = with_reason(results[3:4], "training_digest", "findings")
    assert finding["evidence"]["spot_saving_usd"] == saved
    share = 1 - spot["BillableTimeInSeconds"] / spot["TrainingTimeInSeconds"]
    assert f"spot saved {share:.0%}" in json.dumps(finding["evidence"]["runs"])
    # Replaying the midnight run again posts no second digest.
    [again] = replay(stack, [DIGEST_RUN])
    assert with_reason([again], "training_digest") == []


def test_ceiling_sweep_over_500_jobs_counts_its_calls(
    sink: SlackSink, sleeps: list[float], world: World
) -> None:
    n, over_every = 500, 5
    started = world.now - timedelta(hours=2)
    hourly = PRICES["ml.g5.xlarge"]
    jobs = [
        TrainingJob(
            name=f"sweep-job-{i:03d}",
            instance_type="ml.g5.xlarge",
            status="InProgress",
            started=started,
            gpu_pattern="none",
            # every fifth job's ceiling is under what 2 hours cost; the rest are far above
            tags={"costguard:max-usd": str(round(hourly, 2) if i % over_every == 0 else 1000)},
        )
        for i in range(n)
    ]
    big = World(account=world.account, region=world.region, now=world.now, training_jobs=jobs)
    with LocalStack(big, sink=sink) as stack:
        [result] = replay(stack, [CEILINGS])
        calls = dict(clients.calls)
    assert result.ok, result.error
    sagemaker = {op: c for (service, op), c in calls.items() if service == "sagemaker"}
    # ListTrainingJobs pages, one DescribeTrainingJob per job (no list call carries type, count or settings)
    # and one ListTags per job (no list or describe call returns tags): nothing else.
    assert sagemaker == {"ListTrainingJobs": math.ceil(n / 100), "DescribeTrainingJob": n, "ListTags": n}
    over = with_reason([result], "job_cost_ceiling")
    assert len(over) == n // over_every
    assert {d["cost_usd"] for d in over} == {round(2 * hourly, 2)}
