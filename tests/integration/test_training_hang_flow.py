"""job_hung through the embedded stack: the training sweep over the demo world (moto, its CloudWatch Logs holding
each host's stream), the hung four-node job found with its dollars since its last output, the slow but healthy
one left alone, "cannot tell" where the logs or the GPUs cannot be read, the opt-in read as first seen, and the
calls a sweep makes at 100 jobs."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.client import BaseClient
from botocore.exceptions import ClientError

from costguard.aws import clients
from costguard.detect.training_hang import HANG_TAG
from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.training_health import log_lines
from costguard.local.world import TrainingJob, TrainingMetric, World
from costguard.pricing import bundled_table
from tests.conftest import EVENTS, job_status, later, replay_with_status, with_reason
from tests.integration.test_arming_tags_flow import add_tags

CEILINGS = EVENTS / "schedule-training-ceilings-1200.json"
PRICES = bundled_table()["sagemaker"]
HUNG, SLOW = "llm-pretrain-4node", "vision-eval-slow"
HANG_REASONS = ("job_hung", "job_hang_unknown")


def world_job(world: World, name: str) -> TrainingJob:
    [job] = [j for j in world.training_jobs if j.name == name]
    return job


def last_output(job: TrainingJob, now: datetime) -> datetime:
    """The last thing the world's job wrote: its last log line on any host (its metrics stop with them)."""
    return max(at for host in range(1, job.instance_count + 1) for at, _ in log_lines(job, host, now, now))


def findings_on(results: list[Any], job: str) -> list[dict[str, Any]]:
    return [f for r in results for f in r.findings if f["resource_id"] == job and f["reason"] in HANG_REASONS]


def with_job(world: World, name: str, **update: Any) -> World:
    jobs = [j.model_copy(update=update) if j.name == name else j for j in world.training_jobs]
    return world.model_copy(update={"training_jobs": jobs})


def test_the_noon_sweep_finds_the_hung_job_with_its_dollars_and_leaves_the_slow_one(
    stack: LocalStack, world: World
) -> None:
    [result] = replay(stack, [CEILINGS])
    assert result.ok, result.error
    [hung] = findings_on([result], HUNG)
    assert hung["reason"] == "job_hung"
    job = world_job(world, HUNG)
    since = last_output(job, world.now)
    hours = (world.now - since).total_seconds() / 3600
    hourly = job.instance_count * PRICES[job.instance_type]
    evidence = hung["evidence"]
    assert evidence["silent_since"] == since.isoformat()
    assert evidence["hang_cost_usd"] == pytest.approx(round(hours * hourly, 2), abs=0.01)
    assert hung["hourly_usd"] == pytest.approx(hourly, abs=0.01)
    assert len(evidence["silent_hosts"]) == job.instance_count == 4
    assert evidence["lowest_gpu_percent"] >= 97.0  # a wait in an all-reduce
    assert evidence["last_log_lines"] and all("all-reduce" in line for line in evidence["last_log_lines"])
    assert f"{since:%Y-%m-%d %H:%M} UTC" in hung["summary"] and f"${hours * hourly:,.2f}" in hung["summary"]
    # The slow one: 25 minutes without a metric during its evaluation pass, but its host logs: nothing to say.
    assert findings_on([result], SLOW) == []
    assert with_reason([result], "job_hang_unknown", "findings") == []
    [mark] = with_reason([result], "job_hung")
    assert (mark["action"], mark["dry_run"]) == ("mark", True)  # notify mode: what remediate would do


