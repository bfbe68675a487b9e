"""What Slack loses on the way, on the Slack app path: an answer lost after Slack took the post (a reset, a
stall past the client's timeout) is looked for, not posted again; a parent update that fails is retried, then
rendered again by the next notice or the redelivery; no post starts that the invocation's remaining time cannot
cover. On moto and the local sink."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from moto import mock_aws

from costguard.flows.notifier import deliver_batch
from costguard.local.sink import SlackSink
from costguard.notify import slack_api
from costguard.notify.delivery import Deadline, DeliveryError, NotStartedError, PermanentDeliveryError
from costguard.notify.slack_api import ApiOutcomeUnknown
from costguard.settings import Settings
from tests.integration.slack_app import (
    CHANNEL,
    atomic_dynamodb,
    notice,
    parents_of,
    playing_stalls,
    playing_wall,
    shown,
    slack_app,
    stored,
)

TIMEOUT = 0.2  # the client's timeout here, played: a stall is told at once and meets it
LOADED_SECONDS = 1.5 * TIMEOUT  # each answer held this long on the loaded machine: longer than the timeout


@pytest.fixture(params=["idle machine", "loaded machine"])
def machine(request: pytest.FixtureRequest) -> float:
    """How long the machine takes over each Slack answer: a loaded one takes longer than the client's timeout,
    and nothing below may read that as a lost answer (only the stalls the sink tells are)."""
    return LOADED_SECONDS if request.param == "loaded machine" else 0.0


@pytest.fixture
def wall(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    return playing_wall(monkeypatch)


@pytest.fixture
def app(
    sink: SlackSink, sleeps: list[float], monkeypatch: pytest.MonkeyPatch, machine: float, wall: list[float]
) -> Iterator[Settings]:
    monkeypatch.setattr(slack_api, "CALL_TIMEOUT_SECONDS", TIMEOUT)

    def waited(seconds: float) -> None:
        wall[0] += seconds

    playing_stalls(monkeypatch, sink, waited)
    sink.slow_seconds = machine
    with mock_aws(), atomic_dynamodb(), slack_app(sink, slack_group_above=10_000) as settings:
        yield settings


def _methods(sink: SlackSink) -> list[str]:
    return [path.split("/api/", 1)[-1].split("?")[0] for path, _ in sink.requests if "/api/" in path]


def _once(method: str, fault: str, *, times: int = 1) -> Callable[[str, dict[str, Any]], str | None]:
    """``fault`` on the first ``times`` calls of ``method``."""
    left = [times]

    def decide(called: str, params: dict[str, Any]) -> str | None:
        if called == method and left[0] > 0:
            left[0] -= 1
            return fault
        return None

    return decide


def _posts_of(sink: SlackSink, told: str) -> list[dict[str, Any]]:
    return [
        m for m in sink.messages if (m.get("metadata") or {}).get("event_payload", {}).get("post") == told
    ]


@pytest.mark.parametrize("fault", ["reset_after", "stall_after"])
def test_an_opener_whose_answer_was_lost_is_found_not_posted_twice(
    app: Settings, sink: SlackSink, fault: str
) -> None:
    opener = notice(1)
    sink.fault = _once("chat.postMessage", fault)
    assert deliver_batch([("m", opener)], app) == {}
    [posted] = _posts_of(sink, opener.id)
    assert stored(app, 1).ts == posted["ts"]
    assert _methods(sink) == ["chat.postMessage", "conversations.history"]  # found: not posted again


@pytest.mark.parametrize("fault", ["reset_after", "stall_after"])
def test_a_reply_whose_answer_was_lost_is_found_not_posted_twice(
    app: Settings, sink: SlackSink, fault: str
) -> None:
    deliver_batch([("m0", notice(2, 0))], app)
    news = notice(2, 1)
    sink.fault = _once("chat.postMessage", fault)
    assert deliver_batch([("m1", news)], app) == {}
    [reply] = _posts_of(sink, news.id)
    assert reply["thread_ts"] == stored(app, 2).ts
    assert news.id in stored(app, 2).told
    assert "conversations.replies" in _methods(sink)


def test_a_post_the_connection_dropped_before_slack_took_it_is_posted_after_looking(
    app: Settings, sink: SlackSink
) -> None:
    """slack_sdk would post it again at once; costguard looks first (it is not there), then posts it once."""
    opener = notice(3)
    sink.fault = _once("chat.postMessage", "reset")
    assert deliver_batch([("m", opener)], app) == {}
    assert len(_posts_of(sink, opener.id)) == 1
    assert _methods(sink) == ["chat.postMessage", "conversations.history", "chat.postMessage"]


@pytest.mark.parametrize("kind", ["opener", "reply"])
def test_a_redelivery_after_an_answer_was_lost_finds_the_post(
    app: Settings, sink: SlackSink, kind: str, wall: list[float]
) -> None:
    """The answer lost, and the look-up failing too: the notice goes back to the queue with its claim (or
    lease) handed on, and its redelivery finds the post in Slack instead of posting it again."""
    if kind == "reply":
        deliver_batch([("m0", notice(4, 0))], app)
    told = notice(4, 0 if kind == "opener" else 1)
    lookup = "conversations.history" if kind == "opener" else "conversations.replies"
    gone = {"lookups": 0}

    def fault(method: str, params: dict[str, Any]) -> str | None:
        if method == "chat.postMessage" and not _posts_of(sink, told.id):
            return "reset_after"
        if method == lookup and gone["lookups"] < 3:  # every try of the first look-up
            gone["lookups"] += 1
            return "503"
        return None

    sink.fault = fault
    failures = deliver_batch([("m", told)], app)
    assert isinstance(failures["m"], ApiOutcomeUnknown)
    assert len(_posts_of(sink, told.id)) == 1
    wall[0] += 2 * TIMEOUT + 0.05  # the grace before another notifier may take it over
    assert deliver_batch([("m", told)], app) == {}  # the redelivery
    assert len(_posts_of(sink, told.id)) == 1
    assert told.id in stored(app, 4).told
    assert stored(app, 4).ts == parents_of(sink, 4)[0]["ts"]


# -- parent updates -------------------------------------------------------------------------------------------


def test_a_parent_update_that_timed_out_is_retried(app: Settings, sink: SlackSink) -> None:
    deliver_batch([("m0", notice(5, 0))], app)
    sink.fault = _once("chat.update", "stall")
    assert deliver_batch([("m1", notice(5, 1))], app) == {}
    assert "step 1" in shown(sink, stored(app, 5).ts or "")
    assert _methods(sink).count("chat.update") == 2


def test_a_parent_update_that_keeps_failing_is_rendered_by_the_redelivery(
    app: Settings, sink: SlackSink
) -> None:
    deliver_batch([("m0", notice(6, 0))], app)
    ts = stored(app, 6).ts or ""
    sink.fault = lambda method, params: "503" if method == "chat.update" else None
    failures = deliver_batch([("m1", notice(6, 1))], app)
    assert isinstance(
        failures["m1"], DeliveryError
    )  # back to the queue: the reply is posted, the parent is not
    assert "step 0" in shown(sink, ts) and stored(app, 6).stale
    sink.fault = None
    assert (
        deliver_batch([("m1", notice(6, 1))], app) == {}
    )  # the redelivery: told already, the parent rendered
    assert "step 1" in shown(sink, ts) and not stored(app, 6).stale
    assert len(sink.thread(CHANNEL, ts)) == 1


def test_a_parent_update_that_failed_is_rendered_by_the_next_notice(app: Settings, sink: SlackSink) -> None:
    deliver_batch([("m0", notice(7, 0))], app)
    ts = stored(app, 7).ts or ""
    sink.fault = lambda method, params: "503" if method == "chat.update" else None
    deliver_batch([("m1", notice(7, 1))], app)
    sink.fault = None
    assert deliver_batch([("m2", notice(7, 2))], app) == {}
    assert "step 2" in shown(sink, ts)


def test_an_older_notice_arriving_late_leaves_the_parent_showing_the_newest(
    app: Settings, sink: SlackSink
) -> None:
    deliver_batch([("m0", notice(8, 0))], app)
    deliver_batch([("m2", notice(8, 2))], app)
    deliver_batch([("m1", notice(8, 1))], app)  # decided before the one already shown
    ts = stored(app, 8).ts or ""
    assert "step 2" in shown(sink, ts)
    assert len(sink.thread(CHANNEL, ts)) == 2


def test_a_parent_update_refused_for_good_is_a_permanent_failure(app: Settings, sink: SlackSink) -> None:
    deliver_batch([("m0", notice(9, 0))], app)
    sink.answer = lambda message: 400 if "ts" in message and not message.get("thread_ts") else 200  # updates
    failures = deliver_batch([("m1", notice(9, 1))], app)
    assert isinstance(failures["m1"], PermanentDeliveryError)  # parked by the handler, as a refused post is
    assert len(sink.thread(CHANNEL, stored(app, 9).ts or "")) == 1


# -- the invocation's time ------------------------------------------------------------------------------------


def test_no_post_starts_that_the_time_left_cannot_cover(app: Settings, sink: SlackSink) -> None:
    """Each Web API call costs 10 s of the invocation's played time; a call may take 3 x 0.2 s of timeouts and
    up to 4 s of back-off, with 3 s to spare after it: the notices it cannot start go back to the queue
    untouched, and their redelivery tells them once."""
    left = [40.0]

    def spend(method: str, params: dict[str, Any]) -> None:
        left[0] -= 10.0

    sink.fault = spend
    notices = [notice(20 + n) for n in range(5)]
    failures = deliver_batch(
        [(f"m{n}", told) for n, told in enumerate(notices)], app, deadline=Deadline(lambda: left[0])
    )
    assert len(sink.messages) == 4 and sorted(failures) == ["m4"]
    assert isinstance(failures["m4"], NotStartedError)
    assert deliver_batch([("m4", notices[4])], app, deadline=Deadline(lambda: 60.0)) == {}
    assert sorted(len(_posts_of(sink, n.id)) for n in notices) == [1] * 5
