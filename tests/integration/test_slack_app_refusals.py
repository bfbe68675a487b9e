"""What Slack refuses for good, on the Slack app path: each notice is parked once; a refusal of the app itself
(its token, its workspace, its scopes) is also told once on the ops topic with what to fix, and no further call
is made with it; the Web API's own ``ratelimited`` (HTTP 200) is retried like a 429, and past the retries told
once and retried by the queue, never parked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from costguard.aws import clients
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.notify import ops_topic as flow
from costguard.notify.notice import Notice
from tests.integration.conftest import drain, subscribe_queue
from tests.integration.slack_app import notice

REGION = "us-east-1"


@pytest.fixture
def stack(
    world: World, sink: SlackSink, sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> Iterator[LocalStack]:
    flow._told.clear()  # a cold start: nothing told yet
    with LocalStack(world, sink=sink, slack_app=True) as running:
        yield running
    flow._told.clear()


@pytest.fixture
def ops_inbox(stack: LocalStack, monkeypatch: pytest.MonkeyPatch) -> str:
    """The ops topic, with a queue subscribed to it (what an email subscriber gets, readable)."""
    topic = boto3.client("sns", region_name=REGION).create_topic(Name="costguard-ops")["TopicArn"]
    monkeypatch.setenv(flow.OPS_TOPIC_VARIABLE, topic)
    return subscribe_queue(topic, REGION)


def _read(url: str) -> list[str]:
    return drain(clients.sqs(), url)


def _queue(stack: LocalStack, notices: list[Notice]) -> None:
    for told in notices:
        clients.sqs().send_message(QueueUrl=stack.urls["DecisionsQueue"], MessageBody=told.model_dump_json())


def _parked(stack: LocalStack) -> list[dict[str, Any]]:
    return [json.loads(body) for body in _read(stack.urls["FailedEventsQueue"])]


def _posts(sink: SlackSink) -> int:
    return sum(path.startswith("/api/chat.postMessage") for path, _ in sink.requests)


@pytest.mark.parametrize(
    ("status", "error"),
    [(400, "invalid_blocks"), (403, "not_in_channel"), (404, "channel_not_found"), (410, "is_archived")],
)
def test_each_refused_notice_is_parked_once_and_ops_is_told_only_of_a_channel(
    stack: LocalStack, ops_inbox: str, status: int, error: str
) -> None:
    stack.sink.always = status
    notices = [notice(n) for n in range(3)]  # each its own message (SlackGroupAbove is 3)
    _queue(stack, notices)
    stack.drain()
    parked = _parked(stack)
    assert sorted(p["event_id"] for p in parked) == sorted(n.id for n in notices)
    assert {p["slack_body"] for p in parked} == {error}
    assert _posts(stack.sink) == 3  # one call each: a refusal of one message is not the app's
    assert stack.queue_depth("DecisionsQueue") == stack.queue_depth("DecisionsDeadLetterQueue") == 0
    told = _read(ops_inbox)
    if error == "invalid_blocks":  # one message refused: not the channel's, not the app's
        assert told == []
    else:  # the channel refuses the app: told once, with the count
        [said] = told
        assert f"Slack answers '{error}'" in said and "3 notice(s)" in said


@pytest.mark.parametrize("error", ["invalid_auth", "account_inactive", "token_revoked", "missing_scope"])
def test_the_app_refused_parks_each_notice_once_and_tells_ops_once(
    stack: LocalStack, ops_inbox: str, capsys: pytest.CaptureFixture[str], error: str
) -> None:
    stack.sink.api_error = error
    first, later = [notice(n) for n in range(3)], [notice(n) for n in range(10, 14)]
    _queue(stack, first)
    stack.drain()
    _queue(stack, later)  # another batch, another invocation: told already
    stack.drain()
    parked = _parked(stack)
    assert sorted(p["event_id"] for p in parked) == sorted(n.id for n in [*first, *later])
    assert {p["slack_body"] for p in parked} == {error}
    assert _posts(stack.sink) == 2  # one call a batch: the rest is parked without meeting the same answer
    [told] = _read(ops_inbox)
    assert f"Slack answers '{error}'" in told
    assert "costguard redrive --parked" in told
    assert ("scope" in told) == (error == "missing_scope")
    assert "xoxb-local" not in told  # no token
    logs = capsys.readouterr().err
    assert logs.count('"Slack refuses the app"') == 1
    assert logs.count('"notice parked"') == len(first) + len(later)
    assert stack.queue_depth("DecisionsDeadLetterQueue") == 0


def test_the_web_apis_own_rate_limit_is_retried_like_a_429(stack: LocalStack, sleeps: list[float]) -> None:
    stack.sink.retry_after_seconds = 2
    limited = {"left": 2}

    def fault(method: str, params: dict[str, Any]) -> str | None:
        if method == "chat.postMessage" and limited["left"]:
            limited["left"] -= 1
            return "ratelimited"  # HTTP 200, ok: false
        return None

    stack.sink.fault = fault
    _queue(stack, [notice(1)])
    stack.drain()
    assert len(stack.sink.messages) == 1
    assert len([s for s in sleeps if s >= 2]) == 2  # Retry-After honoured, as for a 429
    assert stack.queue_depth("DecisionsQueue") == 0


def test_the_app_rate_limited_past_its_retries_is_told_once_and_retried_not_parked(
    stack: LocalStack, ops_inbox: str
) -> None:
    stack.sink.api_error = "ratelimited"
    notices = [notice(n) for n in range(3)]
    _queue(stack, notices)
    stack.drain(max_rounds=1)
    stack.drain(max_rounds=1)  # the queue's retry: still limited
    assert _posts(stack.sink) == 2 * 3  # a call and its two retries, once a batch: the rest is not tried
    assert _parked(stack) == []
    assert stack.queue_depth("DecisionsQueue") == 3
    [told] = _read(ops_inbox)
    assert "ratelimited" in told and "dead-letter queue" in told
    stack.sink.api_error = None  # the limit lifted
    stack.drain()
    assert len(stack.sink.messages) == 3
    assert stack.queue_depth("DecisionsQueue") == stack.queue_depth("DecisionsDeadLetterQueue") == 0


def test_a_channel_the_bot_was_removed_from_is_told_once_with_its_count_and_the_others_are_told(
    world: World,
    sink: SlackSink,
    sleeps: list[float],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 41: the bot removed from one of two channels: each of that channel's notices is parked (kept for a
    redrive), the ops topic is told once which channel, how many and the fix, and the other channel is told as
    usual. A second batch to the same channel tells ops nothing more."""
    flow._told.clear()
    routes = {"ml": "C0ML0000001", "vision": "C0VISION001"}
    with LocalStack(world, sink=sink, slack_app=True, routes=routes) as stack:
        topic = boto3.client("sns", region_name=REGION).create_topic(Name="costguard-ops")["TopicArn"]
        monkeypatch.setenv(flow.OPS_TOPIC_VARIABLE, topic)
        inbox = subscribe_queue(topic, REGION)
        sink.removed_channels.add("C0VISION001")
        ml = [notice(n) for n in range(2)]
        vision = [_with_team(notice(n), "vision") for n in range(10, 13)]
        _queue(stack, [*ml, *vision])
        stack.drain()
        later = [_with_team(notice(n), "vision") for n in range(20, 22)]
        _queue(stack, later)
        stack.drain()
        parked = _parked(stack)
        assert sorted(p["event_id"] for p in parked) == sorted(n.id for n in [*vision, *later])
        assert {p["slack_body"] for p in parked} == {"not_in_channel"}
        assert {m["channel"] for m in sink.messages} == {"C0ML0000001"}  # the other channel is told
        [told] = _read(inbox)
        assert "C0VISION001" in told and "not_in_channel" in told
        assert "3 notice(s)" in told  # the first batch's count
        assert "/invite" in told and "costguard redrive --parked" in told
        assert stack.queue_depth("DecisionsDeadLetterQueue") == 0
    assert capsys.readouterr().err.count('"Slack refuses a channel"') == 2  # logged each batch, told once
    flow._told.clear()


def _with_team(told: Notice, team: str) -> Notice:
    decision = told.decision
    resource = decision.resource.model_copy(update={"tags": {**decision.resource.tags, "team": team}})
    finding = decision.finding.model_copy(update={"resource": resource})
    return told.model_copy(update={"decision": decision.model_copy(update={"finding": finding})})