@pytest.fixture
def logs_denied(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every CloudWatch Logs call refused (the role lacks logs:*, or the group's policy denies it)."""
    refused: list[str] = []
    call = BaseClient._make_api_call  # type: ignore[attr-defined]

    def denied(self: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        if self.meta.service_model.service_name == "logs":
            refused.append(operation)
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "denied"}}, operation)
        return call(self, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", denied)
    return refused


def test_a_job_whose_logs_cannot_be_read_is_cannot_tell_never_hung(
    world: World, sink: SlackSink, sleeps: list[float], logs_denied: list[str]
) -> None:
    with LocalStack(world, sink=sink, mode="remediate") as stack:
        [result] = replay(stack, [CEILINGS])
        status = job_status(HUNG)
    assert result.ok, result.error
    assert logs_denied
    [unknown] = findings_on([result], HUNG)
    assert unknown["reason"] == "job_hang_unknown"
    assert "AccessDeniedException" in unknown["summary"] and "not stopped" in unknown["summary"]
    assert with_reason([result], "job_hung", "findings") == []
    assert {d["action"] for d in with_reason([result], "job_hang_unknown")} == {"notify"}
    assert status == "InProgress"


def test_a_job_whose_gpu_metrics_are_missing_is_cannot_tell_never_hung(
    world: World, sink: SlackSink, sleeps: list[float]
) -> None:
    silent_gpus = with_job(world, HUNG, gpu_pattern="none")
    with LocalStack(silent_gpus, sink=sink, mode="remediate") as stack:
        [result] = replay(stack, [CEILINGS])
    assert result.ok, result.error
    [unknown] = findings_on([result], HUNG)
    assert unknown["reason"] == "job_hang_unknown"
    assert "no GPUUtilization from algo-1, algo-2, algo-3, algo-4" in unknown["summary"]


def test_an_opted_in_hung_job_is_marked_then_stopped_in_remediate(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    results, status = replay_with_status(
        world, sink, "remediate", [CEILINGS, later(CEILINGS, tmp_path, 20)], HUNG
    )
    assert all(r.ok for r in results), [r.error for r in results]
    first = [(d["action"], d["dry_run"]) for d in with_reason(results[:1], "job_hung")]
    second = [(d["action"], d["dry_run"]) for d in with_reason(results[1:], "job_hung")]
    assert (first, second) == ([("mark", False)], [("stop", False)])  # re-judged hung at the second sweep
    assert status == "Stopped"


@pytest.fixture
def untagged_remediating(world: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    job = world_job(world, HUNG)
    untagged = with_job(world, HUNG, tags={k: v for k, v in job.tags.items() if k != HANG_TAG})
    with LocalStack(untagged, sink=sink, mode="remediate", until=world.now + timedelta(minutes=30)) as stack:
        yield stack


def test_a_stop_on_hang_tag_added_after_first_sighting_only_notifies(
    untagged_remediating: LocalStack, tmp_path: Path
) -> None:
    add_tags(
        HUNG, **{HANG_TAG: "true"}
    )  # anyone allowed sagemaker:AddTags, after costguard first saw the job
    results = replay(untagged_remediating, [CEILINGS, later(CEILINGS, tmp_path, 20)])
    assert all(r.ok for r in results), [r.error for r in results]
    decisions = with_reason(results, "job_hung")
    assert decisions and {d["action"] for d in decisions} == {"notify"}
    assert f"{HANG_TAG}=true was added after costguard first saw it" in decisions[0]["note"]
    assert job_status(HUNG) == "InProgress"


def test_an_untagged_hung_job_is_told_with_the_tag_to_add(
    untagged_remediating: LocalStack, tmp_path: Path
) -> None:
    [result] = replay(untagged_remediating, [CEILINGS])
    [finding] = with_reason([result], "job_hung", "findings")
    assert f"Tag it {HANG_TAG}=true" in finding["summary"]
    assert {d["action"] for d in with_reason([result], "job_hung")} == {"notify"}


def test_a_sweep_of_100_jobs_reads_logs_only_for_the_quiet_ones(
    sink: SlackSink, sleeps: list[float], world: World
) -> None:
    """100 jobs: 90 writing their loss every 5 minutes (no log read at all), 8 defining no metric and logging
    (their streams and one FilterLogEvents each: alive), 2 hung on two hosts each (their streams, one
    FilterLogEvents, then one GetLogEvents per host, and their hosts' GPUs in one GetMetricData walk)."""
    started = world.now - timedelta(hours=3)
    jobs = []
    for i in range(100):
        writing, plain = i < 90, 90 <= i < 98
        jobs.append(
            TrainingJob(
                name=f"hang-scale-{i:03d}",
                instance_type="ml.g5.12xlarge",
                instance_count=1 if writing or plain else 2,
                started=started,
                gpu_pattern="busy" if writing or plain else "spinning",
                metrics=[] if plain else [TrainingMetric(name="train:loss")],
                silent_from=None if writing or plain else world.now - timedelta(hours=1),
            )
        )
    fleet = World(account=world.account, region=world.region, now=world.now, training_jobs=jobs)
    with LocalStack(fleet, sink=sink) as stack:
        clients.calls.clear()
        [result] = replay(stack, [CEILINGS])
        calls = dict(clients.calls)
    assert result.ok, result.error
    logs = {op: c for (service, op), c in calls.items() if service == "logs"}
    assert logs == {"DescribeLogStreams": 10, "FilterLogEvents": 10, "GetLogEvents": 2 * 2}
    # The 92 jobs' losses in one walk (their runs share a read period), the hung jobs' four hosts in another.
    assert calls.get(("cloudwatch", "GetMetricData")) == math.ceil(92 / 500) + 1 == 2
    hung = {f["resource_id"] for f in result.findings if f["reason"] == "job_hung"}
    assert hung == {"hang-scale-098", "hang-scale-099"}
    assert with_reason([result], "job_hang_unknown", "findings") == []
