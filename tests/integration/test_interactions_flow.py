"""Slack buttons end to end on the embedded stack: the Function URL endpoint, the interactions queue's consumer,
the policy and executor, and the notifier, in remediate mode (and Stop now in notify mode)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard.aws import clients
from costguard.local.interactions import (
    LOCAL_GUEST_USER,
    LOCAL_OPS_USER,
    block_actions,
    offered_elements,
    signed_request,
)
from costguard.local.replay import ReplayResult, replay_event
from costguard.local.sink import SlackSink
from costguard.local.stack import TABLE, LocalStack
from costguard.local.world import World
from costguard.model import MARK_TAG_KEY
from costguard.notify.values import action_value
from costguard.policy import SNOOZE_TAG_KEY
from tests.conftest import EVENTS

IDLE_G6E = "i-0a1f00000000000d1"  # idle: the 12:00 sweep marks it
IDLE_P4D = "i-0a1f00000000000a1"  # idle: the 12:00 sweep marks it
PROTECTED_P5 = "i-0a1f00000000000a4"  # idle, tagged costguard:protect=true
KEY = "123456789012/us-east-1/ec2_instance/"


@pytest.fixture
def remediating(world: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    with LocalStack(
        world, sink=sink, mode="remediate", slack_app=True, until=world.now + timedelta(hours=5)
    ) as running:
        yield running


def _write(tmp_path: Path, name: str, event: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(event))
    return path


def _sweep(stack: LocalStack, tmp_path: Path, at: datetime) -> ReplayResult:
    event = json.loads((EVENTS / "schedule-gpu-sweep-1200.json").read_text())
    event |= {"id": f"c0ffee00-0000-4000-8000-{at:%d%H%M}000000", "time": at.strftime("%Y-%m-%dT%H:%M:%SZ")}
    result = replay_event(stack, _write(tmp_path, f"sweep-{at:%d%H%M}.json", event))
    assert result.ok, result.error
    return result


def _click(
    stack: LocalStack,
    tmp_path: Path,
    action: str,
    value: str,
    at: datetime,
    *,
    user: str = LOCAL_OPS_USER,
    name: str = "click",
    **request: Any,
) -> ReplayResult:
    payload = block_actions(
        action,
        value,
        user=user,
        action_ts=f"{int(at.timestamp())}.000200",
        **_posted(stack.sink, action, value),
    )
    event = signed_request(payload, signed_at=request.pop("signed_at", at), arrived=at, **request)
    return replay_event(stack, _write(tmp_path, f"{name}-{at:%H%M%S}.json", event))


def _posted(sink: SlackSink, action: str, value: str) -> dict[str, str]:
    """Where costguard posted that element (channel and message), as Slack's payload names them; nothing
    when it posted none (the click then names a message costguard never posted)."""
    for offered in reversed(offered_elements(sink)):
        if offered.action_id == action and offered.value == value:
            return {"channel": offered.channel, "message_ts": offered.ts}
    return {}


def _instance(instance_id: str) -> tuple[str, dict[str, str]]:
    [reservation] = clients.ec2("us-east-1").describe_instances(InstanceIds=[instance_id])["Reservations"]
    [instance] = reservation["Instances"]
    return instance["State"]["Name"], {t["Key"]: t["Value"] for t in instance.get("Tags", [])}


def _action_records() -> list[dict[str, Any]]:
    items = clients.client("dynamodb").scan(TableName=TABLE)["Items"]
    return [i for i in items if i["id"]["S"].startswith("action#")]


def _texts(result: ReplayResult) -> str:
    return json.dumps(result.slack)


def test_keep_holds_the_stop_off_until_it_ends(remediating: LocalStack, tmp_path: Path) -> None:
    now = remediating.world.now
    _sweep(remediating, tmp_path, now)
    assert MARK_TAG_KEY in _instance(IDLE_G6E)[1]
    kept = _click(
        remediating,
        tmp_path,
        "costguard:keep",
        action_value("gpu_idle", KEY + IDLE_G6E, 4),
        now + timedelta(minutes=5),
    )
    assert kept.ok and kept.output["http"]["statusCode"] == 200
    state, tags = _instance(IDLE_G6E)
    assert tags[SNOOZE_TAG_KEY] == "2026-11-20T16:05:00+00:00"
    assert "kept running until 2026-11-20 16:05 UTC" in _texts(kept)
    assert f"<@{LOCAL_OPS_USER}>" in _texts(kept)  # who, as a mention (not escaped)
    # The first message of the conversation (here the 12:00 sweep's group) shows it: who, and until when.
    [update] = [u for u in remediating.sink.updates if "research-g6e-forgotten" in json.dumps(u)]
    row = next(b["text"]["text"] for b in update["blocks"] if "research-g6e-forgotten" in json.dumps(b))
    assert "kept running until 2026-11-20 16:05 UTC" in row and f"<@{LOCAL_OPS_USER}>" in row
    [record] = _action_records()
    assert record["user"]["S"] == LOCAL_OPS_USER and record["status"]["S"] == "done"

    # Well past the grace period, still snoozed: not stopped, and the thread is told why.
    during = _sweep(remediating, tmp_path, now + timedelta(minutes=20))
    assert _instance(IDLE_G6E)[0] == "running"
    [decision] = [d for d in during.decisions if d["resource_id"] == IDLE_G6E]
    assert decision["action"] == "notify" and "(snoozed)" in decision["note"]

    after = _sweep(remediating, tmp_path, now + timedelta(hours=4, minutes=10))
    assert [d["action"] for d in after.decisions if d["resource_id"] == IDLE_G6E] == ["stop"]
    assert _instance(IDLE_G6E)[0] in ("stopping", "stopped")
    assert state == "running"


def test_stop_now_stops_a_marked_instance_through_the_policy(remediating: LocalStack, tmp_path: Path) -> None:
    now = remediating.world.now
    _sweep(remediating, tmp_path, now)
    stopped = _click(
        remediating,
        tmp_path,
        "costguard:stop",
        action_value("gpu_idle", KEY + IDLE_P4D),
        now + timedelta(minutes=1),
    )
    assert stopped.ok, stopped.error
    assert _instance(IDLE_P4D)[0] in ("stopping", "stopped")  # one minute into a 15-minute grace period
    assert "stopped now on request" in _texts(stopped)
    assert LOCAL_OPS_USER in _texts(stopped)  # the thread says who
    [record] = _action_records()
    assert record["action"]["S"] == "costguard:stop" and record["status"]["S"] == "done"


def test_stop_now_of_a_protected_instance_is_refused_and_changes_nothing(
    remediating: LocalStack, tmp_path: Path
) -> None:
    now = remediating.world.now
    _sweep(remediating, tmp_path, now)
    before = _instance(PROTECTED_P5)
    refused = _click(
        remediating,
        tmp_path,
        "costguard:stop",
        action_value("gpu_idle", KEY + PROTECTED_P5),
        now + timedelta(minutes=2),
    )
    assert refused.ok and refused.slack == []
    [reply] = refused.output["responses"]
    # A protected instance's card carries no Stop now: a click naming one is not a click costguard offered.
    assert reply["response_type"] == "ephemeral" and "not a choice costguard offered" in reply["text"].lower()
    assert _instance(PROTECTED_P5) == before


def test_stop_now_in_notify_mode_is_refused(world: World, sink: SlackSink, tmp_path: Path) -> None:
    with LocalStack(world, sink=sink, mode="notify", slack_app=True) as stack:
        _sweep(stack, tmp_path, world.now)
        result = _click(
            stack,
            tmp_path,
            "costguard:stop",
            action_value("gpu_idle", KEY + IDLE_P4D),
            world.now + timedelta(minutes=1),
        )
        assert _instance(IDLE_P4D)[0] == "running"
        [reply] = result.output["responses"]
        # Notify mode stops nothing, so its cards carry no Stop now: a click naming one was not offered.
        assert "not a choice costguard offered" in reply["text"].lower()


def test_protect_writes_the_protect_tag_only(remediating: LocalStack, tmp_path: Path) -> None:
    _sweep(remediating, tmp_path, remediating.world.now)  # the message whose Protect is clicked
    result = replay_event(remediating, EVENTS / "slack-interaction-protect.json")
    assert result.ok and result.output["http"]["statusCode"] == 200
    tags = _instance("i-0a1f00000000000a7")[1]
    assert tags.get("costguard:protect") == "true" and MARK_TAG_KEY not in tags


@pytest.mark.parametrize(
    "name", ["slack-interaction-bad-signature.json", "slack-interaction-old-timestamp.json"]
)
def test_a_bad_or_stale_signature_is_401_and_nothing_is_done(
    remediating: LocalStack, tmp_path: Path, name: str
) -> None:
    _sweep(
        remediating, tmp_path, remediating.world.now
    )  # the instance named is marked: a stop would go ahead
    before = _instance(IDLE_P4D)
    result = replay_event(remediating, EVENTS / name)
    assert result.output["http"] == {"statusCode": 401, "body": "unauthorized"}
    assert remediating.queue_depth("InteractionsQueue") == 0
    assert _action_records() == [] and result.slack == [] and result.output["responses"] == []
    assert _instance(IDLE_P4D) == before


def test_a_six_minute_old_signature_is_refused(remediating: LocalStack, tmp_path: Path) -> None:
    now = remediating.world.now + timedelta(minutes=10)
    result = _click(
        remediating,
        tmp_path,
        "costguard:keep",
        action_value("gpu_idle", KEY + IDLE_G6E, 4),
        now,
        signed_at=now - timedelta(minutes=6),
    )
    assert result.output["http"]["statusCode"] == 401
    assert SNOOZE_TAG_KEY not in _instance(IDLE_G6E)[1]


def test_an_unauthorized_click_is_answered_to_that_person_only(
    remediating: LocalStack, tmp_path: Path
) -> None:
    _sweep(remediating, tmp_path, remediating.world.now)
    before = _instance(IDLE_P4D)
    result = _click(
        remediating,
        tmp_path,
        "costguard:stop",
        action_value("gpu_idle", KEY + IDLE_P4D),
        remediating.world.now + timedelta(minutes=3),
        user=LOCAL_GUEST_USER,
    )
    assert result.output["http"]["statusCode"] == 200
    [reply] = result.output["responses"]
    assert reply["response_type"] == "ephemeral" and "may not" in reply["text"]
    assert result.slack == [] and _instance(IDLE_P4D) == before
    [record] = _action_records()
    assert record["status"]["S"] == "refused"


def test_the_same_click_delivered_twice_or_retried_by_slack_acts_once(
    remediating: LocalStack, tmp_path: Path
) -> None:
    _sweep(remediating, tmp_path, remediating.world.now)
    at = remediating.world.now + timedelta(minutes=5)
    value = action_value("gpu_idle", KEY + IDLE_G6E, 4)
    payload = block_actions(
        "costguard:keep",
        value,
        action_ts="1795176300.5",
        **_posted(remediating.sink, "costguard:keep", value),
    )
    first = _write(tmp_path, "first.json", signed_request(payload, signed_at=at))
    # Slack's retry: the same payload signed again a little later, with X-Slack-Retry-Num.
    retry = signed_request(payload, signed_at=at + timedelta(seconds=4), retry_num=1, request_id="retry")
    results = [
        replay_event(remediating, first),
        replay_event(remediating, first),  # the very same request again (a replay)
        replay_event(remediating, _write(tmp_path, "retry.json", retry)),
    ]
    assert [r.output["http"]["statusCode"] for r in results] == [200, 200, 200]
    told = [m for r in results for m in r.slack if "kept running until" in json.dumps(m)]
    assert len(told) == 1
    assert len(_action_records()) == 1
    assert remediating.queue_depth("InteractionsQueue") == 0
