"""Shared fixtures: project paths, sample events, a clean costguard environment."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from costguard.local.sink import SlackSink

# Powertools reads these when its objects are created, which can be at collection time.
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "CostguardTest")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "costguard")

ROOT = Path(__file__).resolve().parents[1]
EVENTS = ROOT / "events"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
DEMO_WORLD = ROOT / "worlds" / "demo.yaml"


def load_event(name: str) -> dict[str, Any]:
    """A sample payload from events/ (or tests/fixtures/ for broken ones) by file name."""
    path = EVENTS / name if (EVENTS / name).exists() else FIXTURES / name
    event: dict[str, Any] = json.loads(path.read_text())
    return event


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects among the lines of captured output (powertools' log lines, EMF metrics)."""
    found = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                found.append(value)
    return found


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test sees the developer's AWS profile or costguard variables, and none can reach AWS."""
    for key in list(os.environ):
        if key.startswith(("COSTGUARD_", "AWS_", "POWERTOOLS_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "CostguardTest")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    from costguard.aws import clients
    from costguard.settings import get_settings

    clients.reset()
    clients.enter_account(None)  # an earlier test's handler parsed an event of some account
    get_settings.cache_clear()
    yield
    clients.reset()
    clients.enter_account(None)
    get_settings.cache_clear()


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
def sink() -> Iterator[SlackSink]:
    """The local Slack (webhooks and Web API), running for one test."""
    with SlackSink() as running:
        yield running
