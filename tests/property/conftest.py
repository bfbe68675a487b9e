"""Property-test fixtures: one local stack (moto, the demo world, a Slack sink) shared by the module's handlers."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import load_world
from tests.conftest import DEMO_WORLD


@pytest.fixture(autouse=True)
def _isolated_environment() -> Iterator[None]:
    """Replaces the per-test reset of tests/conftest.py: the module's one stack owns the environment here."""
    yield


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    """Seeding the world is the slow part, so every handler of the module meets its hostile events on one."""
    import slack_sdk.http_retry.builtin_handlers as builtin

    with pytest.MonkeyPatch.context() as patch:
        for key in list(os.environ):
            if key.startswith(("COSTGUARD_", "AWS_", "POWERTOOLS_")):
                patch.delenv(key)
        patch.setenv("POWERTOOLS_METRICS_NAMESPACE", "CostguardTest")
        patch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
        patch.setattr(builtin.time, "sleep", lambda _: None)  # slack_sdk's back-off: nothing to wait for
        with SlackSink() as sink, LocalStack(load_world(DEMO_WORLD), sink=sink) as running:
            yield running
