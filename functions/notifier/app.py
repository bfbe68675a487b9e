"""Entry point: queued notices from SQS, told in Slack (flows/notifier.py: conversations, groups, digests).

Notices arrive from two queues: the urgent one (stops made, budgets breached) with no batching window, the
decisions queue after it. A transient failure (429, 5xx, a connection error) goes back to its queue, visible again
in seconds (notify/handback.py), then its dead-letter queue; a notice
Slack refuses for good (another 4xx, a malformed secret, a parent update refused) is parked in the failed-events
queue instead. A notice already told in its conversation (a redelivery, a redrive) is not told again. What the
invocation has no time left to start (Lambda's remaining time) goes back to the queue untouched.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard.flows.notifier import DELIVER_PERMISSIONS, deliver_batch
from costguard.handler import lambda_entry
from costguard.notify.delivery import Deadline, NotStartedError, PermanentDeliveryError, redact
from costguard.notify.handback import PERMISSIONS as HAND_BACK_PERMISSIONS
from costguard.notify.handback import hand_back
from costguard.notify.notice import AnyNotice, parse_notice
from costguard.notify.ops_topic import tell_ops_channel_refused
from costguard.notify.parked import PERMISSIONS as PARK_PERMISSIONS
from costguard.notify.parked import ParkError, park
from costguard.notify.slack_api import ApiPermanentError
from costguard.observability import logger, metrics
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
# An unreadable notice stays on the queue for its dead-letter queue: nothing is sent anywhere.
# A notice Slack refuses for good is parked in the failed-events queue (notify/parked.py).
# A notice handed back is tried again in seconds (notify/handback.py).
PERMISSIONS = DELIVER_PERMISSIONS | PARK_PERMISSIONS | HAND_BACK_PERMISSIONS

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(get_settings(), "state_table", "failed_events_queue_url", "slack_secret_id")


def handle(records: list[dict[str, Any]], deadline: Deadline | None = None) -> list[str]:
    """Tell the batch; the message ids to return to the queue (those not told, and those the invocation had no
    time left to start: ``deadline``, from the Lambda context)."""
    failed: list[str] = []
    items: list[tuple[str, AnyNotice]] = []
    for record in records:
        mid = record["messageId"]
        try:
            items.append((mid, parse_notice(record["body"])))
        except ValueError:
            logger.error("unreadable notice", extra={"message_id": mid})
            metrics.add_metric(name="UnreadableNotices", unit=MetricUnit.Count, value=1)
            failed.append(mid)  # stays on the queue, then lands in the dead-letter queue
    failures = deliver_batch(items, settings, deadline=deadline)
    # A channel Slack refuses the app in: told once on the ops topic with the count, not as one error a notice.
    refused_channels: dict[tuple[str, str], int] = {}
    for mid, notice in items:
        error = failures.get(mid)
        if error is None:
            metrics.add_metric(name="NoticesDelivered", unit=MetricUnit.Count, value=1)
            continue
        if isinstance(error, NotStartedError):  # no time left to start it: back to the queue, untried
            metrics.add_metric(name="NoticesNotStarted", unit=MetricUnit.Count, value=1)
        elif isinstance(error, PermanentDeliveryError):
            # Another try would meet the same answer: told once and kept, not retried into the dead-letter queue.
            try:
                park(notice, error, settings, message_id=mid)
                if isinstance(error, ApiPermanentError) and error.whole_channel:
                    where = (str(error.channel), str(error.error))
                    refused_channels[where] = refused_channels.get(where, 0) + 1
                continue
            except ParkError as not_kept:
                _delivery_failed(mid, notice, f"{error.cause}; not parked: {not_kept}")
        else:
            _delivery_failed(mid, notice, str(error))
        failed.append(mid)  # back to the queue: retried, then kept in the dead-letter queue
    for (channel, code), parked in sorted(refused_channels.items()):
        tell_ops_channel_refused(channel, code, parked, settings)
    if failed:  # tried again in seconds, not after the queue's visibility timeout
        hand_back(records, failed, (settings.decisions_queue_url, settings.urgent_queue_url))
    return failed


def _delivery_failed(message_id: str, notice: AnyNotice, cause: str) -> None:
    logger.warning(
        "Slack delivery failed",
        extra={"message_id": message_id, "notice": notice.id, "cause": redact(cause)[:1000]},
    )
    metrics.add_metric(name="DeliveryFailures", unit=MetricUnit.Count, value=1)


@lambda_entry
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    failed = handle(event.get("Records", []), Deadline.of(context))
    return {"batchItemFailures": [{"itemIdentifier": mid} for mid in failed]}
