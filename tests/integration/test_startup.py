"""Settings are validated when a function starts, and the webhook never reaches the logs."""

from __future__ import annotations

import logging

import pytest

from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.settings import SettingsError
from tests.conftest import EVENTS


def test_a_bad_setting_stops_the_function_at_cold_start_naming_the_variable(
    world: World, sink: SlackSink, sleeps: list[float]
) -> None:
    overrides = {"COSTGUARD_GRACE_MINUTES": "soon"}
    with (
        LocalStack(world, sink=sink, overrides=overrides) as stack,
        pytest.raises(SettingsError, match="COSTGUARD_GRACE_MINUTES"),
    ):
        stack.invoke("TrainingJobsFunction", {})


def test_no_webhook_url_in_any_log_line(
    world: World, sink: SlackSink, sleeps: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    # Everything at INFO (what Lambda keeps by default), costguard's own logger at DEBUG.
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="costguard")
    with LocalStack(world, sink=sink, overrides={"POWERTOOLS_LOG_LEVEL": "DEBUG"}) as stack:
        sink.script.extend([500, 500, 500])  # one failed delivery round, logged, then success
        replay(stack, sorted(EVENTS.glob("*.json")))
    assert sink.messages, "the demo events must produce messages for this check to mean anything"
    logged = "\n".join(record.getMessage() + repr(record.__dict__) for record in caplog.records)
    assert "Delivery" in logged or "Slack" in logged
    secret_path = sink.url.split("://", 1)[1].split("/", 1)[1]  # a webhook's path is its secret
    assert "<redacted>" in logged  # slack_sdk did log the URL (on the retry), redacted
    assert secret_path not in logged
