"""Stops EC2 always refuses, on the embedded AWS through the deployed handlers: stop protection (DisableApiStop,
which moto implements: DescribeInstanceAttribute, ModifyInstanceAttribute and the StopInstances refusal) and an
IAM deny. Each is reported once per episode across five-minute sweeps, never crashes a sweep, and the
other instances of the run are still stopped."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard.aws import clients
from costguard.local.replay import ReplayResult, replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.model import MARK_TAG_KEY
from costguard.notify.notice import Notice
from tests.conftest import EVENTS

IDLE = "i-0a1f00000000000a1"  # p4d.24xlarge, idle
P5 = "i-0a1f00000000000a4"  # p5.48xlarge, idle (its protect tag removed here): the costlier of the two
SWEEP = timedelta(minutes=5)
PROTECTION = "stop protection is on (DisableApiStop)"
# A four-hour grace period with marks five hours old: only the two marked instances are stop candidates, and
# instances the first sweep marks stay in their grace period throughout. A ten-minute dedupe window: five-minute
# sweeps keep the episode open (each sighting extends it), so the refusal is not told again.
OVERRIDES = {"COSTGUARD_GRACE_MINUTES": "240", "COSTGUARD_DEDUPE_WINDOW_MINUTES": "10"}


def _marked_world(world: World) -> World:
    marked = (world.now - timedelta(hours=5)).isoformat()
    specs = []
    for spec in world.instances:
        if spec.id in (IDLE, P5):
            tags = {k: v for k, v in spec.tags.items() if k != "costguard:protect"}
            spec = spec.model_copy(update={"tags": {**tags, MARK_TAG_KEY: marked}})
        specs.append(spec)
    return World.model_validate(world.model_dump() | {"instances": [s.model_dump() for s in specs]})


def _sweeps(tmp_path: Path, start: datetime, count: int) -> list[str | Path]:
    """The GPU sweep's scheduled event, every five minutes from ``start``."""
    template = json.loads((EVENTS / "schedule-gpu-sweep-1200.json").read_text())
    paths: list[str | Path] = []
    for n in range(count):
        at = start + n * SWEEP
        path = tmp_path / f"sweep-{at:%H%M}.json"
        event = template | {
            "id": f"c0ffee00-0000-4000-8000-{n:012d}",
            "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        path.write_text(json.dumps(event))
        paths.append(path)
    return paths


class StopCalls:
    """The instance ids of every StopInstances request the handlers send."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def __call__(self, params: dict[str, Any], **_: Any) -> None:
        self.ids.extend(params.get("InstanceIds", []))


@pytest.fixture
def stop_calls() -> StopCalls:
    return StopCalls()


def _stack(world: World, sink: SlackSink, until: datetime, **overrides: str) -> LocalStack:
    return LocalStack(
        _marked_world(world), sink=sink, mode="remediate", until=until, overrides=OVERRIDES | overrides
    )


def _watch(stack: LocalStack, stop_calls: StopCalls) -> None:
    clients.ec2(stack.world.region).meta.events.register(
        "provide-client-params.ec2.StopInstances", stop_calls
    )


def notices_for(stack: LocalStack, instance_id: str) -> list[Notice]:
    """The notices queued (and consumed by the notifier) about one instance, oldest first."""
    notices = [Notice.model_validate_json(body) for body in stack.consumed]
    return [n for n in notices if n.decision.resource.id == instance_id]


def state_of(instance_id: str) -> str:
    [reservation] = clients.ec2().describe_instances(InstanceIds=[instance_id])["Reservations"]
    return str(reservation["Instances"][0]["State"]["Name"])


def decisions_for(result: ReplayResult, instance_id: str) -> list[dict[str, Any]]:
    return [d for d in result.decisions if d["resource_id"] == instance_id]


@pytest.fixture
def sweeps(tmp_path: Path, world: World) -> list[str | Path]:
    return _sweeps(tmp_path, world.now, 5)  # 12:00 to 12:20


def test_an_instance_with_stop_protection_is_never_stopped_and_reported_once_per_episode(
    world: World, sink: SlackSink, sleeps: list[float], sweeps: list[str | Path], stop_calls: StopCalls
) -> None:
    until = world.now + (len(sweeps) - 1) * SWEEP
    # One stop per run: the protected p5, the costlier, must leave its place to the p4d.
    with _stack(world, sink, until, COSTGUARD_MAX_STOPS_PER_RUN="1") as stack:
        _watch(stack, stop_calls)
        clients.ec2().modify_instance_attribute(InstanceId=P5, DisableApiStop={"Value": True})
        results = replay(stack, sweeps)

        assert all(r.ok for r in results), [r.error for r in results]
        for result in results:
            [decision] = decisions_for(result, P5)
            assert (decision["action"], decision["note"]) == ("notify", f"not stopped: {PROTECTION}")
        assert [d["action"] for d in decisions_for(results[0], IDLE)] == ["stop"]
        assert P5 not in stop_calls.ids  # no StopInstances call for the protected instance, ever
        assert stop_calls.ids == [IDLE]
        assert state_of(P5) == "running"
        assert state_of(IDLE) in ("stopping", "stopped")
        # The read: once per stop candidate and sweep (the p4d is a candidate at the first sweep only).
        assert clients.calls[("ec2", "DescribeInstanceAttribute")] == len(sweeps) + 1

        # Reported at 12:00 only, with the reason: seen at every sweep since, the same episode.
        notices = notices_for(stack, P5)
        assert [n.decision.decided_at.strftime("%H:%M") for n in notices] == ["12:00"]
        assert all(n.decision.resource.stop_blocker == PROTECTION for n in notices)
        [message] = [m for m in results[0].slack if P5 in json.dumps(m)]
        assert PROTECTION in json.dumps(message)


def test_a_stop_iam_refuses_is_reported_once_per_episode_and_the_others_are_still_stopped(
    world: World,
    sink: SlackSink,
    sleeps: list[float],
    tmp_path: Path,
    stop_calls: StopCalls,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.models.instances import InstanceBackend

    denied = {IDLE}
    embedded = InstanceBackend.stop_instances

    def stop_instances(self: Any, instance_ids: list[str]) -> Any:
        if denied & set(instance_ids):
            raise EC2ClientError(
                "UnauthorizedOperation",
                "You are not authorized to perform this operation. with an explicit deny in a service control policy",
            )
        return embedded(self, instance_ids)

    monkeypatch.setattr(InstanceBackend, "stop_instances", stop_instances)
    sweeps = _sweeps(tmp_path, world.now, 6)  # 12:00 to 12:25
    # Two stops an hour: the refused ones must not use them up.
    with _stack(world, sink, world.now + 5 * SWEEP, COSTGUARD_MAX_STOPS_PER_HOUR="2") as stack:
        _watch(stack, stop_calls)
        results = replay(stack, sweeps[:5])

        assert all(r.ok for r in results), [r.error for r in results]
        assert [d["action"] for r in results for d in decisions_for(r, IDLE)] == ["stop"] * 5
        assert stop_calls.ids.count(IDLE) == 5  # tried at every sweep, refused at every sweep
        assert state_of(IDLE) == "running"
        assert state_of(P5) in ("stopping", "stopped")  # stopped in the same run as the first refusal
        assert [d["action"] for d in decisions_for(results[0], P5)] == ["stop"]

        refusals = notices_for(stack, IDLE)
        assert [n.decision.decided_at.strftime("%H:%M") for n in refusals] == ["12:00"]
        assert {n.outcome.refused for n in refusals} == {"UnauthorizedOperation"}
        assert all("failed to stop" in n.outcome.detail for n in refusals)
        assert [n.outcome.done for n in notices_for(stack, P5)] == [True]

        # The deny lifted: the next sweep stops it (a place under the hourly cap is still free) and says so,
        # though its refusal episode is still open.
        denied.clear()
        [last] = replay(stack, sweeps[5:])
        assert [d["action"] for d in decisions_for(last, IDLE)] == ["stop"]
        assert state_of(IDLE) in ("stopping", "stopped")
        assert [n.outcome.done for n in notices_for(stack, IDLE)] == [False, True]
