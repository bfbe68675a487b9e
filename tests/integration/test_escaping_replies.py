"""Names that reach a person raw (issue 39, case 6): a Stop-now click answered ephemerally repeats the instance's
Name tag, which must arrive as text, never as a link or a mention."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard.local.interactions import LOCAL_OPS_USER, block_actions, offered_elements, signed_request
from costguard.local.replay import ReplayResult, replay_event
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.notify.values import action_value
from tests.conftest import EVENTS

IDLE_G6E = "i-0a1f00000000000d1"  # idle: the 12:00 sweep marks it
KEY = f"123456789012/us-east-1/ec2_instance/{IDLE_G6E}"
HOSTILE_NAME = "<https://evil.example/sso|Session expired: sign in again> <!here>"
# What mrkdwn would turn into a link or a mention: <...> with a URL, !here/!channel/!everyone, @user, #channel.
LIVE = re.compile(r"<(?:https?://|mailto:|!|@|#)[^>]*>")


@pytest.fixture
def hostile(world: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    named = [i.model_copy(update={"name": HOSTILE_NAME}) if i.id == IDLE_G6E else i for i in world.instances]
    with LocalStack(
        world.model_copy(update={"instances": named}),
        sink=sink,
        mode="remediate",
        slack_app=True,
        until=world.now + timedelta(hours=5),
    ) as running:
        yield running


def _offered(stack: LocalStack, action: str, value: str) -> Any:
    [offered] = [o for o in offered_elements(stack.sink) if o.action_id == action and o.value == value][-1:]
    return offered


def _click(stack: LocalStack, tmp_path: Path, offered: Any, at: datetime) -> ReplayResult:
    action, value = offered.action_id, offered.value
    payload = block_actions(
        action,
        value,
        user=LOCAL_OPS_USER,
        action_ts=f"{int(at.timestamp())}.000200",
        channel=offered.channel,
        message_ts=offered.ts,
    )
    path = tmp_path / f"{action.split(':')[-1]}-{at:%H%M%S}.json"
    path.write_text(json.dumps(signed_request(payload, signed_at=at, arrived=at)))
    result = replay_event(stack, path)
    assert result.ok, result.error
    return result


def test_a_stop_now_refusal_repeats_a_hostile_name_as_text(hostile: LocalStack, tmp_path: Path) -> None:
    now = hostile.world.now
    sweep = replay_event(hostile, EVENTS / "schedule-gpu-sweep-1200.json")
    assert sweep.ok and any(d["resource_id"] == IDLE_G6E and d["action"] == "mark" for d in sweep.decisions)
    # Its owner keeps it 4 hours; then someone clicks Stop now on it: refused (snoozed), answered ephemerally,
    # the answer naming the instance.
    keep = _offered(hostile, "costguard:keep", action_value("gpu_idle", KEY, 4))
    stop = _offered(hostile, "costguard:stop", action_value("gpu_idle", KEY))
    _click(hostile, tmp_path, keep, now + timedelta(minutes=5))
    refused = _click(hostile, tmp_path, stop, now + timedelta(minutes=7))
    [reply] = refused.output["responses"]
    assert reply["response_type"] == "ephemeral" and "Nothing was changed" in reply["text"]
    text = reply["text"]
    assert "Session expired: sign in again" in text  # the name is told, as text
    assert not LIVE.search(text), text
    assert "<" not in text and ">" not in text
    assert "&lt;https://evil.example/sso|Session expired: sign in again&gt; &lt;!here&gt;" in text
