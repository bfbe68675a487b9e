"""Buttons only where a click reaches costguard: a Slack app whose interactions endpoint is not deployed
(SlackApp=off, the notifier's COSTGUARD_SLACK_BUTTONS off) still threads and updates its parents, but no message,
reply, update or group it posts carries a button."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from moto import mock_aws

from costguard.flows.notifier import deliver_batch
from costguard.local.sink import SlackSink
from costguard.settings import Settings
from tests.integration.slack_app import atomic_dynamodb, notice, parents_of, slack_app


@pytest.fixture
def app(sink: SlackSink, sleeps: list[float]) -> Iterator[Settings]:
    with mock_aws(), atomic_dynamodb(), slack_app(sink, slack_buttons=False) as settings:
        yield settings


def _actions(message: dict[str, object]) -> list[object]:
    return [b for b in message.get("blocks") or [] if isinstance(b, dict) and b.get("type") == "actions"]


def test_without_the_interactions_endpoint_nothing_posted_has_a_button(
    app: Settings, sink: SlackSink
) -> None:
    openers = [notice(r, 0) for r in range(1, 8)]  # more than the group threshold: one group message
    assert deliver_batch([(f"m{n.id}", n) for n in openers], app) == {}
    news = [notice(r, 1) for r in range(1, 8)]
    assert deliver_batch([(f"m{n.id}", n) for n in news], app) == {}  # replies, and the group's row updates
    single = notice(20, 0)
    assert deliver_batch([("single", single), ("single-1", notice(20, 1))], app) == {}
    assert parents_of(sink, 20) and sink.updates  # threaded and updated as the app
    posted = [*sink.messages, *sink.updates]
    assert posted and not [m for m in posted if _actions(m)], json.dumps(posted)[:500]


def test_with_the_endpoint_the_same_messages_carry_their_buttons(
    sink: SlackSink, sleeps: list[float]
) -> None:
    with mock_aws(), atomic_dynamodb(), slack_app(sink) as settings:
        assert deliver_batch([("single", notice(20, 0))], settings) == {}
    [parent] = parents_of(sink, 20)
    assert _actions(parent)  # the same notice, with the endpoint deployed: its buttons
