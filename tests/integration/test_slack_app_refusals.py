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
from costguard.flows import notifier as flow
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
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
def test_each_refused_notice_is_parked_once_and_ops_is_not_told(
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
    assert _read(ops_inbox) == []


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
