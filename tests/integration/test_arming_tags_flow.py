"""Arming tags are read as costguard first saw them (act/arming.py): tried through the embedded stack as someone
with ordinary permissions would, with the door they use (sagemaker:AddTags, ec2:CreateTags), then the sweeps.

A ceiling or opt-in added or tightened after costguard first saw the resource makes a finding that notifies
only and names the change; one the owner set from the start still arms the stop."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard.aws import clients
from costguard.local.replay import ReplayResult, replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from tests.conftest import EVENTS, job_status, later

CEILINGS = EVENTS / "schedule-training-ceilings-1200.json"
BUSY_WITHOUT_CEILING = "vision-vit-train"  # the demo world's busy job, with no ceiling of its own
OWN_CEILING = "gpt-eval-sweep-2026-11-20-02-00-00"  # over the $60 ceiling its owner set when it was created
NEARING = "vit-eval-2026-11-20-09-30-00"  # $7.04 spent against its owner's $8


def decided(results: list[ReplayResult], job: str) -> list[dict[str, Any]]:
    return [d for r in results for d in r.decisions if d["resource_id"] == job]


def job_arn(name: str) -> str:
    arn: str = clients.client("sagemaker").describe_training_job(TrainingJobName=name)["TrainingJobArn"]
    return arn


def add_tags(name: str, **tags: str) -> None:
    """The door: sagemaker:AddTags, which a data scientist's or a CI role has on the account's jobs."""
    clients.client("sagemaker").add_tags(
        ResourceArn=job_arn(name), Tags=[{"Key": k, "Value": v} for k, v in tags.items()]
    )


@pytest.fixture
def remediating(world: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    with LocalStack(world, sink=sink, mode="remediate", until=world.now + timedelta(minutes=30)) as stack:
        yield stack


def sweeps(stack: LocalStack, tmp_path: Path) -> list[ReplayResult]:
    results = replay(stack, [CEILINGS, later(CEILINGS, tmp_path, 20)])
    assert all(r.ok for r in results), [r.error for r in results]
    return results


def test_a_ceiling_added_to_a_colleagues_busy_job_is_told_and_never_stops_it(
    remediating: LocalStack, tmp_path: Path
) -> None:
    add_tags(BUSY_WITHOUT_CEILING, **{"costguard:max-usd": "0.01"})
    results = sweeps(remediating, tmp_path)
    mine = [d for d in decided(results, BUSY_WITHOUT_CEILING) if d["reason"] == "job_cost_ceiling"]
    assert mine, "the ceiling is still told"
    assert {d["action"] for d in mine} == {"notify"}  # never marked, never stopped
    assert "costguard:max-usd=0.01 was added after costguard first saw it" in mine[0]["note"]
    assert job_status(BUSY_WITHOUT_CEILING) == "InProgress"
    told = json.dumps(remediating.sink.messages)
    assert "costguard:max-usd=0.01 was added after costguard first saw it" in told
    # The ceiling its owner set from the start still stops the job over it.
    assert [d["action"] for d in decided(results, OWN_CEILING) if d["reason"] == "job_cost_ceiling"] == [
        "mark",
        "stop",
    ]
    assert job_status(OWN_CEILING) == "Stopped"


def test_a_ceiling_tightened_later_only_notifies_and_names_the_change(
    remediating: LocalStack, tmp_path: Path
) -> None:
    add_tags(NEARING, **{"costguard:max-usd": "5"})  # its owner's $8, cut to under what it has spent
    results = sweeps(remediating, tmp_path)
    mine = [d for d in decided(results, NEARING) if d["reason"] == "job_cost_ceiling"]
    assert mine and {d["action"] for d in mine} == {"notify"}
    assert "costguard:max-usd was changed from 8 to 5" in mine[0]["note"]
    assert job_status(NEARING) == "InProgress"


def test_a_ceiling_loosened_later_still_stops_a_job_over_it(remediating: LocalStack, tmp_path: Path) -> None:
    add_tags(OWN_CEILING, **{"costguard:max-usd": "70"})  # looser than its $60, and still under what it spent
    results = sweeps(remediating, tmp_path)
    assert [d["action"] for d in decided(results, OWN_CEILING) if d["reason"] == "job_cost_ceiling"] == [
        "mark",
        "stop",
    ]


def test_an_opt_in_added_later_to_an_idle_reservation_never_cancels_it(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    capacity = EVENTS / "schedule-capacity-sweep.json"
    idle = [r for r in world.capacity_reservations if "costguard:auto-cancel" not in r.tags]
    if not idle:
        pytest.fail("the demo world has no reservation without an opt-in")
    with LocalStack(world, sink=sink, mode="remediate", until=world.now + timedelta(hours=3)) as stack:
        before = replay(stack, [capacity])
        told = [d for r in before for d in r.decisions if d["reason"] == "capacity_reservation_idle"]
        untagged = {d["resource_id"] for d in told} & {r.id for r in idle}
        assert untagged, "an idle reservation without an opt-in is told"
        target = sorted(untagged)[0]
        # The door: ec2:CreateTags on the reservation (the embedded EC2 has no reservations: its stand-in's tags).
        stack.capacity.tags[target]["costguard:auto-cancel"] = "true"
        results = replay(stack, [later(capacity, tmp_path, 60), later(capacity, tmp_path, 120)])
        mine = [d for r in results for d in r.decisions if d["resource_id"] == target]
        assert mine and {d["action"] for d in mine} == {"notify"}
        assert "costguard:auto-cancel=true was added after costguard first saw it" in mine[0]["note"]
        assert stack.capacity.states[target] == "active"


def test_an_auto_delete_opt_in_added_to_another_teams_throughput_never_deletes_it(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    legal = {
        "name": "legal-review-pt",  # idle since the 17th, no commitment, never opted in by its team
        "model": "amazon.titan-text-express-v1",
        "model_units": 1,
        "created": "2026-11-01T00:00:00Z",
        "invocations_per_hour": 30,
        "invocations_model_id": "arn",
        "invoked_until": "2026-11-17T12:00:00Z",
        "tags": {"team": "legal"},
    }
    sweep = EVENTS / "schedule-capacity-sweep.json"
    place = World.model_validate(
        world.model_dump()
        | {"provisioned_throughputs": [*world.model_dump()["provisioned_throughputs"], legal]}
    )
    with LocalStack(place, sink=sink, mode="remediate", until=place.now + timedelta(hours=2)) as stack:
        [arn] = [a for a, (_, spec) in stack.bedrock.by_arn.items() if spec.name == "legal-review-pt"]
        # The door: bedrock:TagResource, which another team's role has on the account's throughputs.
        stack.bedrock.tags[arn]["costguard:auto-delete"] = "true"
        results = replay(stack, [sweep, later(sweep, tmp_path, 60)])
        assert all(r.ok for r in results), [r.error for r in results]
        mine = [d for r in results for d in r.decisions if d["resource_id"] == "legal-review-pt"]
        assert mine and {d["action"] for d in mine} == {"notify"}  # never marked, never deleted
        assert "costguard:auto-delete=true was added after costguard first saw it" in mine[0]["note"]
        assert arn not in stack.bedrock.deleted
        # Its neighbour, opted in by its own team from the start, is still deleted after the grace period.
        deleted = {stack.bedrock.by_arn[a][1].name for a in stack.bedrock.deleted}
        assert deleted == {"support-bot-ft-pt"}
