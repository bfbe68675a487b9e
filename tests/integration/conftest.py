"""Integration fixtures: the local stack on moto with the demo world, and a Slack sink with no real sleeps."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World, load_world
from tests.conftest import DEMO_WORLD


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """slack_sdk's retry back-off, recorded instead of slept."""
    import slack_sdk.http_retry.builtin_handlers as builtin
    import slack_sdk.http_retry.handler as handler

    recorded: list[float] = []
    monkeypatch.setattr(builtin.time, "sleep", recorded.append)
    monkeypatch.setattr(handler.time, "sleep", recorded.append)
    return recorded


@pytest.fixture
def world() -> World:
    return load_world(DEMO_WORLD)


@pytest.fixture
def sink() -> Iterator[SlackSink]:
    with SlackSink() as running:
        yield running


@pytest.fixture
def stack(world: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    with LocalStack(world, sink=sink) as running:
        yield running
