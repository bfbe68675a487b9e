"""Hostile and broken inputs on the way to Slack: what reaches the (local) webhook cannot ping or forge, and what
Slack refuses for good is told once and kept, not retried into the dead-letter queue."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from costguard.act.executor import Outcome
from costguard.aws import clients
from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import MAX_RECEIVE_COUNT, SECRET, LocalStack
from costguard.local.world import World
from costguard.model import Action, Decision, Finding, Reason, Resource, ResourceKind
from costguard.notify.delivery import DeliveryError, PermanentDeliveryError, post
from costguard.notify.notice import Notice
from costguard.ops.redrive import redrive, redrive_parked, redrive_report
from tests.conftest import EVENTS

FAILED_JOB = EVENTS / "sagemaker-training-job-failed.json"
ALARM_IDLE = EVENTS / "cloudwatch-alarm-gpu-idle.json"
IDLE = "i-0a1f00000000000a1"  # the idle instance of the demo world, named by the alarm above
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)

PINGS = ["<!channel>", "<!here>", "<!everyone>", "<@U123>", "<!subteam^S123>", "<#C123>"]
FORGED_LINK = "<https://evil.example/steal|click here to keep your instance>"
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
# Every trick at once; an already-escaped entity must stay text too, not turn into a ping.
HOSTILE = " ".join([*PINGS, FORGED_LINK, "&lt;!channel&gt;", f"\u202eevil{BIDI}"])

# Slack's limits (docs.slack.dev: text 40,000; section text 3,000; field 2,000; header 150; text object 3,000).
LIMITS = {"text": 40_000, "header": 150, "section": 3_000, "field": 2_000, "context": 3_000}
_OWN_LINK = re.compile(r"<https://[a-z0-9.-]*console\.aws\.amazon\.com/[^<>|\s]*\|[^<>]*>")
_BIDI_CHARS = re.compile(f"[{BIDI}]")
_ENTITY = re.compile(r"&(?!amp;|lt;|gt;)")


def _units(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string in a payload, with where it is: text, every block, field, element and button."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def _limited_texts(message: dict[str, Any]) -> Iterator[tuple[str, str, int]]:
    yield "text", message["text"], LIMITS["text"]
    for i, block in enumerate(message["blocks"]):
        if block["type"] == "header":
            yield f"blocks[{i}]", block["text"]["text"], LIMITS["header"]
        if block["type"] == "section" and "text" in block:
            yield f"blocks[{i}]", block["text"]["text"], LIMITS["section"]
        for j, field in enumerate(block.get("fields", [])):
            yield f"blocks[{i}].fields[{j}]", field["text"], LIMITS["field"]
        for j, element in enumerate(block.get("elements", [])):
            yield f"blocks[{i}].elements[{j}]", element["text"], LIMITS["context"]


def assert_safe(message: dict[str, Any]) -> None:
    """Nothing in the payload can ping, forge a link, reorder text or break Slack's limits."""
    for where, text in _strings(message):
        text.encode("utf-8")  # no lone surrogate (half an emoji)
        assert not _BIDI_CHARS.search(text), f"{where}: bidirectional control"
        for ping in PINGS:
            assert ping not in text, f"{where}: {ping}"
        assert "<https://evil" not in text, f"{where}: forged link"
        # The only '<' left opens costguard's own console link; every '&' starts one of Slack's three entities.
        assert "<" not in _OWN_LINK.sub("", text) and ">" not in _OWN_LINK.sub("", text), (
            f"{where}: {text[:200]}"
        )
        assert not _ENTITY.search(text), f"{where}: a bare & ({text[:200]})"
    for where, text, limit in _limited_texts(message):
        assert _units(text) <= limit, f"{where}: {_units(text)} UTF-16 units > {limit}"


