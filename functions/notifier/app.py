"""Entry point: queued notices from SQS, posted to Slack; failures go back to the queue, then its DLQ."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard.entry import ONCE_PERMISSIONS, OncePerEvent
from costguard.flows.notifier import DELIVER_PERMISSIONS, deliver
from costguard.notify.notice import Notice
from costguard.observability import logger, metrics, tracer
from costguard.settings import get_settings

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
# An unreadable notice stays on the queue for its dead-letter queue: nothing is sent anywhere.
PERMISSIONS = ONCE_PERMISSIONS | DELIVER_PERMISSIONS

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
    except Exception:
        logger.warning("Slack delivery failed", extra={"message_id": record.message_id, "notice": notice.id})
        metrics.add_metric(name="DeliveryFailures", unit=MetricUnit.Count, value=1)
        raise
    metrics.add_metric(name="NoticesDelivered", unit=MetricUnit.Count, value=1)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    deliver_once.register(context)
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
