"""An event with an empty id cannot be processed once: every handler rejects it like any malformed event
(logged with its id, counted in RejectedEvents, kept in the failed-events queue) and acts on nothing."""

from __future__ import annotations

import contextlib
import copy
import io
import json
from typing import Any

from costguard.aws import clients
from costguard.entry import event_id
from costguard.local.stack import DEFAULT_TEMPLATE, LocalStack
from costguard.local.template import Template
from tests.conftest import EVENTS, FIXTURES, json_lines

EVENTBRIDGE_FILES = sorted(p for p in EVENTS.glob("*.json") if "id" in json.loads(p.read_text()))
SNS_FILES = sorted(p for p in EVENTS.glob("*.json") if "Records" in json.loads(p.read_text()))
EMPTY = ["", "   "]  # empty, and blank
FUNCTIONS = Template.load(DEFAULT_TEMPLATE).functions()  # a handler names itself by its functions/ directory


def _kept(stack: LocalStack) -> list[dict[str, Any]]:
    sqs = clients.sqs()
    bodies = []
    url = stack.urls["FailedEventsQueue"]
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        bodies.extend(json.loads(m["Body"]) for m in messages)
        sqs.delete_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)],
        )
    return bodies


def _rejected_as_empty(stack: LocalStack, function: str, event: dict[str, Any]) -> None:
    logs = io.StringIO()
    with contextlib.redirect_stderr(logs):
        invocation = stack.invoke(function, event)
    result = invocation.result
    assert result["rejected"] is True, f"{function} processed an event with an empty id: {result}"
    assert "empty" in result["problem"]
    # Logged once, with its id (as entry.event_id reads it) and the problem naming the empty id.
    logged = [
        line
        for line in json_lines(logs.getvalue())
        if line.get("message") == "rejected malformed event"
        and line.get("function") == FUNCTIONS[function].code_uri.name
    ]
    assert len(logged) == 1
    assert logged[0]["event_id"] == event_id(event) and "empty" in logged[0]["problem"]
    # Counted.
    counted = [line for line in json_lines(invocation.output) if "RejectedEvents" in line]
    assert counted and counted[0]["RejectedEvents"] in (1, 1.0, [1.0])
    # Kept whole in the failed-events queue.
    [kept] = _kept(stack)
    assert kept["event"] == event and "empty" in kept["problem"]
    # Nothing acted on, nothing queued for Slack.
    assert stack.queue_depth("DecisionsQueue") == 0


def test_eventbridge_events_with_an_empty_id_are_rejected_by_every_handler(stack: LocalStack) -> None:
    seen = set()
    for path in EVENTBRIDGE_FILES:
        for empty in EMPTY:
            event = {**json.loads(path.read_text()), "id": empty}
            for route in stack.template.route(event):
                seen.add(route.function)
                _rejected_as_empty(stack, route.function, event)
    # Every EventBridge-driven function met one (training jobs, GPU idle and alarms, batch, spot, capacity, ...).
    assert {"TrainingJobsFunction", "GpuIdleFunction", "BudgetsFunction", "CapacityFunction"} <= seen


def test_sns_deliveries_with_an_empty_message_id_are_rejected(stack: LocalStack) -> None:
    for path in SNS_FILES:  # budget alerts (readable or not) and the SNS anomaly: each has its own path
        for empty in EMPTY:
            event = json.loads(path.read_text())
            event["Records"][0]["Sns"]["MessageId"] = empty
            [route] = stack.template.route(event)
            _rejected_as_empty(stack, route.function, event)


def test_the_replay_reports_an_empty_id_as_a_rejection(stack: LocalStack) -> None:
    from costguard.local.replay import replay

    results = replay(
        stack,
        [
            FIXTURES / "sagemaker-training-job-failed-empty-id.json",
            FIXTURES / "budget-actual-100-empty-message-id.json",
        ],
    )
    assert [r.function for r in results] == ["TrainingJobsFunction", "BudgetsFunction"]
    for result in results:
        assert result.error and "rejected by" in result.error and "empty" in result.error
        assert result.decisions == [] and result.slack == []


def test_an_sqs_record_with_an_empty_message_id_is_delivered_once(stack: LocalStack) -> None:
    """The notifier keys its idempotency on the notice's own id, not on SQS's messageId: a record whose messageId
    is empty is still posted once, and a redelivery of its notice is not posted again."""
    stack.invoke(
        "TrainingJobsFunction", json.loads((EVENTS / "sagemaker-training-job-failed.json").read_text())
    )
    sqs = clients.sqs()
    [message] = sqs.receive_message(QueueUrl=stack.urls["DecisionsQueue"]).get("Messages", [])
    sqs.delete_message(QueueUrl=stack.urls["DecisionsQueue"], ReceiptHandle=message["ReceiptHandle"])
    record = {
        "messageId": "",
        "receiptHandle": "handle",
        "body": message["Body"],
        "attributes": {"ApproximateReceiveCount": "1"},
        "messageAttributes": {},
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:{stack.world.region}:{stack.world.account}:costguard-decisions",
        "awsRegion": stack.world.region,
    }
    for _ in range(2):  # the same notice delivered twice, each time with no messageId
        result = stack.invoke("NotifierFunction", {"Records": [copy.deepcopy(record)]}).result
        assert result == {"batchItemFailures": []}
    assert len(stack.sink.messages) == 1


def test_sample_fixtures_hold_empty_ids() -> None:
    for name in ("sagemaker-training-job-failed-empty-id.json", "budget-actual-100-empty-message-id.json"):
        event = json.loads((FIXTURES / name).read_text())
        raw = event["id"] if "id" in event else event["Records"][0]["Sns"]["MessageId"]
        assert raw == ""
        assert event_id(event) == "empty"  # logged and kept under a name that says what is wrong