def _notice(**changes: Any) -> Notice:
    """An EC2 notice with the given resource, finding, decision and outcome fields replaced."""
    resource = {
        "kind": ResourceKind.EC2_INSTANCE,
        "id": "i-0abc",
        "account": "123456789012",
        "region": "us-east-1",
        "name": "trainer",
        "instance_type": "p4d.24xlarge",
        "tags": {"team": "ml"},
    } | changes.get("resource", {})
    finding = {
        "reason": Reason.GPU_IDLE,
        "resource": Resource(**resource),
        "summary": "GPU idle for 2h",
        "observed_at": NOW,
        "hourly_usd": 32.77,
        "cost_usd": 65.54,
        "evidence": {"gpu_max_percent": 0.4},
        "event_id": changes.get("event_id", "evt-1"),
    } | changes.get("finding", {})
    decision = {
        "action": Action.STOP,
        "reason": Reason.GPU_IDLE,
        "finding": Finding(**finding),
        "dry_run": False,
        "note": "grace period over",
        "decided_at": NOW,
    } | changes.get("decision", {})
    outcome = {
        "done": False,
        "detail": "failed to stop trainer",
        "error": "UnauthorizedOperation",
    } | changes.get("outcome", {})
    return Notice(decision=Decision(**decision), outcome=Outcome(**outcome), **changes.get("notice", {}))


def _queue(stack: LocalStack, notices: list[Notice]) -> None:
    sqs = clients.sqs()
    for notice in notices:
        sqs.send_message(QueueUrl=stack.urls["DecisionsQueue"], MessageBody=notice.model_dump_json())


def _messages_of(stack: LocalStack, queue: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    sqs = clients.sqs()
    while messages := sqs.receive_message(
        QueueUrl=stack.urls[queue], MaxNumberOfMessages=10, VisibilityTimeout=0
    ).get("Messages", []):
        for message in messages:
            found.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=stack.urls[queue], ReceiptHandle=message["ReceiptHandle"])
    return found


# -- 1. text that cannot ping or forge ---------------------------------------------------------------------


def test_injection_in_every_field_arrives_escaped_in_the_group_message_too(stack: LocalStack) -> None:
    notices = [
        _notice(**changes, event_id=f"hostile-{i}") for i, changes in enumerate(HOSTILE_FIELDS.values())
    ]
    _queue(stack, notices)
    stack.drain()
    [message] = stack.sink.messages  # more than a few at once: one message
    assert_safe(message)
    assert f"{len(notices)} findings" in message["text"]


# Each AWS- or user-derived field of a notice, made hostile on its own.
HOSTILE_FIELDS: dict[str, dict[str, Any]] = {
    "Name tag": {"resource": {"name": HOSTILE, "tags": {"Name": HOSTILE}}},
    "resource id": {"resource": {"id": HOSTILE, "name": None}},
    "tag key and value": {"resource": {"tags": {HOSTILE: HOSTILE, "team`": "`" + HOSTILE}}},
    "account": {"resource": {"account": HOSTILE}},
    "region": {"resource": {"region": HOSTILE}},
    "instance type": {"resource": {"instance_type": HOSTILE}},
    "summary (an SNS subject, a monitor name)": {"finding": {"summary": f"Budget {HOSTILE} exceeded"}},
    "evidence": {"finding": {"evidence": {"subject": HOSTILE, HOSTILE: [HOSTILE], "n": {"x": HOSTILE}}}},
    "decision note": {"decision": {"note": HOSTILE, "action": Action.NOTIFY}, "outcome": {"error": None}},
    "outcome": {"outcome": {"detail": HOSTILE, "error": HOSTILE}},
    "protect tag key": {"notice": {"protect_tag_key": HOSTILE}},
}


