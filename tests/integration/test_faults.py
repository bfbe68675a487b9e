"""Faults: Slack and AWS failing, duplicates, a broken batch, the state table gone. Nothing lost, nothing twice.

Each test states the outcome it shows: retried and delivered once, reported, or kept in a failure
destination; and that no resource is stopped twice or stopped before its decision was logged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import timedelta
from functools import lru_cache
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.retries.bucket import TokenBucket

from costguard.aws import clients
from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import TABLE, LocalStack, create_state_table
from costguard.local.world import World
from costguard.model import MARK_TAG_KEY
from tests.conftest import EVENTS

ALARM_IDLE = EVENTS / "cloudwatch-alarm-gpu-idle.json"
FAILED_JOB = EVENTS / "sagemaker-training-job-failed.json"
IDLE = "i-0a1f00000000000a1"  # idle, unprotected: the alarm above is its own


# -- harness ---------------------------------------------------------------------------------------


class Journal(logging.Handler):
    """One ordered record of what costguard logged and which stops reached EC2."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[tuple[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.entries.append(("log", (record.getMessage(), getattr(record, "decision", None))))

    def stopped(self, params: dict[str, Any], **_: Any) -> None:
        self.entries.append(("api", ("StopInstances", tuple(params.get("InstanceIds", [])))))

    def stops(self) -> list[str]:
        return [i for kind, (op, ids) in self.entries if kind == "api" and op == "StopInstances" for i in ids]

    def decisions_logged(self, action: str) -> list[str]:
        return [
            d["resource_id"]
            for kind, (message, d) in self.entries
            if kind == "log" and message == "executing decision" and d and d["action"] == action
        ]

    def assert_each_stop_logged_first(self) -> None:
        """Every stop that reached EC2 was preceded by its logged decision."""
        logged: set[str] = set()
        for kind, value in self.entries:
            if kind == "log" and value[0] == "executing decision" and value[1]:
                logged.add(value[1]["resource_id"])
            elif kind == "api" and value[0] == "StopInstances":
                assert set(value[1]) <= logged, f"{value[1]} stopped before its decision was logged"


class AwsFaults:
    """Answers chosen API calls with an AWS error through botocore's own send path, so its retries run."""

    def __init__(self) -> None:
        self.plan: dict[str, list[Any]] = {}  # operation -> [status, code, times left]
        self.attempts: dict[str, int] = {}

    def fail(self, operation: str, code: str, *, status: int = 400, times: int = 10**9) -> None:
        self.plan[operation] = [status, code, times]

    def clear(self) -> None:
        self.plan.clear()

    def before_send(self, request: Any, **_: Any) -> AWSResponse | None:
        operation = _operation_of(request)
        self.attempts[operation] = self.attempts.get(operation, 0) + 1
        plan = self.plan.get(operation)
        if not plan or plan[2] <= 0:
            return None
        plan[2] -= 1
        status, code = plan[0], plan[1]
        body = (
            f"<Response><Errors><Error><Code>{code}</Code><Message>injected {code}</Message></Error></Errors>"
            "<RequestID>00000000-0000-0000-0000-000000000000</RequestID></Response>"
        ).encode()
        return AWSResponse(request.url, status, {}, _Raw(body))


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.body


def _operation_of(request: Any) -> str:
    body = request.body.decode() if isinstance(request.body, bytes) else str(request.body or "")
    for part in body.split("&"):
        if part.startswith("Action="):
            return part.split("=", 1)[1]
    return "?"


def _with_mark(world: World, instance_id: str) -> World:
    """The world with one instance marked an hour ago: past the grace period, its next decision is a stop."""
    marked = (world.now - timedelta(hours=1)).isoformat()
    specs = [
        s.model_copy(update={"tags": {**s.tags, MARK_TAG_KEY: marked}}) if s.id == instance_id else s
        for s in world.instances
    ]
    return World.model_validate(world.model_dump() | {"instances": [s.model_dump() for s in specs]})


