"""Every log line of a handler carries the id of the event it was given, whatever the event's shape."""

from __future__ import annotations

from typing import Any

import pytest

from costguard.local.stack import LambdaContext
from costguard.observability import EVENT_ID_PATH, logger
from tests.conftest import ROOT, load_event

SQS_BATCH = {
    "Records": [
        {"messageId": "0c4f6a7e-sqs-first", "body": "{}", "eventSource": "aws:sqs"},
        {"messageId": "0c4f6a7e-sqs-second", "body": "{}", "eventSource": "aws:sqs"},
    ]
}


@logger.inject_lambda_context(correlation_id_path=EVENT_ID_PATH, clear_state=True)
def handler(event: Any, context: Any) -> str | None:
    return logger.get_correlation_id()


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        pytest.param(load_event("ec2-spot-interruption-warning.json"), None, id="eventbridge"),
        pytest.param(load_event("schedule-gpu-sweep-1200.json"), None, id="eventbridge-schedule"),
        pytest.param(load_event("budget-actual-100-ml-research.json"), None, id="sns"),
        pytest.param(SQS_BATCH, "0c4f6a7e-sqs-first", id="sqs"),
        pytest.param(load_event("slack-interaction-keep.json"), None, id="function-url"),
    ],
)
def test_the_correlation_id_is_the_event_id(event: dict[str, Any], expected: str | None) -> None:
    if expected is None:  # the id the event itself names, read without JMESPath
        if "id" in event:
            expected = event["id"]
        elif "requestContext" in event:
            expected = event["requestContext"]["requestId"]
        else:
            expected = event["Records"][0]["Sns"]["MessageId"]
    assert expected
    assert handler(event, LambdaContext(function_name="f")) == expected


def test_an_event_naming_no_id_logs_none_and_the_previous_id_does_not_stay() -> None:
    context = LambdaContext(function_name="f")
    assert handler(SQS_BATCH, context) == "0c4f6a7e-sqs-first"
    assert handler({"run": "audit-1", "region": "us-east-1"}, context) is None  # a Step Functions task input
    assert handler("not an object", context) is None


def test_every_handler_logs_the_event_id() -> None:
    apps = sorted((ROOT / "functions").glob("*/app.py"))
    assert apps
    missing = [
        str(app.relative_to(ROOT))
        for app in apps
        # costguard.handler's shell (lambda_entry, event_handler) is the one place the decorator is written.
        if "from costguard.handler import" not in app.read_text()
    ]
    shell = (ROOT / "shared" / "costguard" / "handler.py").read_text()
    assert "logger.inject_lambda_context(correlation_id_path=EVENT_ID_PATH" in shell
    assert not missing, f"handlers without the event id as correlation id: {missing}"