def test_injection_in_every_field_arrives_escaped_in_every_field_of_the_payload(stack: LocalStack) -> None:
    notices = [
        _notice(**changes, event_id=f"hostile-{i}") for i, changes in enumerate(HOSTILE_FIELDS.values())
    ]
    everything = {
        "resource": {
            "name": HOSTILE,
            "id": HOSTILE,
            "account": HOSTILE,
            "region": HOSTILE,
            "instance_type": HOSTILE,
            "tags": {HOSTILE: HOSTILE},
        }
    }
    notices.append(
        _notice(
            resource=everything["resource"],
            finding={"summary": HOSTILE, "evidence": {"subject": HOSTILE}},
            decision={"note": HOSTILE},
            outcome={"detail": HOSTILE, "error": HOSTILE},
            notice={"protect_tag_key": HOSTILE},
            event_id="hostile-all",
        )
    )
    for notice in notices:  # one at a time: each its own message (together they are one group, below)
        _queue(stack, [notice])
        stack.drain()
    assert len(stack.sink.messages) == len(notices), stack.sink.refused
    for message in stack.sink.messages:
        assert_safe(message)
        # The hostile text is there, as text, in the blocks whichever field carried it.
        assert "&lt;!channel&gt;" in json.dumps(message["blocks"])
    # An entity in the input is shown as written, not read as a ping.
    assert any("&amp;lt;!channel&amp;gt;" in json.dumps(m) for m in stack.sink.messages)
    # The notification text names the resource and where it is, escaped, and says when an account id is not one.
    [every] = [
        m for m in stack.sink.messages if "invalid account id" in m["text"] and "&lt;!here&gt;" in m["text"]
    ][-1:]
    assert "costguard: Idle GPU instance: " in every["text"]
    assert stack.queue_depth("DecisionsDeadLetterQueue") == 0


def test_a_real_account_id_is_shown_and_anything_else_is_marked_invalid(stack: LocalStack) -> None:
    _queue(
        stack,
        [
            _notice(event_id="good"),
            _notice(resource={"account": "12345678901a"}, event_id="letters"),
            _notice(resource={"account": "1234567890123"}, event_id="thirteen"),
        ],
    )
    stack.drain()
    good, letters, thirteen = stack.sink.messages
    assert "(123456789012/us-east-1)" in good["text"]
    assert "*Account / region*\n123456789012 / us-east-1" in json.dumps(good["blocks"]).replace("\\n", "\n")
    for message, raw in ((letters, "12345678901a"), (thirteen, "1234567890123")):
        assert "invalid account id" in message["text"]
        fields = [f["text"] for f in message["blocks"][2]["fields"] if f["text"].startswith("*Account")]
        assert fields and "invalid account id" in fields[0] and raw in fields[0]


@pytest.mark.parametrize(
    "name",
    [
        "N" * 50_000,
        "<" * 50_000,  # four times longer once escaped
        "&" * 50_000,
        "\U0001f600" * 25_000,  # 50,000 UTF-16 units
        # An emoji across each clip boundary (the name's budget in a field, and in the text).
        *("a" * k + "\U0001f600" * 400 for k in (297, 298, 299, 300)),
        *("a" * k + "\U0001f600" * 600 for k in (998, 999, 1000)),
        *("a" * k + "&" + "b" * 50 for k in (295, 296, 297, 298, 299)),  # &amp; across the boundary
    ],
    ids=lambda name: f"{name[:1]}..{len(name)}",
)
def test_huge_names_and_emoji_at_the_clip_boundary_stay_within_slack_limits(
    stack: LocalStack, name: str
) -> None:
    _queue(
        stack,
        [
            _notice(
                resource={"name": name, "tags": {"Name": name[:5000]}},
                finding={"summary": name, "evidence": {"subject": name}},
                decision={"note": name},
                outcome={"detail": name, "error": name},
            )
        ],
    )
    stack.drain()
    [message] = stack.sink.messages
    assert_safe(message)
    assert message["text"].startswith("costguard: Idle GPU instance: ")
    assert "…" in message["text"] or len(name) <= 1000


