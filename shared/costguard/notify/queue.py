"""The decisions queues between detectors and the notifier: what cannot wait (a stop made, a budget breached) on
the urgent queue, told as soon as it arrives; the rest on the decisions queue, gathered for the batching window."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from aws_lambda_powertools.metrics import MetricUnit

from costguard.aws import clients
from costguard.notify.notice import AnyNotice, urgent
from costguard.observability import logger, metrics
from costguard.permissions import needs

_SQS_BATCH = 10

# SendMessageBatch is authorized by sqs:SendMessage.
PERMISSIONS = needs("sqs:SendMessage")


class NoticeQueue(Protocol):
    def send(self, notices: Sequence[AnyNotice]) -> None: ...


class QueueSendError(RuntimeError):
    """Some notices could not be queued; the caller fails so the event is retried or kept."""


class SqsNoticeQueue:
    def __init__(self, queue_url: str, urgent_url: str = "") -> None:
        self.queue_url = queue_url
        self.urgent_url = urgent_url or queue_url  # none configured: one queue for all

    def send(self, notices: Sequence[AnyNotice]) -> None:
        """Urgent notices first, on their own queue; each queue in batches of ten. A batch not queued raises
        QueueSendError after the notices not queued are logged whole."""
        apart = self.urgent_url != self.queue_url
        now = [n for n in notices if apart and urgent(n)]
        later = [n for n in notices if not (apart and urgent(n))]
        try:
            self._send(self.urgent_url, now)
        except QueueSendError:
            _keep_in_log(later, "not tried: an urgent notice before them was not queued")
            raise
        self._send(self.queue_url, later)

    def _send(self, queue_url: str, notices: Sequence[AnyNotice]) -> None:
        sqs = clients.sqs()
        for start in range(0, len(notices), _SQS_BATCH):
            chunk = notices[start : start + _SQS_BATCH]
            try:
                response = sqs.send_message_batch(
                    QueueUrl=queue_url,
                    Entries=[{"Id": str(i), "MessageBody": n.model_dump_json()} for i, n in enumerate(chunk)],
                )
            except Exception as error:
                _keep_in_log(notices[start:], str(error))
                raise QueueSendError(f"{len(notices) - start} notices not queued: {error}") from error
            if response.get("Failed"):
                failed = [chunk[int(f["Id"])] for f in response["Failed"]]
                codes = sorted({f.get("Code", "?") for f in response["Failed"]})
                _keep_in_log([*failed, *notices[start + _SQS_BATCH :]], ", ".join(codes))
                raise QueueSendError(f"{len(response['Failed'])} notices not queued: {codes}")


def _keep_in_log(notices: Sequence[AnyNotice], why: str) -> None:
    """The action behind a notice has happened and a retry would not repeat it: the log keeps the notice whole."""
    metrics.add_metric(name="NoticesNotQueued", unit=MetricUnit.Count, value=len(notices))
    for notice in notices:
        logger.error("notice not queued", extra={"why": why, "notice": notice.model_dump(mode="json")})


class MemoryNoticeQueue:
    def __init__(self) -> None:
        self.sent: list[AnyNotice] = []

    def send(self, notices: Sequence[AnyNotice]) -> None:
        self.sent.extend(notices)
