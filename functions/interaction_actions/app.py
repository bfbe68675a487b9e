"""Entry point: queued Slack interactions (keep, protect, stop now, mute), carried out once each."""

from __future__ import annotations

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard import clock
from costguard.aws import clients
from costguard.handler import lambda_entry
from costguard.interact.actions import UnreadableClick
from costguard.interact.authorize import allowed_from_environment
from costguard.interact.consumer import PERMISSIONS as ACTIONS_PERMISSIONS
from costguard.interact.consumer import UnverifiedClick, Worker, handle_record, worker
from costguard.observability import logger, metrics
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = ACTIONS_PERMISSIONS | clients.ASSUME_PERMISSIONS

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(get_settings(), "state_table", "decisions_queue_url", "slack_secret_id")
allowed = allowed_from_environment()  # COSTGUARD_SLACK_ALLOWED, likewise
processor = BatchProcessor(event_type=EventType.SQS)
_worker: list[Worker] = []  # built on the first record (it reads the Slack secret), then kept


def record_handler(record: SQSRecord) -> None:
    # A failure (AWS or Slack unreachable, an unreadable or unverifiable click) is logged with the message id,
    # counted, and raised: the record returns to the queue, then its dead-letter queue keeps it.
    try:
        if not _worker:
            _worker.append(worker(settings, allowed))
        handle_record(record.body, dict(record.raw_event.get("attributes") or {}), _worker[0], clock.now())
    except UnverifiedClick as unverified:
        logger.error(
            "unverified interaction: not signed by Slack",
            extra={"message_id": record.message_id, "problem": str(unverified)},
        )
        metrics.add_metric(name="UnverifiedInteractions", unit=MetricUnit.Count, value=1)
        raise
    except UnreadableClick as unreadable:
        logger.error(
            "unreadable interaction", extra={"message_id": record.message_id, "problem": str(unreadable)}
        )
        metrics.add_metric(name="UnreadableInteractions", unit=MetricUnit.Count, value=1)
        raise
    except Exception as error:
        logger.error(
            "interaction failed", extra={"message_id": record.message_id, "cause": type(error).__name__}
        )
        metrics.add_metric(name="InteractionFailures", unit=MetricUnit.Count, value=1)
        raise


@lambda_entry
def lambda_handler(event: dict[str, object], context: LambdaContext) -> PartialItemFailureResponse:
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