@pytest.fixture
def live(world: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    """Remediate mode, with the idle instance due to be stopped."""
    with LocalStack(_with_mark(world, IDLE), sink=sink, mode="remediate") as running:
        yield running


@pytest.fixture
def journal(live: LocalStack) -> Iterator[Journal]:
    recorded = Journal()
    logger = logging.getLogger("costguard")
    logger.addHandler(recorded)
    clients.ec2(live.world.region).meta.events.register(
        "provide-client-params.ec2.StopInstances", recorded.stopped
    )
    yield recorded
    logger.removeHandler(recorded)


@pytest.fixture
def faults(live: LocalStack, monkeypatch: pytest.MonkeyPatch) -> AwsFaults:
    """Faults answered in place of the embedded AWS, after botocore has built and signed the request."""
    from moto.core.botocore_stubber import BotocoreStubber

    # botocore's adaptive mode slows the client after a throttle by waiting on a condition, not time.sleep.
    monkeypatch.setattr(TokenBucket, "acquire", lambda self, amount=1, block=True: True)
    injected = AwsFaults()
    embedded = BotocoreStubber.__call__

    def answer(self: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
        return injected.before_send(request) or embedded(self, event_name, request, **kwargs)

    monkeypatch.setattr(BotocoreStubber, "__call__", answer)
    return injected


def invoke_async(stack: LocalStack, function: str, event: dict[str, Any]) -> tuple[Any, int]:
    """Lambda's asynchronous invocation as the template configures it: the first try, then
    MaximumRetryAttempts more; an event that fails them all goes to the on-failure destination."""
    config = stack.template.resources[function]["Properties"]["EventInvokeConfig"]
    assert config["DestinationConfig"]["OnFailure"]["Destination"] == {
        "Fn::GetAtt": ["FailedEventsQueue", "Arn"]
    }
    tries = 1 + int(config["MaximumRetryAttempts"])
    error: Exception | None = None
    for attempt in range(1, tries + 1):
        try:
            return stack.invoke(function, event).result, attempt
        except Exception as failed:  # what Lambda sees as a function error
            error = failed
    record = {
        "requestContext": {"condition": "RetriesExhausted", "approximateInvokeCount": tries},
        "responsePayload": {"errorType": type(error).__name__, "errorMessage": str(error)[:1000]},
        "requestPayload": event,
    }
    clients.sqs().send_message(QueueUrl=stack.urls["FailedEventsQueue"], MessageBody=json.dumps(record))
    return None, tries


def kept_events(stack: LocalStack) -> list[dict[str, Any]]:
    messages = (
        clients.sqs()
        .receive_message(
            QueueUrl=stack.urls["FailedEventsQueue"], MaxNumberOfMessages=10, VisibilityTimeout=0
        )
        .get("Messages", [])
    )
    return [json.loads(m["Body"]) for m in messages]


def state_of(instance_id: str) -> str:
    [reservation] = clients.ec2().describe_instances(InstanceIds=[instance_id])["Reservations"]
    return str(reservation["Instances"][0]["State"]["Name"])


def alarm() -> dict[str, Any]:
    return json.loads(ALARM_IDLE.read_text())


# -- Slack -----------------------------------------------------------------------------------------


def test_slack_timeout_returns_the_notice_to_the_queue_and_it_is_delivered_once(
    stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.notify import delivery

    original = delivery.webhook_client.__wrapped__
    short = lru_cache(maxsize=8)(lambda url: original(url, timeout=1))
    monkeypatch.setattr(delivery, "webhook_client", short)
    stack.sink.stall_seconds = 2
    stack.sink.script.extend([0])  # the first post hangs past the client's timeout
    [result] = replay(stack, [FAILED_JOB])
    statuses = [status for _, status in stack.sink.requests]
    assert statuses[0] == 0 and statuses[-1] == 200
    assert len(stack.sink.messages) == 1  # delivered on the queue's next delivery, once
    assert len(result.slack) == 1
    assert stack.queue_depth("DecisionsDeadLetterQueue") == 0


def test_partial_batch_failure_returns_only_the_bad_record(stack: LocalStack) -> None:
    for name in ("sagemaker-training-job-failed.json", "sagemaker-training-job-failed-resnet.json"):
        stack.invoke("TrainingJobsFunction", json.loads((EVENTS / name).read_text()))
    received = clients.sqs().receive_message(
        QueueUrl=stack.urls["DecisionsQueue"], MaxNumberOfMessages=10, AttributeNames=["All"]
    )["Messages"]
    assert len(received) >= 2
    bad = {**received[0], "MessageId": "bad-record", "Body": '{"decision": "not a decision"}'}
    from costguard.local.stack import _sqs_record

    event = {"Records": [_sqs_record(m, stack.urls["DecisionsQueue"]) for m in [*received, bad]]}
    result = stack.invoke("NotifierFunction", event).result
    assert result["batchItemFailures"] == [{"itemIdentifier": "bad-record"}]
    assert len(stack.sink.messages) == len(received)

    # Returned to the queue, the bad record is tried maxReceiveCount times, then kept in the dead-letter queue.
    clients.sqs().send_message(QueueUrl=stack.urls["DecisionsQueue"], MessageBody=bad["Body"])
    stack.drain()
    assert stack.queue_depth("DecisionsDeadLetterQueue") == 1
    assert len(stack.sink.messages) == len(received)


# -- AWS -------------------------------------------------------------------------------------------


def test_throttled_stop_is_retried_by_the_client_and_stops_once(
    live: LocalStack, journal: Journal, faults: AwsFaults
) -> None:
    faults.fail("StopInstances", "RequestLimitExceeded", status=503, times=2)
    result, tries = invoke_async(live, "GpuIdleFunction", alarm())
    assert tries == 1
    assert [d["resource_id"] for d in result["decisions"] if d["action"] == "stop"] == [IDLE]
    assert faults.attempts["StopInstances"] == 3  # two throttled, the third through
    assert journal.stops() == [IDLE]
    assert state_of(IDLE) in ("stopping", "stopped")
    journal.assert_each_stop_logged_first()
    live.drain()
    assert [m for m in live.sink.messages if "stopped" in json.dumps(m).lower()]


def test_access_denied_on_stop_is_reported_and_not_retried(
    live: LocalStack, journal: Journal, faults: AwsFaults
) -> None:
    faults.fail("StopInstances", "UnauthorizedOperation", status=403)
    result, tries = invoke_async(live, "GpuIdleFunction", alarm())
    assert tries == 1  # a refusal is an outcome to report, not an error to retry
    assert faults.attempts["StopInstances"] == 1
    assert state_of(IDLE) == "running"
    assert journal.decisions_logged("stop") == [IDLE]
    [stop] = [d for d in result["decisions"] if d["action"] == "stop"]
    assert stop["resource_id"] == IDLE
    live.drain()
    text = json.dumps(live.sink.messages)
    assert "UnauthorizedOperation" in text or "failed to stop" in text


def test_throttled_describe_fails_the_try_and_lambdas_retry_stops_once(
    live: LocalStack, journal: Journal, faults: AwsFaults
) -> None:
    # Every attempt the client makes (botocore turns max_attempts into the total, first call included).
    every_attempt = clients.ec2(live.world.region).meta.config.retries["total_max_attempts"]
    faults.fail("DescribeInstances", "RequestLimitExceeded", status=503, times=every_attempt)
    result, tries = invoke_async(live, "GpuIdleFunction", alarm())
    assert tries == 2  # the first try failed whole; the retry found the API calm again
    assert [d["resource_id"] for d in result["decisions"] if d["action"] == "stop"] == [IDLE]
    assert journal.stops() == [IDLE]
    journal.assert_each_stop_logged_first()
    assert kept_events(live) == []


def test_access_denied_on_describe_keeps_the_event_and_stops_nothing(
    live: LocalStack, journal: Journal, faults: AwsFaults
) -> None:
    faults.fail("DescribeInstances", "UnauthorizedOperation", status=403)
    result, tries = invoke_async(live, "GpuIdleFunction", alarm())
    assert result is None and tries == 3
    assert journal.stops() == [] and journal.decisions_logged("stop") == []
    faults.clear()
    assert state_of(IDLE) == "running"
    [kept] = kept_events(live)
    assert kept["requestPayload"]["id"] == alarm()["id"]
    assert "UnauthorizedOperation" in kept["responsePayload"]["errorMessage"]


def test_the_same_event_three_times_acts_once(live: LocalStack, journal: Journal) -> None:
    results = [invoke_async(live, "GpuIdleFunction", alarm())[0] for _ in range(3)]
    assert results[0] == results[1] == results[2]  # the stored outcome, not a second run
    assert journal.stops() == [IDLE]
    assert journal.decisions_logged("stop") == [IDLE]
    assert clients.calls[("ec2", "StopInstances")] == 1
    live.drain()
    assert len([m for m in live.sink.messages if IDLE in json.dumps(m)]) == 1


def test_state_table_unavailable_keeps_the_event_and_stops_nothing_until_it_is_back(
    live: LocalStack, journal: Journal
) -> None:
    dynamodb = clients.client("dynamodb")
    dynamodb.delete_table(TableName=TABLE)

    result, tries = invoke_async(live, "GpuIdleFunction", alarm())
    # No record of the event can be written, so the flow never starts: nothing decided, nothing stopped.
    assert result is None and tries == 3
    assert journal.stops() == [] and journal.decisions_logged("stop") == []
    assert state_of(IDLE) == "running"
    [kept] = kept_events(live)

    create_state_table(dynamodb, TABLE)  # back, as the template defines it (empty)
    # The kept event, sent again once the table is back (redrive of the failure destination), acts once. The
    # table came back empty: the instance's costguard:marked-at tag has no record to vouch for it, so it is
    # marked afresh (its owner gets a grace period again), never stopped on the old tag.
    invoke_async(live, "GpuIdleFunction", kept["requestPayload"])
    invoke_async(live, "GpuIdleFunction", kept["requestPayload"])
    assert journal.stops() == []
    assert journal.decisions_logged("mark") == [IDLE]
    assert state_of(IDLE) == "running"


def _queued_notices(stack: LocalStack) -> list[dict[str, Any]]:
    found = []
    while (
        messages := clients.sqs()
        .receive_message(QueueUrl=stack.urls["DecisionsQueue"], MaxNumberOfMessages=10, VisibilityTimeout=30)
        .get("Messages", [])
    ):
        found.extend(json.loads(m["Body"]) for m in messages)
    return found


def test_state_table_unavailable_during_a_sweep_still_queues_the_mark_warning(
    world: World, sink: SlackSink, sleeps: list[float]
) -> None:
    sweep = json.loads((EVENTS / "schedule-gpu-sweep-1200.json").read_text())
    with LocalStack(world, sink=sink, mode="remediate") as stack:
        clients.client("dynamodb").delete_table(TableName=TABLE)
        result = stack.invoke("GpuIdleFunction", sweep).result  # repeat suppression fails open
        marked = {d["resource_id"] for d in result["decisions"] if d["action"] == "mark"}
        assert IDLE in marked
        queued = _queued_notices(stack)
        # Every mark made is announced, each once.
        assert sorted(
            n["decision"]["finding"]["resource"]["id"] for n in queued if n["decision"]["action"] == "mark"
        ) == sorted(marked)
        # The owner's warning (when it will stop, how to keep it) is on its way even without the table.
        assert [
            n["decision"]["action"] for n in queued if n["decision"]["finding"]["resource"]["id"] == IDLE
        ] == ["mark"]


def test_state_table_unavailable_during_a_sweep_stops_nothing_and_says_so(
    live: LocalStack, journal: Journal
) -> None:
    sweep = json.loads((EVENTS / "schedule-gpu-sweep-1200.json").read_text())
    clients.client("dynamodb").delete_table(TableName=TABLE)
    result = live.invoke("GpuIdleFunction", sweep).result
    # Neither the mark's record nor the hourly stop cap can be read: the stop is not made, and the decision says
    # why (told, never silent).
    assert journal.stops() == []
    assert state_of(IDLE) == "running"
    [told] = [d for d in result["decisions"] if d["resource_id"] == IDLE]
    assert told["action"] == "notify"
    assert "cannot be checked against costguard's records (state table unreadable)" in told["note"]
