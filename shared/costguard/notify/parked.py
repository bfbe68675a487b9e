"""Notices Slack will never take as they are: told once and kept, never retried into the dead-letter queue.

A permanent refusal (a Slack 4xx other than 429, or a malformed webhook secret) would meet the same answer on
every retry: returned to the decisions queue it would be tried five times, land in the dead-letter queue and page
the operator as if Slack were down, and every redrive would loop it again. Instead the notice is logged once
(``notice parked``, with Slack's status, body and the cause), counted in the ``ParkedNotices`` metric, and kept
in the failed-events queue, whose alarm tells the operator once. The kept body is a parked record: ``parked``,
the function, the notice id, the problem, Slack's status and body, and the notice whole, so that
``redrive_parked`` (ops/redrive.py) can queue it again once the cause is fixed.
"""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from costguard.aws import clients
from costguard.notify.delivery import PermanentDeliveryError, redact
from costguard.notify.notice import AnyNotice
from costguard.observability import logger, metrics
from costguard.permissions import needs
from costguard.settings import Settings

PERMISSIONS = needs("sqs:SendMessage")  # park: one message to the failed-events queue
PARKED_KIND = "slack_refused"
FUNCTION = "notifier"
# SQS refuses bodies over 256 KiB (counted in UTF-8 bytes).
_MAX_BODY_BYTES = 250_000


class ParkError(RuntimeError):
    """The failed-events queue did not take the notice: the caller returns it to the queue instead."""


def parked_record(notice: AnyNotice, error: PermanentDeliveryError, *, message_id: str) -> dict[str, Any]:
    return {
        "parked": PARKED_KIND,
        "function": FUNCTION,
        "event_id": notice.id,
        "message_id": message_id,
        "problem": redact(error.cause)[:2000],
        "slack_status": error.status,
        "slack_body": error.body,
        "notice": notice.model_dump(mode="json"),
    }


def park(notice: AnyNotice, error: PermanentDeliveryError, settings: Settings, *, message_id: str) -> None:
    """Log, count and keep a notice Slack refused for good. Raises ParkError if it could not be kept."""
    record = parked_record(notice, error, message_id=message_id)
    body = _json(record)
    if len(body.encode("utf-8")) > _MAX_BODY_BYTES:
        # The notice came off SQS, so it fits alone; with the record around it, it may not: keep its JSON cut
        # to fit (readable, no longer re-sendable) and say so.
        text = notice.model_dump_json().encode("utf-8", "surrogatepass")[: _MAX_BODY_BYTES // 4]
        record["notice"] = text.decode("utf-8", "ignore")
        record["notice_truncated"] = True
        body = json.dumps(record)
    if not settings.failed_events_queue_url:
        raise ParkError("no failed-events queue is configured (COSTGUARD_FAILED_EVENTS_QUEUE_URL)")
    try:
        clients.sqs().send_message(QueueUrl=settings.failed_events_queue_url, MessageBody=body)
    except Exception as failed:
        raise ParkError(
            f"the failed-events queue refused the parked notice: {type(failed).__name__}"
        ) from None
    # Told once the notice is kept: a notice that could not be kept goes back to the queue and is told then.
    logger.error(
        "notice parked",
        extra={
            "message_id": message_id,
            "notice": notice.id,
            "slack_status": error.status,
            "slack_body": error.body,
            "cause": record["problem"],
        },
    )
    metrics.add_metric(name="ParkedNotices", unit=MetricUnit.Count, value=1)


def _json(record: dict[str, Any]) -> str:
    """UTF-8 JSON (smaller than ASCII escapes for non-Latin text), or ASCII when a lone surrogate is in it."""
    body = json.dumps(record, ensure_ascii=False)
    try:
        body.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(record)
    return body


def is_parked_record(body: object) -> bool:
    """A failed-events message that holds a parked notice (and not a rejected event or a Lambda failure)."""
    return (
        isinstance(body, dict) and body.get("parked") == PARKED_KIND and isinstance(body.get("notice"), dict)
    )
