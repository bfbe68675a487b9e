"""An organization's scheduled sweeps: work items of (account, region) targets on the sweep's own queue.

The scheduled event fans out (``fan_out``); each item is then swept on its own (``run_items``), each target in
its account through the member role, with the queue's retries and dead-letter queue: one denied or throttled
account never blocks the others' items. A refusal that retrying cannot cure (the member role is missing, say) is
reported by name as ``member_unreachable`` and that target is done; anything else fails its item alone, and SQS
retries it (every target of it: a sweep is idempotent).

**The census.** Most of an organization's account-regions hold no GPU or accelerator resource. A sweep with a
presence probe (aws/presence.py) fans out every account-region only at its census, once an hour
(``CENSUS_EVERY``): each census target is probed, swept only when the probe finds something, and its answer kept
in the state table (``Census``: which account-regions hold something, spread over ``CENSUS_SHARDS`` items). Between
censuses only those are queued. A resource launched in between is found through its forwarded state-change event,
handled in its own account like any event, and by the next census at the latest. A sweep without a probe (the
hourly capacity sweep: its interval is the census's) queues every account-region every time.

**Sizing.** The work queue's event source mapping runs at most ``SweepConcurrencyCap`` invocations at once
(``ScalingConfig.MaximumConcurrency``, static in the template; Lambda scales up to it by up to 300 more a minute).
A sweep's duration is about its work divided by the concurrency, whatever the batching: ``size`` estimates the
work from the targets (``TARGET_SECONDS`` for a target swept, ``PROBE_SECONDS`` for a census probe, plus
``ITEM_OVERHEAD_SECONDS`` an item), and puts several targets in one item only when one target an item could not
finish within ``FINISH_WITHIN`` of the interval at the cap (fewer items: less of the per-item overhead). The
concurrency it needs is counted (``SweepConcurrencyNeeded``) and logged when above the cap. The queue's own
``ApproximateAgeOfOldestMessage`` (AWS/SQS) is each sweep's age of its oldest item: an ops alarm fires when it
reaches the sweep's interval, a sweep still running when the next one starts.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext
from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from costguard.aws import clients, dynamo, organization
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

# The census: one BatchGetItem at each fan-out, an UpdateItem at a census and for each target whose answer changed.
CENSUS_PERMISSIONS = needs("dynamodb:BatchGetItem", "dynamodb:UpdateItem")
# fan_out: the accounts, the census, then the items on the sweep's queue. run_items: the member role, per target.
FAN_OUT_PERMISSIONS = organization.LIST_PERMISSIONS | needs("sqs:SendMessage") | CENSUS_PERMISSIONS
ASSUME_PERMISSIONS = clients.ASSUME_PERMISSIONS

_BATCH = 10  # SendMessageBatch's limit

# Each sweep's schedule in template.yaml (tests/unit/test_org_fan_out.py holds them equal): what it must finish in.
SWEEP_INTERVALS = {
    "gpu": timedelta(minutes=5),
    "sagemaker": timedelta(minutes=15),
    "training_ceilings": timedelta(minutes=15),
    "capacity": timedelta(hours=1),
}
CENSUS_EVERY = timedelta(hours=1)
# A schedule fires within a minute of its time: a census an hour less a minute old is due.
_CENSUS_SLACK = timedelta(minutes=1)
# The present account-regions, spread over this many state-table items (each under DynamoDB's 400 KB: 8 shards
# of "123456789012/ap-southeast-2" hold every account-region of 1,000 accounts x 17 regions with room to spare).
CENSUS_SHARDS = 8
# Estimates for sizing (the per-call latencies behind them: bench/org_scale.py): a target swept (an account-region
# with a few GPU resources: about six calls and an AssumeRole), a census probe of an empty account-region (an
# AssumeRole and one list call), and what each item adds (the poll, the invocation, the delete).
TARGET_SECONDS = 3.0
PROBE_SECONDS = 0.5
ITEM_OVERHEAD_SECONDS = 0.1
FINISH_WITHIN = 0.8  # of the sweep's interval: a sweep should be done before the next one starts
ITEM_SECONDS = 60.0  # at most, estimated, for one item: far within the function's timeout (300 s)
MAX_TARGETS = 100  # a work item's targets, at most (about 8 KB of message)


class SweepItem(BaseModel):
    """One (account, region) of one scheduled sweep: what a sweep function is given. A work item of this shape
    (one target) is read as one."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sweep: str = Field(min_length=1, max_length=40)
    account: Annotated[str, Field(pattern=r"^[0-9]{12}$")]
    region: Annotated[str, Field(pattern=r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$")]
    account_name: str | None = Field(default=None, max_length=200)
    event_id: str = Field(min_length=1, max_length=200)
    time: AwsTime


class Target(BaseModel):
    """One account and region of a work item; ``present``: what the census last found there (None: unknown)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    account: Annotated[str, Field(pattern=r"^[0-9]{12}$")]
    region: Annotated[str, Field(pattern=r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$")]
    account_name: str | None = Field(default=None, max_length=200)
    present: bool | None = None

    @property
    def key(self) -> str:
        return f"{self.account}/{self.region}"


class WorkItem(BaseModel):
    """One message of a sweep's work queue: its targets, swept one after the other by one invocation. At a census
    each target is probed first and swept only when the probe finds something."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sweep: str = Field(min_length=1, max_length=40)
    event_id: str = Field(min_length=1, max_length=200)
    time: AwsTime
    census: bool = False
    targets: tuple[Target, ...] = Field(min_length=1, max_length=MAX_TARGETS)

    def items(self) -> list[SweepItem]:
        return [
            SweepItem(
                sweep=self.sweep,
                account=t.account,
                region=t.region,
                account_name=t.account_name,
                event_id=self.event_id,
                time=self.time,
            )
            for t in self.targets
        ]


def read_work(body: str) -> WorkItem:
    """A work item, or a one-target item of the older shape (one account and region a message)."""
    raw = json.loads(body)
    if isinstance(raw, dict) and "targets" not in raw:
        one = SweepItem.model_validate(raw)
        target = Target(account=one.account, region=one.region, account_name=one.account_name)
        return WorkItem(sweep=one.sweep, event_id=one.event_id, time=one.time, targets=(target,))
    return WorkItem.model_validate(raw)


class Census:
    """Which account-regions hold something a sweep watches, and when its last census was fanned out, in the
    state table: ``census#<sweep>`` (the time) and ``census#<sweep>#<n>`` (a string set of account/region)."""

    def __init__(self, table: str, sweep: str) -> None:
        self.table, self.sweep = table, sweep

    def _key(self, shard: int | None = None) -> dict[str, dict[str, str]]:
        suffix = "" if shard is None else f"#{shard}"
        return {"id": {"S": f"census#{self.sweep}{suffix}"}}

    @staticmethod
    def shard_of(key: str) -> int:
        return zlib.crc32(key.encode()) % CENSUS_SHARDS

    def read(self) -> tuple[datetime | None, set[str]]:
        """The last census's time (None: never) and the present account-regions: one BatchGetItem."""
        ids = [self._key()["id"]["S"]] + [self._key(n)["id"]["S"] for n in range(CENSUS_SHARDS)]
        found = dynamo.batch_get(clients.client("dynamodb"), self.table, ids, consistent=True)
        taken: datetime | None = None
        present: set[str] = set()
        for item in found:
            if item["id"]["S"] == f"census#{self.sweep}":
                taken = datetime.fromisoformat(item["taken_at"]["S"])
            else:
                present |= set(item.get("present", {}).get("SS", []))
        return taken, present

    def taken(self, now: datetime, gone: Iterable[str] = ()) -> None:
        """A census is fanned out now; ``gone``: account-regions no longer swept (left the organization, a region
        dropped), forgotten: one UpdateItem, and one per shard that held any."""
        dynamodb = clients.client("dynamodb")
        dynamodb.update_item(
            TableName=self.table,
            Key=self._key(),
            UpdateExpression="SET taken_at = :now",
            ExpressionAttributeValues={":now": {"S": now.isoformat()}},
        )
        by_shard: dict[int, list[str]] = {}
        for key in gone:
            by_shard.setdefault(self.shard_of(key), []).append(key)
        for shard, keys in sorted(by_shard.items()):
            self._change(shard, "DELETE", keys)

    def note(self, key: str, present: bool) -> None:
        """What a census probe found in one account-region, when it changed: one UpdateItem."""
        self._change(self.shard_of(key), "ADD" if present else "DELETE", [key])

    def _change(self, shard: int, verb: str, keys: list[str]) -> None:
        clients.client("dynamodb").update_item(
            TableName=self.table,
            Key=self._key(shard),
            UpdateExpression=f"{verb} present :keys",
            ExpressionAttributeValues={":keys": {"SS": sorted(keys)}},
        )


@dataclass(frozen=True)
class Sizing:
    """How a sweep's targets are put in items, and what that is estimated to take at the cap."""

    targets: int
    items: int
    per_item: int  # targets an item, at most
    work_seconds: float  # every item's estimated time, summed
    concurrency: int  # the invocations at once: the cap, or fewer when there are fewer items
    needed: int  # the concurrency that would finish within FINISH_WITHIN of the interval
    finish_seconds: float  # estimated: the work spread over the concurrency, or the longest item if longer
    budget_seconds: float  # FINISH_WITHIN of the interval

    @property
    def fits(self) -> bool:
        return self.finish_seconds <= self.budget_seconds


def size(costs: Sequence[float], cap: int, interval: timedelta) -> Sizing:
    """The fewest targets an item (one, unless the cap cannot finish one an item in time) for targets of these
    estimated costs, at a concurrency of at most ``cap``."""
    budget = FINISH_WITHIN * interval.total_seconds()
    total, longest = sum(costs), max(costs, default=0.0)
    most = max(1, min(MAX_TARGETS, int(ITEM_SECONDS // max(longest, 1e-9))))

    def at(per_item: int) -> Sizing:
        items = math.ceil(len(costs) / per_item)
        work = total + items * ITEM_OVERHEAD_SECONDS
        concurrency = max(1, min(cap, items))
        # The costliest targets first, so the longest item is the first chunk.
        item_longest = sum(sorted(costs, reverse=True)[:per_item]) + ITEM_OVERHEAD_SECONDS if costs else 0.0
        return Sizing(
            targets=len(costs),
            items=items,
            per_item=per_item,
            work_seconds=round(work, 1),
            concurrency=concurrency,
            needed=max(1, math.ceil(work / budget)) if costs else 0,
            finish_seconds=round(max(work / concurrency, item_longest), 1),
            budget_seconds=budget,
        )

    chosen = at(1)
    per_item = 1
    while chosen.finish_seconds > budget and per_item < most:
        per_item = min(most, per_item * 2)
        chosen = at(per_item)
    return chosen


# A GPU instance's launch, forwarded by its member stack: its account-region joins the GPU sweep's census at once.
LAUNCH_PERMISSIONS = needs("dynamodb:UpdateItem")


def note_launch(account: str, region: str, instance_id: str, runtime: Runtime) -> bool:
    """A GPU or accelerator instance now running in an organization's account and region: the GPU sweep queues
    that account-region from its next run, whatever the last census found (one UpdateItem; the instance's read is
    the event's own, shared with the other flows it goes through)."""
    settings = runtime.settings
    if not settings.organization or not settings.state_table:
        return False
    if not runtime.reads.inventory.describe_gpu_instances(region, instance_ids=[instance_id]):
        return False
    Census(settings.state_table, "gpu").note(f"{account}/{region}", True)
    return True


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


def census_due(taken: datetime | None, now: datetime) -> bool:
    return taken is None or now - taken >= CENSUS_EVERY - _CENSUS_SLACK


def select(
    planned: Sequence[SweepItem], taken: datetime | None, present: set[str], now: datetime
) -> tuple[bool, list[Target]]:
    """At a census, every planned account-region (with what the last census found there); between censuses,
    those the last census found something in."""
    census = census_due(taken, now)
    targets = [
        Target(account=i.account, region=i.region, account_name=i.account_name, present=key in present)
        for i in planned
        for key in (f"{i.account}/{i.region}",)
        if census or key in present
    ]
    return census, targets


def estimated_cost(target: Target, census: bool) -> float:
    """A target's estimated seconds: swept, or (at a census, where the last census found nothing) probed only."""
    if census and not target.present:
        return PROBE_SECONDS
    return TARGET_SECONDS + (PROBE_SECONDS if census else 0.0)


def pack(targets: Sequence[Target], census: bool, sizing: Sizing) -> list[tuple[Target, ...]]:
    """Targets in items of ``sizing.per_item``, the costliest first (the longest item is the first to run)."""
    ordered = sorted(targets, key=lambda t: -estimated_cost(t, census))
    step = sizing.per_item
    return [tuple(ordered[n : n + step]) for n in range(0, len(ordered), step)]


@tracer.capture_method
def fan_out(
    sweep: str,
    event: ScheduledEvent,
    settings: Settings,
    *,
    census: bool = False,
    interval: timedelta = timedelta(minutes=5),
) -> dict[str, Any]:
    """Queue the sweep's items, ten a call. With ``census`` (the sweep has a presence probe), every account-region
    at the hourly census, else those the census found something in."""
    planned = plan(sweep, event, settings)
    now = event.time
    record = Census(settings.state_table, sweep) if census and settings.state_table else None
    if record is not None:
        taken, present = record.read()
        is_census, targets = select(planned, taken, present, now)
    else:
        is_census, present = False, set()
        targets = [Target(account=i.account, region=i.region, account_name=i.account_name) for i in planned]
    sizing = size([estimated_cost(t, is_census) for t in targets], settings.sweep_concurrency, interval)
    items = [
        WorkItem(sweep=sweep, event_id=event.id, time=event.time, census=is_census, targets=chunk)
        for chunk in pack(targets, is_census, sizing)
    ]
    sqs = clients.sqs()
    failed: list[str] = []
    for start in range(0, len(items), _BATCH):
        chunk = items[start : start + _BATCH]
        answer = sqs.send_message_batch(
            QueueUrl=settings.sweep_queue_url,
            Entries=[{"Id": str(n), "MessageBody": item.model_dump_json()} for n, item in enumerate(chunk)],
        )
        failed += [t.key for f in answer.get("Failed", []) for t in chunk[int(f["Id"])].targets]
    if failed:  # the schedule's own retry runs the whole fan-out again: items are idempotent sweeps
        raise RuntimeError(f"{sweep}: {len(failed)} targets not queued: {', '.join(failed[:20])}")
    if record is not None and is_census:  # once queued: a failed fan-out is a census again at its retry
        record.taken(now, gone=present - {f"{i.account}/{i.region}" for i in planned})
    metrics.add_metric(name="SweepItemsQueued", unit=MetricUnit.Count, value=len(items))
    metrics.add_metric(name="SweepTargetsQueued", unit=MetricUnit.Count, value=len(targets))
    metrics.add_metric(name="SweepConcurrencyNeeded", unit=MetricUnit.Count, value=sizing.needed)
    summary = {
        "sweep": sweep,
        "items": len(items),
        "accounts": len({t.account for t in targets}),
        "targets": len(targets),
        "census": is_census,
        "concurrency": sizing.concurrency,
        "needed": sizing.needed,
        "estimated_seconds": sizing.finish_seconds,
    }
    if not sizing.fits:
        logger.warning(
            "sweep cannot finish within its interval at the concurrency cap: raise SweepConcurrencyCap",
            extra=summary | {"cap": settings.sweep_concurrency, "interval_seconds": interval.total_seconds()},
        )
    logger.info("sweep fanned out", extra=summary | {"event_id": event.id})
    return summary


Sweep = Callable[[SweepItem, datetime], Report]


class UnreadableWorkItem(ValueError):
    """A record of a sweep's work queue that is no work item: logged, counted, and left to the queue."""


# Called with each item's report once it is swept: the local stack's replay shows the findings this way (a
# work item's invocation returns only its batch response). Empty in a deployed function.
item_observers: list[Callable[[SweepItem, Report], None]] = []


Probe = Callable[[str], bool]


@tracer.capture_method
def sweep_item(
    item: SweepItem,
    runtime: Runtime,
    now: datetime,
    sweep: Sweep,
    *,
    probe: Probe | None = None,
    census: Census | None = None,
    known: bool | None = None,
) -> Report:
    """One account and region, in that account. With ``probe`` (a census), swept only when the probe finds
    something there; the census is told when the answer differs from ``known``. A refusal retrying cannot cure
    is reported by name."""
    with clients.acting_in(item.account):
        try:
            if probe is not None:
                found = probe(item.region)
                if census is not None and found != known:
                    census.note(f"{item.account}/{item.region}", found)
                if not found:
                    return Report()
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
    probe: Probe | None = None,
) -> dict[str, Any]:
    """An SQS batch of work items: each succeeds or fails alone (partial batch response). A census item's
    targets are probed first (``probe``), and what is found kept in the census."""
    # powertools' batch utility, loaded by the work items' path only (a sweep's schedule never needs it).
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

    # A failed item goes back alone (batchItemFailures), also when it is the whole batch: no error to log twice.
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)

    def one(record: SQSRecord) -> dict[str, Any]:
        try:
            work = read_work(record.body)
        except (ValueError, ValidationError) as error:
            # Logged with its message id and counted, then returned to the queue: after its retries it is kept
            # in the sweep's dead-letter queue (an ops alarm), like any record a queue consumer cannot read.
            logger.error(
                "unreadable work item",
                extra={"message_id": record.message_id, "function": function, "problem": str(error)[:500]},
            )
            metrics.add_metric(name="UnreadableWorkItems", unit=MetricUnit.Count, value=1)
            raise UnreadableWorkItem(f"{function}: not a sweep work item") from None
        census_probe = probe if work.census else None
        table = runtime.settings.state_table
        census = Census(table, work.sweep) if census_probe is not None and table else None
        findings = 0
        for item, target in zip(work.items(), work.targets, strict=True):
            report = sweep_item(
                item, runtime, now(), sweep, probe=census_probe, census=census, known=target.present
            )
            findings += len(report.findings)
            logger.info(
                "sweep item done",
                extra={
                    "sweep": item.sweep,
                    "account": item.account,
                    "region": item.region,
                    "census": work.census,
                    "findings": len(report.findings),
                    "notices": len(report.notices),
                },
            )
            for observe in item_observers:
                observe(item, report)
        return {"findings": findings}

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