def test_hostile_name_tag_on_an_instance_arrives_escaped(
    world: World, sink: SlackSink, sleeps: list[float]
) -> None:
    # A Name tag can hold 256 characters: enough for every trick, with bidi controls around the lot.
    name = f"\u202e{HOSTILE}"[:256]
    specs = [s.model_copy(update={"name": name}) if s.id == IDLE else s for s in world.instances]
    hostile_world = World.model_validate(world.model_dump() | {"instances": [s.model_dump() for s in specs]})
    with LocalStack(hostile_world, sink=sink) as stack:
        replay(stack, [ALARM_IDLE])
    [message] = [m for m in sink.messages if IDLE in json.dumps(m)]
    assert_safe(message)
    assert "&lt;!channel&gt;" in message["text"]
    assert "&lt;!channel&gt;" in json.dumps(message["blocks"])


def test_hostile_sns_subject_arrives_escaped(stack: LocalStack, tmp_path: Path) -> None:
    event = json.loads((EVENTS / "budget-unexpected-wording.json").read_text())
    sns = event["Records"][0]["Sns"]
    sns["Subject"] = HOSTILE
    sns["Message"] = f"{HOSTILE}\n{sns['Message']}"
    path = tmp_path / "budget-hostile-subject.json"
    path.write_text(json.dumps(event))
    [result] = replay(stack, [path])
    assert result.ok, result.error
    [message] = stack.sink.messages
    assert_safe(message)
    assert "&lt;!channel&gt;" in message["text"]  # the subject names the unreadable notification


# -- 2. what Slack refuses for good is told once and kept --------------------------------------------------


def _parked(stack: LocalStack) -> list[dict[str, Any]]:
    return [body for body in _messages_of(stack, "FailedEventsQueue") if body.get("parked")]


def _metric(output: str, name: str) -> float:
    total = 0.0
    for line in output.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            value = json.loads(line).get(name, 0)
            total += sum(value) if isinstance(value, list) else float(value)
    return total


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, "invalid_blocks"),
        (400, "invalid_payload"),
        (403, "action_prohibited"),
        (404, "no_service"),
        (410, "channel_is_archived"),
    ],
)
def test_a_permanent_refusal_is_reported_once_and_parked_not_retried(
    stack: LocalStack, capsys: pytest.CaptureFixture[str], status: int, body: str
) -> None:
    stack.sink.always = status
    stack.sink.error_bodies[status] = body
    [result] = replay(stack, [FAILED_JOB])
    assert result.ok, result.error
    # One request: the client does not retry a 4xx, and the notice does not go back to the queue.
    assert [s for _, s in stack.sink.requests] == [status]
    assert stack.queue_depth("DecisionsQueue") == 0
    assert stack.queue_depth("DecisionsDeadLetterQueue") == 0  # the dead-letter alarm stays quiet
    [parked] = _parked(stack)
    assert parked["parked"] == "slack_refused"
    assert parked["function"] == "notifier"
    assert (parked["slack_status"], parked["slack_body"]) == (status, body)
    assert body in parked["problem"]
    notice = Notice.model_validate(parked["notice"])
    assert parked["event_id"] == notice.id
    logs = capsys.readouterr().err
    assert logs.count('"notice parked"') == 1
    assert body in logs
    assert "/services/T000/B000" not in logs  # the webhook's path is its secret


def test_a_parked_notice_is_counted_once_in_parked_notices(stack: LocalStack) -> None:
    stack.sink.always = 400
    # The notifier's invocation prints its metrics: one ParkedNotices, no DeliveryFailures.
    clients.sqs().send_message(
        QueueUrl=stack.urls["DecisionsQueue"], MessageBody=_notice(event_id="count").model_dump_json()
    )
    [invocation] = stack.drain()
    assert _metric(invocation.output, "ParkedNotices") == 1
    assert _metric(invocation.output, "DeliveryFailures") == 0
    assert invocation.result == {"batchItemFailures": []}


