"""One conversation, one parent, whatever arrives together: two notices of a conversation in one batch, or in two
notifiers at once (the event source runs two), open one parent, record every told notice, and keep every group
row update (the Slack app path, on moto and the local sink; two notifiers are two threads made to read the same
state before either writes)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from moto import mock_aws

from costguard.flows.notifier import deliver_batch
from costguard.local.sink import SlackSink
from costguard.notify.notice import Notice
from costguard.settings import Settings
from tests.integration.slack_app import (
    CHANNEL,
    atomic_dynamodb,
    both_read_first,
    notice,
    parents_of,
    shown,
    slack_app,
    stored,
    together,
)

TRIALS = 5


def _deliver(settings: Settings, mid: str, told: Notice) -> Callable[[], dict[str, Exception]]:
    """One notifier's invocation with one notice, to run beside another."""
    return lambda: deliver_batch([(mid, told)], settings)


@pytest.fixture
def app(sink: SlackSink, sleeps: list[float]) -> Iterator[Settings]:
    with mock_aws(), atomic_dynamodb(), slack_app(sink) as settings:
        yield settings


# -- one batch ------------------------------------------------------------------------------------------------


def test_two_notices_of_a_new_resource_in_one_batch_open_one_parent(app: Settings, sink: SlackSink) -> None:
    first, second = notice(1, 0), notice(1, 1)
    assert deliver_batch([("m2", second), ("m1", first)], app) == {}  # the older opens, whatever the order
    [parent] = parents_of(sink, 1)
    assert "step 0" in parent["text"] + str(parent["blocks"])
    [reply] = sink.thread(CHANNEL, parent["ts"])
    assert "step 1" in str(reply["blocks"])
    assert set(stored(app, 1).told) == {first.id, second.id}
    assert "step 1" in shown(sink, parent["ts"])  # the parent shows the newer state


def test_two_news_of_an_open_conversation_in_one_batch_are_both_recorded(
    app: Settings, sink: SlackSink
) -> None:
    opener, news = notice(2, 0), [notice(2, 1), notice(2, 2)]
    deliver_batch([("m0", opener)], app)
    assert deliver_batch([("m1", news[0]), ("m2", news[1])], app) == {}
    assert set(stored(app, 2).told) == {opener.id, *(n.id for n in news)}
    posted = len(sink.messages)
    deliver_batch([("again-1", news[0]), ("again-2", news[1])], app)  # redelivered: nothing posted again
    assert len(sink.messages) == posted
    [parent] = parents_of(sink, 2)
    assert len(sink.thread(CHANNEL, parent["ts"])) == 2
    assert "step 2" in shown(sink, parent["ts"])


# -- two notifiers at once ------------------------------------------------------------------------------------


def test_two_notifiers_at_once_on_a_new_resource_open_one_parent(app: Settings, sink: SlackSink) -> None:
    for trial in range(TRIALS):
        resource = 100 + trial
        first, second = notice(resource, 0), notice(resource, 1)
        with both_read_first("BatchGetItem", "conv#"):
            results = together(_deliver(app, "a", first), _deliver(app, "b", second))
        assert results == [{}, {}], trial
        [parent] = parents_of(sink, resource)
        [reply] = sink.thread(CHANNEL, parent["ts"])  # the loser replied in the winner's thread
        assert set(stored(app, resource).told) == {first.id, second.id}
        assert stored(app, resource).ts == parent["ts"]
        assert reply["ts"] != parent["ts"]


def test_two_notifiers_at_once_in_an_open_conversation_record_both_notices(
    app: Settings, sink: SlackSink
) -> None:
    for trial in range(TRIALS):
        resource = 200 + trial
        opener, first, second = notice(resource, 0), notice(resource, 1), notice(resource, 2)
        deliver_batch([("o", opener)], app)
        with both_read_first("BatchGetItem", "conv#"):
            together(_deliver(app, "a", first), _deliver(app, "b", second))
        assert set(stored(app, resource).told) == {opener.id, first.id, second.id}, trial
        [parent] = parents_of(sink, resource)
        assert len(sink.thread(CHANNEL, parent["ts"])) == 2
        assert "step 2" in shown(sink, parent["ts"])  # the newest, whichever update Slack took last
        posted = len(sink.messages)
        deliver_batch([("a", first), ("b", second)], app)  # redelivered: told already
        assert len(sink.messages) == posted


def test_two_notifiers_at_once_on_rows_of_one_group_keep_both_row_updates(
    app: Settings, sink: SlackSink
) -> None:
    for trial in range(TRIALS):
        base = 300 + 10 * trial
        rows = [notice(base + i, 0) for i in range(5)]  # more than SlackGroupAbove (3): one group message
        deliver_batch([(f"g{i}", row) for i, row in enumerate(rows)], app)
        [group] = parents_of(sink, base)
        assert "5 findings" in group["text"]
        first, second = notice(base, 1), notice(base + 1, 1)
        with both_read_first("GetItem", "group#"):
            together(_deliver(app, "a", first), _deliver(app, "b", second))
        now = shown(sink, group["ts"])
        assert now.count("step 1") == 2 and now.count("step 0") == 3, trial  # both rows updated
        assert len(sink.thread(CHANNEL, group["ts"])) == 2
        # The group as kept shows both too: the next update of a third row starts from it.
        deliver_batch([("c", notice(base + 2, 1))], app)
        assert shown(sink, group["ts"]).count("step 1") == 3
