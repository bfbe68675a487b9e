"""Entry point: queued notices from SQS, posted to Slack.

A transient failure (429, 5xx, a connection error) goes back to the queue, then its dead-letter queue; a notice
Slack refuses for good (another 4xx, a malformed webhook secret) is parked in the failed-events queue instead.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard.entry import ONCE_PERMISSIONS, OncePerEvent
from costguard.flows.notifier import DELIVER_PERMISSIONS, deliver
from costguard.notify.delivery import PermanentDeliveryError, redact
from costguard.notify.notice import Notice
from costguard.notify.parked import PERMISSIONS as PARK_PERMISSIONS
from costguard.notify.parked import ParkError, park
from costguard.observability import logger, metrics, tracer
from costguard.settings import get_settings

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
# An unreadable notice stays on the queue for its dead-letter queue: nothing is sent anywhere.
# A notice Slack refuses for good is parked in the failed-events queue (notify/parked.py).
PERMISSIONS = ONCE_PERMISSIONS | DELIVER_PERMISSIONS | PARK_PERMISSIONS

settings = get_settings()
processor = BatchProcessor(event_type=EventType.SQS)


def deliver_notice(notice: Notice) -> dict[str, str]:
    deliver(notice, settings)
    return {"delivered": notice.id}


# A redelivered message (after a partial batch failure or a redrive) is posted once.
deliver_once = OncePerEvent(deliver_notice, expires_after_seconds=7 * 24 * 3600)


def record_handler(record: SQSRecord) -> None:
    try:
        notice = Notice.model_validate_json(record.body)
    except ValueError:
        logger.error("unreadable notice", extra={"message_id": record.message_id})
        metrics.add_metric(name="UnreadableNotices", unit=MetricUnit.Count, value=1)
        raise  # stays on the queue, then lands in the dead-letter queue
    try:
        deliver_once(notice)
    except PermanentDeliveryError as refused:
        # Another try would meet the same answer: told once and kept, not retried into the dead-letter queue.
        try:
            park(notice, refused, settings, message_id=record.message_id)
        except ParkError as failed:
            _delivery_failed(record, notice, f"{refused.cause}; not parked: {failed}")
            raise
        return
    except Exception as error:
        _delivery_failed(record, notice, str(error))
        raise  # back to the queue: retried, then kept in the dead-letter queue
    metrics.add_metric(name="NoticesDelivered", unit=MetricUnit.Count, value=1)


def _delivery_failed(record: SQSRecord, notice: Notice, cause: str) -> None:
    logger.warning(
        "Slack delivery failed",
        extra={"message_id": record.message_id, "notice": notice.id, "cause": redact(cause)[:1000]},
    )
    metrics.add_metric(name="DeliveryFailures", unit=MetricUnit.Count, value=1)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    deliver_once.register(context)
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