def test_a_server_error_is_still_retried_and_dead_lettered_not_parked(stack: LocalStack) -> None:
    stack.sink.always = 500
    replay(stack, [FAILED_JOB])
    assert len(stack.sink.requests) == 3 * MAX_RECEIVE_COUNT  # the client's three tries on every receive
    assert stack.queue_depth("DecisionsDeadLetterQueue") == 1
    assert _parked(stack) == []


def test_throttling_that_outlives_the_retries_is_dead_lettered_not_parked(stack: LocalStack) -> None:
    stack.sink.always = 429
    replay(stack, [FAILED_JOB])
    assert stack.queue_depth("DecisionsDeadLetterQueue") == 1
    assert _parked(stack) == []


def test_parked_notice_is_not_redriven_from_the_dead_letter_queue_and_is_posted_once_when_requeued(
    stack: LocalStack,
) -> None:
    stack.sink.always = 404
    replay(stack, [FAILED_JOB])
    assert stack.queue_depth("DecisionsDeadLetterQueue") == 0
    assert redrive(stack.urls["DecisionsDeadLetterQueue"], stack.urls["DecisionsQueue"]) == 0

    stack.sink.always = None  # the webhook is fixed
    moved = redrive_parked(stack.urls["FailedEventsQueue"], stack.urls["DecisionsQueue"])
    assert moved.moved == 1
    stack.drain()
    assert len(stack.sink.messages) == 1
    assert "Training job failed" in stack.sink.messages[0]["text"]
    # Requeued again (twice by mistake): the notifier is idempotent on the notice id.
    assert redrive_parked(stack.urls["FailedEventsQueue"], stack.urls["DecisionsQueue"]).moved == 0
    assert stack.queue_depth("FailedEventsQueue") == 0


def test_redrive_leaves_what_could_never_be_posted_in_the_dead_letter_queue(stack: LocalStack) -> None:
    sqs = clients.sqs()
    dlq = stack.urls["DecisionsDeadLetterQueue"]
    good = _notice(event_id="good").model_dump_json()
    parked = json.dumps({"parked": "slack_refused", "notice": json.loads(good), "function": "notifier"})
    for body in (good, '{"decision": "not a decision"}', "not json", parked):
        sqs.send_message(QueueUrl=dlq, MessageBody=body)
    report = redrive_report(dlq, stack.urls["DecisionsQueue"])
    assert report.moved == 1
    assert sorted(report.left.values()) == sorted(
        [
            "not a notice: the notifier cannot read it",
            "not JSON: the notifier cannot read it",
            "a parked notice: use redrive_parked once its cause is fixed",
        ]
    )
    stack.drain()
    assert len(stack.sink.messages) == 1


def test_redrive_parked_moves_only_parked_notices(stack: LocalStack) -> None:
    sqs = clients.sqs()
    failed = stack.urls["FailedEventsQueue"]
    rejected = {"function": "gpu_idle", "event_id": "e1", "problem": "bad", "event": {}}
    lambda_failure = {"requestContext": {"condition": "RetriesExhausted"}, "requestPayload": {"id": "x"}}
    parked = {
        "parked": "slack_refused",
        "function": "notifier",
        "notice": json.loads(_notice().model_dump_json()),
    }
    for body in (rejected, lambda_failure, parked):
        sqs.send_message(QueueUrl=failed, MessageBody=json.dumps(body))
    report = redrive_parked(failed, stack.urls["DecisionsQueue"])
    assert report.moved == 1 and len(report.left) == 2
    stack.drain()
    assert len(stack.sink.messages) == 1


