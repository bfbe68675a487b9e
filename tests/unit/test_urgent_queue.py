"""What cannot wait travels on the urgent queue, and what the notifier hands back is tried again in seconds.

On moto (the real boto3 calls): a stop made, a scale to zero or deletion made, a budget breach, and a group
holding one go to the urgent queue; a mark, a dry run's stop, a stop that failed and a finding go to the
decisions queue. A handed-back message is made visible again after 5 s doubling to 15 minutes, one
ChangeMessageVisibilityBatch per ten messages of a queue, and a refused call loses nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.stub import Stubber
from moto import mock_aws

from costguard.act.executor import Outcome
from costguard.aws import clients
from costguard.model import Action, Decision, Finding, Reason, Resource, ResourceKind
from costguard.notify import handback
from costguard.notify.notice import Notice, group
from costguard.notify.queue import SqsNoticeQueue

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
ACCOUNT = "123456789012"


def _notice(
    n: int,
    action: Action,
    *,
    reason: Reason = Reason.GPU_IDLE,
    kind: ResourceKind = ResourceKind.EC2_INSTANCE,
    dry_run: bool = False,
    done: bool = True,
) -> Notice:
    resource = Resource(kind=kind, id=f"i-{n:017x}", account=ACCOUNT, region="us-east-1", name=f"r{n}")
    finding = Finding(reason=reason, resource=resource, summary="s", observed_at=NOW, hourly_usd=1.0)
    decision = Decision(action=action, reason=reason, finding=finding, dry_run=dry_run, decided_at=NOW)
    return Notice(decision=decision, outcome=Outcome(done=done, detail="d"))


@pytest.fixture
def queues() -> Iterator[tuple[str, str]]:
    clients.reset()
    with mock_aws():
        sqs = clients.sqs()
        decisions = sqs.create_queue(QueueName="decisions")["QueueUrl"]
        now = sqs.create_queue(QueueName="urgent")["QueueUrl"]
        yield decisions, now
    clients.reset()


def _bodies(url: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while True:
        got = clients.sqs().receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=60)
        if not got.get("Messages"):
            return found
        found += [json.loads(m["Body"]) for m in got["Messages"]]


def test_what_cannot_wait_goes_to_the_urgent_queue_and_the_rest_to_the_decisions_queue(
    queues: tuple[str, str],
) -> None:
    decisions, now = queues
    stop = _notice(1, Action.STOP)
    scaled = _notice(2, Action.STOP, reason=Reason.POD_GPU_IDLE, kind=ResourceKind.EKS_WORKLOAD)
    breach = _notice(3, Action.NOTIFY, reason=Reason.BUDGET_BREACH, kind=ResourceKind.BUDGET)
    mark = _notice(4, Action.MARK)
    dry = _notice(5, Action.STOP, dry_run=True)
    failed = _notice(6, Action.STOP, done=False)
    seen = _notice(7, Action.NOTIFY)
    grouped = group([_notice(8, Action.MARK), _notice(9, Action.STOP)], routing_tag_key="team")
    SqsNoticeQueue(decisions, now).send([stop, scaled, breach, mark, dry, failed, seen, grouped])

    assert {b["id"] for b in _bodies(now)} == {stop.id, scaled.id, breach.id, grouped.id}
    assert {b["id"] for b in _bodies(decisions)} == {mark.id, dry.id, failed.id, seen.id}


def test_without_an_urgent_queue_everything_goes_to_the_decisions_queue(queues: tuple[str, str]) -> None:
    decisions, now = queues
    notices = [_notice(1, Action.STOP), _notice(2, Action.MARK)]
    SqsNoticeQueue(decisions).send(notices)
    assert {b["id"] for b in _bodies(decisions)} == {n.id for n in notices}
    assert _bodies(now) == []


@pytest.mark.parametrize(
    ("received", "seconds"), [(1, 5), (2, 10), (3, 20), (4, 40), (8, 640), (9, 900), (12, 900), (0, 5)]
)
def test_a_handed_back_notice_waits_seconds_doubling_to_fifteen_minutes(received: int, seconds: int) -> None:
    assert handback.retry_after(received) == seconds


def test_the_queue_of_a_record_is_read_from_its_arn() -> None:
    known = ("https://sqs.us-east-1.amazonaws.com/123456789012/costguard-urgent",)
    assert handback.queue_url("arn:aws:sqs:us-east-1:123456789012:costguard-urgent", known) == known[0]
    assert (
        handback.queue_url("arn:aws:sqs:eu-west-1:210987654321:other")
        == "https://sqs.eu-west-1.amazonaws.com/210987654321/other"
    )
    with pytest.raises(ValueError, match="not an SQS queue ARN"):
        handback.queue_url("https://sqs.us-east-1.amazonaws.com/123456789012/costguard-urgent")


def _records(url: str, arn: str, count: int) -> list[dict[str, Any]]:
    sqs = clients.sqs()
    for n in range(count):
        sqs.send_message(QueueUrl=url, MessageBody=str(n))
    records: list[dict[str, Any]] = []
    while len(records) < count:
        got = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=1440, AttributeNames=["All"]
        )
        records += [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "attributes": m["Attributes"],
                "eventSourceARN": arn,
            }
            for m in got["Messages"]
        ]
    return records


def test_handed_back_messages_are_made_visible_soon_ten_to_a_call(
    queues: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, now = queues
    arn = f"arn:aws:sqs:us-east-1:{ACCOUNT}:urgent"
    records = _records(now, arn, 23)
    failed = [r["messageId"] for r in records[:21]]
    calls: list[list[dict[str, Any]]] = []
    real = clients.sqs().change_message_visibility_batch

    def counted(**kwargs: Any) -> Any:
        calls.append(kwargs["Entries"])
        return real(**kwargs)

    monkeypatch.setattr(clients.sqs(), "change_message_visibility_batch", counted)
    assert handback.hand_back(records, failed, (now,)) == 21
    assert [len(c) for c in calls] == [10, 10, 1]  # the two not failed are left as they are
    assert {e["VisibilityTimeout"] for c in calls for e in c} == {5}  # received once
    handles = {e["ReceiptHandle"] for c in calls for e in c}
    assert handles == {r["receiptHandle"] for r in records[:21]}


def test_a_refused_hand_back_loses_nothing_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    clients.reset()
    url = f"https://sqs.us-east-1.amazonaws.com/{ACCOUNT}/urgent"
    record = {
        "messageId": "m1",
        "receiptHandle": "h1",
        "attributes": {"ApproximateReceiveCount": "3"},
        "eventSourceARN": f"arn:aws:sqs:us-east-1:{ACCOUNT}:urgent",
    }
    with Stubber(clients.sqs()) as stubber:
        stubber.add_client_error("change_message_visibility_batch", "AccessDenied", http_status_code=403)
        assert handback.hand_back([record], ["m1"], (url,)) == 0
        stubber.assert_no_pending_responses()
    assert any(r.getMessage() == "hand-back not hastened" for r in caplog.records)
    clients.reset()
