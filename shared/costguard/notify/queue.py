"""The decisions queue between detectors and the notifier."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from costguard.aws import clients
from costguard.notify.notice import Notice

_SQS_BATCH = 10


class NoticeQueue(Protocol):
    def send(self, notices: Sequence[Notice]) -> None: ...


class QueueSendError(RuntimeError):
    """Some notices could not be queued; the caller fails so the event is retried or kept."""


class SqsNoticeQueue:
    def __init__(self, queue_url: str) -> None:
        self.queue_url = queue_url

    def send(self, notices: Sequence[Notice]) -> None:
        sqs = clients.sqs()
        for start in range(0, len(notices), _SQS_BATCH):
            chunk = notices[start : start + _SQS_BATCH]
            response = sqs.send_message_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "MessageBody": n.model_dump_json()} for i, n in enumerate(chunk)],
            )
            if response.get("Failed"):
                codes = sorted({f.get("Code", "?") for f in response["Failed"]})
                raise QueueSendError(f"{len(response['Failed'])} notices not queued: {codes}")


class MemoryNoticeQueue:
    def __init__(self) -> None:
        self.sent: list[Notice] = []

    def send(self, notices: Sequence[Notice]) -> None:
        self.sent.extend(notices)
