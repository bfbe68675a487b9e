"""Evidence costguard cannot vouch for never stops, scales or deletes: tried through the embedded stack as someone
with ordinary permissions in the account would (the door they use, then costguard's sweeps).

- a mark tag written by anyone (dated in the past, in the future, or left over from an earlier run) is void:
  costguard marks afresh, tells, and gives the grace period (act/marks.py);
- a reading outside its physical range (a GPU below 0% or above 100%) is no reading: nothing is advised on it;
- an arming tag added after costguard first saw the resource only notifies (act/arming.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard.aws import clients
from costguard.local.replay import ReplayResult, replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.model import MARK_TAG_KEY
from tests.conftest import EVENTS, load_event

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
GPU_SWEEP = EVENTS / "schedule-gpu-sweep-1200.json"
ACCOUNT, REGION = "123456789012", "us-east-1"
LAUNCHED = NOW - timedelta(hours=6)
IDLE, OTHER = "i-0c0ffee0000000a01", "i-0c0ffee0000000a02"


def world(**parts: Any) -> World:
    return World.model_validate({"account": ACCOUNT, "region": REGION, "now": NOW} | parts)


def idle(instance_id: str, **spec: Any) -> dict[str, Any]:
    return {
        "id": instance_id,
        "type": "g6e.xlarge",
        "launched": LAUNCHED,
        "gpu_metrics": {"pattern": "idle"},
    } | spec


def sweep_at(tmp_path: Path, at: datetime, number: int) -> Path:
    """The GPU sweep's schedule event at another time."""
    event = load_event(GPU_SWEEP.name)
    event["id"], event["time"] = f"c0ffee00-0000-4000-8000-{number:012d}", at.strftime("%Y-%m-%dT%H:%M:%SZ")
    path = tmp_path / f"sweep-{number}.json"
    path.write_text(json.dumps(event))
    return path


def ec2_instance(instance_id: str) -> dict[str, Any]:
    [reservation] = clients.ec2().describe_instances(InstanceIds=[instance_id])["Reservations"]
    described: dict[str, Any] = reservation["Instances"][0]
    return described


def ec2_tags(instance_id: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in ec2_instance(instance_id).get("Tags", [])}


def decided(results: list[ReplayResult], resource_id: str) -> list[dict[str, Any]]:
    return [d for r in results for d in r.decisions if d["resource_id"] == resource_id]


def slack_text(results: list[ReplayResult]) -> str:
    return json.dumps([m for r in results for m in r.slack])


@pytest.fixture
def sink() -> Iterator[SlackSink]:
    with SlackSink() as running:
        yield running


# -- a mark written by anyone ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("forged", "why"),
    [
        ("2026-11-20T09:00:00+00:00 gpu_idle", "costguard holds no record of writing it"),
        ("2099-01-01T00:00:00+00:00", "costguard holds no record of writing it"),
    ],
    ids=["dated-in-the-past", "dated-2099"],
)
def test_a_mark_tag_written_by_anyone_is_void_marked_afresh_told_and_given_the_grace_period(
    sink: SlackSink, sleeps: list[float], tmp_path: Path, forged: str, why: str
) -> None:
    later = NOW + timedelta(minutes=20)  # past the template's 15-minute grace period from 12:00
    with LocalStack(world(instances=[idle(IDLE)]), sink=sink, mode="remediate", until=later) as stack:
        # The door: ec2:CreateTags, which a data scientist's role has on the instances it works with.
        clients.ec2().create_tags(Resources=[IDLE], Tags=[{"Key": MARK_TAG_KEY, "Value": forged}])

        [first] = replay(stack, [sweep_at(tmp_path, NOW, 1)])
        assert first.ok, first.error
        [decision] = decided([first], IDLE)
        assert decision["action"] == "mark"  # not a stop at first sight, not a grace period until 2099
        assert "was ignored" in decision["note"] and why in decision["note"]
        assert ec2_instance(IDLE)["State"]["Name"] == "running"
        assert ec2_tags(IDLE)[MARK_TAG_KEY] == NOW.isoformat()  # costguard's own mark replaced it
        assert "Marked" in slack_text([first]) or "mark" in slack_text([first]).lower()
        assert forged[:19] in slack_text([first])  # the message says what was ignored

        [second] = replay(stack, [sweep_at(tmp_path, later, 2)])
        assert second.ok, second.error
        assert [d["action"] for d in decided([second], IDLE)] == ["stop"]  # its own mark, after the grace
        assert ec2_instance(IDLE)["State"]["Name"] in ("stopping", "stopped")


def test_a_mark_from_before_a_restart_is_void_so_the_restarted_instance_is_marked_and_told_again(
    sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    restarted = NOW + timedelta(minutes=30)
    end = restarted + timedelta(minutes=70)
    with LocalStack(world(instances=[idle(IDLE)]), sink=sink, mode="remediate", until=end) as stack:
        results = replay(
            stack, [sweep_at(tmp_path, NOW, 1), sweep_at(tmp_path, NOW + timedelta(minutes=20), 2)]
        )
        assert [d["action"] for d in decided(results, IDLE)] == ["mark", "stop"]
        assert MARK_TAG_KEY in ec2_tags(IDLE)  # the stop leaves the tag, as AWS keeps tags

        # The owner starts it again at 12:30: a new LaunchTime.
        from moto.ec2.models import ec2_backends

        clients.ec2().start_instances(InstanceIds=[IDLE])
        backend_instance = ec2_backends[ACCOUNT][REGION].get_instance_by_id(IDLE)
        assert backend_instance is not None
        backend_instance.launch_time = restarted.isoformat()

        after = replay(stack, [sweep_at(tmp_path, restarted + timedelta(minutes=35), 3)])
        assert all(r.ok for r in after), [r.error for r in after]
        [decision] = decided(after, IDLE)
        assert decision["action"] == "mark"  # told again, a grace period again: not stopped on the old mark
        assert "was ignored" in decision["note"]
        assert ec2_instance(IDLE)["State"]["Name"] == "running"


def test_a_shadow_mark_from_before_a_restart_is_void_so_notify_mode_tells_the_new_run(
    sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    restarted = NOW + timedelta(minutes=30)
    end = restarted + timedelta(minutes=70)
    with LocalStack(world(instances=[idle(IDLE)]), sink=sink, mode="notify", until=end) as stack:
        results = replay(
            stack, [sweep_at(tmp_path, NOW, 1), sweep_at(tmp_path, NOW + timedelta(minutes=20), 2)]
        )
        assert [(d["action"], d["dry_run"]) for d in decided(results, IDLE)] == [
            ("mark", True),
            ("stop", True),
        ]

        from moto.ec2.models import ec2_backends

        backend_instance = ec2_backends[ACCOUNT][REGION].get_instance_by_id(IDLE)
        assert backend_instance is not None
        backend_instance.launch_time = restarted.isoformat()  # its owner stopped and started it at 12:30

        after = replay(stack, [sweep_at(tmp_path, restarted + timedelta(minutes=35), 3)])
        assert all(r.ok for r in after), [r.error for r in after]
        [decision] = decided(after, IDLE)
        assert (decision["action"], decision["dry_run"]) == (
            "mark",
            True,
        )  # the new run: marked and told anew
