"""The decisions queue: a notice SQS refuses after its action has happened is kept whole in the log, and the call fails."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.stub import Stubber

from costguard.act.executor import Outcome
from costguard.aws import clients
from costguard.model import Action, Decision, Finding, Reason, Resource, ResourceKind
from costguard.notify.notice import Notice
from costguard.notify.queue import QueueSendError, SqsNoticeQueue

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
URL = "https://sqs.us-east-1.amazonaws.com/123456789012/decisions"


def _notice(n: int) -> Notice:
    resource = Resource(
        kind=ResourceKind.EC2_INSTANCE, id=f"i-{n:017x}", account="123456789012", region="us-east-1"
    )
    finding = Finding(reason=Reason.GPU_IDLE, resource=resource, summary="idle", observed_at=NOW)
    decision = Decision(
        action=Action.STOP, reason=Reason.GPU_IDLE, finding=finding, dry_run=False, note="", decided_at=NOW
    )
    return Notice(decision=decision, outcome=Outcome(done=True, detail=f"stopped i-{n:017x}"))


@pytest.fixture
def sqs() -> Iterator[Stubber]:
    clients.reset()
    with Stubber(clients.sqs()) as stubber:
        yield stubber
    clients.reset()


def _kept(caplog: pytest.LogCaptureFixture) -> list[Any]:
    return [r for r in caplog.records if r.getMessage() == "notice not queued"]


def test_refused_entries_and_the_rest_are_logged_whole(
    sqs: Stubber, caplog: pytest.LogCaptureFixture
) -> None:
    notices = [_notice(n) for n in range(12)]  # two batches: 10, then 2 never sent
    sqs.add_response(
        "send_message_batch",
        {
            "Successful": [
                {"Id": str(i), "MessageId": f"m{i}", "MD5OfMessageBody": "x"} for i in range(10) if i != 3
            ],
            "Failed": [{"Id": "3", "SenderFault": False, "Code": "InternalError"}],
        },
    )
    with pytest.raises(QueueSendError, match="1 notices not queued"):
        SqsNoticeQueue(URL).send(notices)
    kept = [r.notice["id"] for r in _kept(caplog)]
    assert kept == [notices[3].id, notices[10].id, notices[11].id]


def test_a_refused_call_logs_every_notice_not_sent(sqs: Stubber, caplog: pytest.LogCaptureFixture) -> None:
    notices = [_notice(n) for n in range(3)]
    sqs.add_client_error("send_message_batch", service_error_code="AWS.SimpleQueueService.NonExistentQueue")
    with pytest.raises(QueueSendError, match="3 notices not queued"):
        SqsNoticeQueue(URL).send(notices)
    records = _kept(caplog)
    assert [r.notice["id"] for r in records] == [n.id for n in notices]
    assert all(r.levelname == "ERROR" and r.notice["outcome"]["done"] for r in records)
