"""News of many open conversations at once (more than SlackGroupAbove for one channel) is one group of news, not a
reply in each thread: Slack takes about one message a second per channel. Each notice is still told exactly once
(under the lease its reply would take), recorded in its conversation and shown by its parent; stops go first; and a
post Slack's limit keeps refusing waits its turn instead of going back to the queue. On moto and the local sink."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from costguard.flows.notifier import deliver_batch
from costguard.local.sink import SlackSink
from costguard.model import Action
from costguard.notify import slack_api
from costguard.notify.conversation import Conversation, DynamoConversationStore, destination_id, group_post_id
from costguard.notify.notice import Notice, group
from costguard.notify.planning import plan
from costguard.notify.posts import NEWS_PREFIX
from costguard.notify.rounds import stops_of
from costguard.notify.slack_api import ApiOutcomeUnknown
from costguard.settings import Settings
from tests.integration.slack_app import CHANNEL, atomic_dynamodb, notice, shown, slack_app, stored

TIMEOUT = 0.2  # the client's timeout where an answer is lost: the grace before a lease is taken over


@pytest.fixture
def app(sink: SlackSink, sleeps: list[float]) -> Iterator[Settings]:
    with mock_aws(), atomic_dynamodb(), slack_app(sink) as settings:
        yield settings


@pytest.fixture
def quick(sink: SlackSink, sleeps: list[float], monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    monkeypatch.setattr(slack_api, "CALL_TIMEOUT_SECONDS", TIMEOUT)
    with mock_aws(), atomic_dynamodb(), slack_app(sink) as settings:
        yield settings


def _stop(resource: int, step: int = 1) -> Notice:
    told = notice(resource, step)
    decision = told.decision.model_copy(update={"action": Action.STOP, "dry_run": False})
    return told.model_copy(update={"decision": decision})


def _conversation(told: Notice) -> Conversation:
    return Conversation(
        key=told.decision.finding.conversation, destination=destination_id(CHANNEL), channel=CHANNEL, ts="1.1"
    )


def _posts(sink: SlackSink) -> list[dict[str, Any]]:
    return [m for m in sink.messages if m.get("method") == "chat.postMessage"]


def _key(message: dict[str, Any]) -> str:
    return str((message.get("metadata") or {}).get("event_payload", {}).get("post", ""))


# -- what is planned -------------------------------------------------------------------------------------------


def test_more_replies_than_above_are_one_group_of_news_with_every_member() -> None:
    news = [notice(n, 1) for n in range(4)]
    conversations = {c.key: c for c in map(_conversation, news)}
    posts, told = plan([(f"m{n}", x) for n, x in enumerate(news)], conversations, threads=True, above=3)
    assert told == []
    [post] = posts
    assert (post.kind, post.members, post.notices) == ("news", ["m0", "m1", "m2", "m3"], news)
    assert [c.key for c in post.threads] == [n.decision.finding.conversation for n in news]
    assert post.group is not None and post.group.count == 4


def test_up_to_above_replies_stay_replies() -> None:
    news = [notice(n, 1) for n in range(3)]
    conversations = {c.key: c for c in map(_conversation, news)}
    posts, _ = plan([(f"m{n}", x) for n, x in enumerate(news)], conversations, threads=True, above=3)
    assert [p.kind for p in posts] == ["reply", "reply", "reply"]


def test_the_conversations_a_stop_is_told_in_go_first_whole() -> None:
    idle, stop, after = notice(1), _stop(2), notice(2, 2)
    rows = group(
        [notice(3), _stop(4)], routing_tag_key="team"
    )  # a producer's group with a stop among its rows
    alongside = notice(4, 3)  # another notice of that group's stopped resource
    members: list[tuple[str, Any]] = [("a", idle), ("b", stop), ("c", after), ("d", rows), ("e", alongside)]
    assert stops_of(members) == {id(stop), id(after), id(rows), id(alongside)}


# -- what reaches Slack ------------------------------------------------------------------------------------------


def test_many_news_at_once_are_one_message_and_each_conversation_records_and_shows_its_own(
    app: Settings, sink: SlackSink
) -> None:
    assert deliver_batch([(f"o{n}", notice(n)) for n in range(5)], app) == {}  # opened as one group
    [opened] = _posts(sink)
    stops = [_stop(n) for n in range(5)]
    assert deliver_batch([(f"s{n}", s) for n, s in enumerate(stops)], app) == {}
    [news] = _posts(sink)[1:]
    assert not news.get("thread_ts") and _key(news).startswith(NEWS_PREFIX)
    state = DynamoConversationStore(app.state_table).group(group_post_id(destination_id(CHANNEL), _key(news)))
    assert state is not None and sorted(state.posted) == sorted(s.id for s in stops)
    for n, told in enumerate(stops):
        assert told.id in stored(app, n).told
    rows = shown(sink, opened["ts"])
    assert "step 1" in rows and "step 0" not in rows  # each row of the group that opened them shows its news
    assert len(sink.updates) == 1  # rendered once, with every row


def test_a_group_of_news_whose_answer_was_lost_is_found_by_redeliveries_in_other_batches(
    quick: Settings, sink: SlackSink
) -> None:
    """The answer lost and the look-up failing too: every notice goes back to the queue with its lease naming the
    group of news; redelivered apart (as replies, and as a smaller group), each finds it instead of posting."""
    for n in range(5):
        deliver_batch([(f"o{n}", notice(n))], quick)  # each its own parent
    stops = [_stop(n) for n in range(5)]
    gone = {"lookups": 0}

    def fault(method: str, params: dict[str, Any]) -> str | None:
        if method == "chat.postMessage" and not any(_key(m).startswith(NEWS_PREFIX) for m in _posts(sink)):
            return "reset_after"
        if method == "conversations.history" and gone["lookups"] < 3:
            gone["lookups"] += 1
            return "503"
        return None

    sink.fault = fault
    failures = deliver_batch([(f"s{n}", s) for n, s in enumerate(stops)], quick)
    assert sorted(failures) == [f"s{n}" for n in range(5)]
    assert all(isinstance(error, ApiOutcomeUnknown) for error in failures.values())
    time.sleep(2 * TIMEOUT + 0.05)  # the grace before another notifier may take a lease over
    before = len(_posts(sink))
    assert deliver_batch([("s0", stops[0])], quick) == {}  # alone: its reply, were it new
    four = [(f"s{n}", stops[n]) for n in range(1, 5)]
    assert deliver_batch(four, quick) == {}  # four: another group of news, were they new
    assert len(_posts(sink)) == before  # found, not posted again
    assert len([m for m in _posts(sink) if _key(m).startswith(NEWS_PREFIX)]) == 1
    for n, told in enumerate(stops):
        assert told.id in stored(quick, n).told


def test_a_post_slacks_channel_limit_keeps_refusing_waits_its_turn_in_the_invocation(
    app: Settings, sink: SlackSink, sleeps: list[float]
) -> None:
    """Still 429 after the client's own three tries: tried again a second later, not handed back to the queue."""
    sink.retry_after_seconds = 1
    left = {"limited": 4}

    def fault(method: str, params: dict[str, Any]) -> str | None:
        if method == "chat.postMessage" and left["limited"]:
            left["limited"] -= 1
            return "429"
        return None

    sink.fault = fault
    assert deliver_batch([("m", _stop(7, 0))], app) == {}
    assert len(_posts(sink)) == 1
    assert 1.0 in sleeps  # its turn, once the client's Retry-After waits (plus jitter) were spent