@pytest.mark.parametrize(
    "secret",
    [
        "not a url at all",
        '{"default": "https://hooks.slack.com/services/T0/B0/truncated',
        "https://hooks.slack.com.evil.com/services/T0/B0/SECRETtoken",
        json.dumps({"default": "https://evil.com/hooks.slack.com/services/T0/B0/SECRETtoken"}),
    ],
    ids=["text", "truncated-json", "lookalike-host", "host-in-path"],
)
def test_a_malformed_secret_parks_the_notice_without_posting_or_logging_the_secret(
    stack: LocalStack, capsys: pytest.CaptureFixture[str], secret: str
) -> None:
    clients.client("secretsmanager").put_secret_value(SecretId=SECRET, SecretString=secret)
    [result] = replay(stack, [FAILED_JOB])
    assert result.ok, result.error
    assert stack.sink.requests == []  # nothing was posted anywhere
    assert stack.queue_depth("DecisionsDeadLetterQueue") == 0
    [parked] = _parked(stack)
    assert parked["slack_status"] is None
    assert "Slack webhook secret" in parked["problem"]
    logs = capsys.readouterr().err
    assert logs.count('"notice parked"') == 1
    for leaked in ("SECRETtoken", "truncated", "not a url at all", "evil.com"):
        assert leaked not in logs
        assert leaked not in json.dumps(parked)


def test_a_message_over_slack_limits_is_refused_by_the_sink_as_slack_would(sink: SlackSink) -> None:
    """The local sink enforces Block Kit's limits, so a message Slack would refuse cannot pass a test."""
    from costguard.local.sink import block_problems

    too_long = {"text": "x", "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "😀" * 1501}}]}
    assert block_problems(too_long) == ["blocks[0].text: 3002 > 3000"]
    with pytest.raises(PermanentDeliveryError) as refused:
        post(sink.url, too_long)
    assert (refused.value.status, refused.value.body) == (400, "invalid_blocks")


# -- delivery: which answers are permanent --------------------------------------------------------------


@pytest.fixture
def no_backoff(sleeps: list[float]) -> list[float]:
    return sleeps


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410])
def test_a_4xx_other_than_429_is_permanent(sink: SlackSink, no_backoff: list[float], status: int) -> None:
    sink.always = status
    with pytest.raises(PermanentDeliveryError) as refused:
        post(sink.url, {"text": "hello"})
    assert refused.value.status == status
    assert len(sink.requests) == 1
    assert "B000" not in str(refused.value)


# slack_sdk's handlers retry 429, 500 and 503 twice; any 5xx and 408 go back to the queue for SQS to retry.
@pytest.mark.parametrize(("status", "tries"), [(429, 3), (500, 3), (503, 3), (502, 1), (504, 1), (408, 1)])
def test_throttling_and_server_errors_are_transient(
    sink: SlackSink, no_backoff: list[float], status: int, tries: int
) -> None:
    sink.always = status
    with pytest.raises(DeliveryError) as failed:
        post(sink.url, {"text": "hello"})
    assert not isinstance(failed.value, PermanentDeliveryError)
    assert len(sink.requests) == tries


def test_an_unreachable_slack_is_transient(no_backoff: list[float]) -> None:
    with SlackSink() as gone:
        url = gone.url
    with pytest.raises(DeliveryError) as failed:
        post(url, {"text": "hello"})
    assert not isinstance(failed.value, PermanentDeliveryError)


def test_the_redrive_command_moves_parked_notices_with_parked(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    from costguard.cli import main

    sqs = clients.sqs()
    failed, decisions = stack.urls["FailedEventsQueue"], stack.urls["DecisionsQueue"]
    parked = {
        "parked": "slack_refused",
        "function": "notifier",
        "notice": json.loads(_notice().model_dump_json()),
    }
    rejected = {"function": "gpu_idle", "event_id": "e1", "problem": "bad", "event": {}}
    for body in (parked, rejected):
        sqs.send_message(QueueUrl=failed, MessageBody=json.dumps(body))
    assert main(["redrive", "--parked", "--dlq-url", failed, "--queue-url", decisions]) == 0
    out = capsys.readouterr().out
    assert "moved 1 parked notices from the failed-events queue" in out
    assert out.count("  left ") == 1  # the rejected event stays, named
    assert stack.queue_depth("DecisionsQueue") == 1
