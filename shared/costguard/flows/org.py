"""An organization's scheduled sweeps: one work item per (account, region) on the sweep's own queue.

The scheduled event fans out (``fan_out``); each item is then swept on its own (``run_items``), in its account
through the member role, with the queue's retries and dead-letter queue: one denied or throttled account never
blocks the others. A refusal that retrying cannot cure (the member role is missing, say) is reported by name as
``member_unreachable`` and the item is done; anything else fails the item alone, and SQS retries it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from costguard.aws import clients, organization
from costguard.detect.members import PERMANENT_CODES, unreachable_finding
from costguard.events.common import AwsTime
from costguard.events.scheduled import ScheduledEvent
from costguard.observability import logger, metrics, tracer
from costguard.permissions import needs
from costguard.pipeline import Report
from costguard.runtime import Runtime
from costguard.settings import Settings, SettingsError

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

# fan_out: the accounts, then the items on the sweep's queue. run_items: the member role, per item.
FAN_OUT_PERMISSIONS = organization.LIST_PERMISSIONS | needs("sqs:SendMessage")
ASSUME_PERMISSIONS = clients.ASSUME_PERMISSIONS

_BATCH = 10  # SendMessageBatch's limit


class SweepItem(BaseModel):
    """One (account, region) of one scheduled sweep."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sweep: str = Field(min_length=1, max_length=40)
    account: Annotated[str, Field(pattern=r"^[0-9]{12}$")]
    region: Annotated[str, Field(pattern=r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$")]
    account_name: str | None = Field(default=None, max_length=200)
    event_id: str = Field(min_length=1, max_length=200)
    time: AwsTime


def check_settings(settings: Settings) -> Settings:
    """At cold start: an organization's sweep needs its work queue."""
    if settings.organization and not settings.sweep_queue_url:
        raise SettingsError(
            "invalid costguard settings: COSTGUARD_SWEEP_QUEUE_URL: an organization deployment "
            "(COSTGUARD_MEMBER_ROLE_NAME set) fans its sweep out onto this work queue; none is set"
        )
    return settings


def plan(sweep: str, event: ScheduledEvent, settings: Settings) -> list[SweepItem]:
    """Accounts x regions: the configured accounts, else every ACTIVE account; the configured regions, else
    the event's."""
    accounts: list[tuple[str, str | None]]
    if settings.accounts:  # named: no Organizations call (the hub need not be the management account)
        accounts = [(a, None) for a in settings.accounts]
    else:
        accounts = [(a.id, a.name) for a in organization.directory().active()]
    regions = settings.regions or (event.region,)
    return [
        SweepItem(sweep=sweep, account=a, region=r, account_name=name, event_id=event.id, time=event.time)
        for a, name in accounts
        for r in regions
    ]


@tracer.capture_method
def fan_out(sweep: str, event: ScheduledEvent, settings: Settings) -> dict[str, Any]:
    """Queue the sweep's items, ten a call."""
    items = plan(sweep, event, settings)
    sqs = clients.sqs()
    failed: list[str] = []
    for start in range(0, len(items), _BATCH):
        chunk = items[start : start + _BATCH]
        answer = sqs.send_message_batch(
            QueueUrl=settings.sweep_queue_url,
            Entries=[{"Id": str(n), "MessageBody": item.model_dump_json()} for n, item in enumerate(chunk)],
        )
        failed += [
            f"{chunk[int(f['Id'])].account}/{chunk[int(f['Id'])].region}" for f in answer.get("Failed", [])
        ]
    if failed:  # the schedule's own retry runs the whole fan-out again: items are idempotent sweeps
        raise RuntimeError(f"{sweep}: {len(failed)} work items not queued: {', '.join(failed[:20])}")
    metrics.add_metric(name="SweepItemsQueued", unit=MetricUnit.Count, value=len(items))
    logger.info("sweep fanned out", extra={"sweep": sweep, "items": len(items), "event_id": event.id})
    return {"sweep": sweep, "items": len(items), "accounts": len({i.account for i in items})}


Sweep = Callable[[SweepItem, datetime], Report]


class UnreadableWorkItem(ValueError):
    """A record of a sweep's work queue that is no work item: logged, counted, and left to the queue."""


# Called with each item's report once it is swept: the local stack's replay shows the findings this way (a
# work item's invocation returns only its batch response). Empty in a deployed function.
item_observers: list[Callable[[SweepItem, Report], None]] = []


@tracer.capture_method
def sweep_item(item: SweepItem, runtime: Runtime, now: datetime, sweep: Sweep) -> Report:
    """One account and region, in that account. A refusal retrying cannot cure is reported by name."""
    with clients.acting_in(item.account):
        try:
            return sweep(item, now)
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            if code not in PERMANENT_CODES:
                raise  # throttled, or a fault: the queue retries this item alone
            message = str(error.response.get("Error", {}).get("Message", ""))
    logger.warning(
        "member account and region unreachable",
        extra={"sweep": item.sweep, "account": item.account, "region": item.region, "error": code},
    )
    metrics.add_metric(name="UnreachableMembers", unit=MetricUnit.Count, value=1)
    finding = unreachable_finding(
        sweep=item.sweep,
        account=item.account,
        region=item.region,
        account_name=item.account_name,
        role_arn=clients.member_role_arn(item.account, item.region),
        error_code=code,
        error=message,
        now=now,
        event_id=item.event_id,
    )
    return runtime.act([finding], now)


def run_items(
    event: dict[str, Any],
    context: LambdaContext,
    *,
    runtime: Runtime,
    now: Callable[[], datetime],
    sweep: Sweep,
    function: str,
) -> dict[str, Any]:
    """An SQS batch of work items: each succeeds or fails alone (partial batch response)."""
    # powertools' batch utility, loaded by the work items' path only (a sweep's schedule never needs it).
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

    # A failed item goes back alone (batchItemFailures), also when it is the whole batch: no error to log twice.
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

    def one(record: SQSRecord) -> dict[str, Any]:
        try:
            item = SweepItem.model_validate(json.loads(record.body))
        except (ValueError, ValidationError) as error:
            # Logged with its message id and counted, then returned to the queue: after its retries it is kept
            # in the sweep's dead-letter queue (an ops alarm), like any record a queue consumer cannot read.
            logger.error(
                "unreadable work item",
                extra={"message_id": record.message_id, "function": function, "problem": str(error)[:500]},
            )
            metrics.add_metric(name="UnreadableWorkItems", unit=MetricUnit.Count, value=1)
            raise UnreadableWorkItem(f"{function}: not a sweep work item") from None
        report = sweep_item(item, runtime, now(), sweep)
        logger.info(
            "sweep item done",
            extra={
                "sweep": item.sweep,
                "account": item.account,
                "region": item.region,
                "findings": len(report.findings),
                "notices": len(report.notices),
            },
        )
        for observe in item_observers:
            observe(item, report)
        return {"findings": len(report.findings)}

    return dict(
        process_partial_response(event=event, record_handler=one, processor=processor, context=context)
    )


def is_work_batch(event: Any) -> bool:
    """An SQS delivery (the sweep's work queue), as opposed to an EventBridge event."""
    records = event.get("Records") if isinstance(event, dict) else None
    return (
        isinstance(records, list)
        and bool(records)
        and all(isinstance(r, dict) and r.get("eventSource") == "aws:sqs" for r in records)
    )
