"""What a handler needs to act, built once per process from the settings."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from costguard.act.arming import PERMISSIONS as ARMING_PERMISSIONS
from costguard.act.arming import ArmingRecords, DynamoArmingRecords, Sighting, observe, scope_of
from costguard.act.aws import AwsRemediator
from costguard.act.executor import Remediator, StopLimiter
from costguard.act.ledger_book import WRITE_PERMISSIONS as LEDGER_PERMISSIONS
from costguard.act.limits import PERMISSIONS as STOP_CAP_PERMISSIONS
from costguard.act.limits import DynamoStopLimiter
from costguard.act.marks import PERMISSIONS as MARK_RECORD_PERMISSIONS
from costguard.aws.organization import PLACE_PERMISSIONS as ACCOUNT_PLACE_PERMISSIONS
from costguard.aws.organization import AccountLabels, OrganizationLabels
from costguard.aws.price_list import CACHE_PERMISSIONS as PRICE_CACHE_PERMISSIONS
from costguard.aws.price_list import PERMISSIONS as LIVE_PRICE_PERMISSIONS
from costguard.model import Finding, Reason, ResourceKind
from costguard.notify.dedupe import PERMISSIONS as REPEAT_GATE_PERMISSIONS
from costguard.notify.dedupe import DynamoRepeatGate, RepeatGate
from costguard.notify.mutes import PERMISSIONS as MUTE_PERMISSIONS
from costguard.notify.mutes import DynamoMutes, MuteReader
from costguard.notify.queue import PERMISSIONS as QUEUE_PERMISSIONS
from costguard.notify.queue import NoticeQueue, SqsNoticeQueue
from costguard.pipeline import Report, act_on
from costguard.policy import Policy, policy_from
from costguard.pricing import PriceBook, price_book
from costguard.reads import Reads
from costguard.settings import Settings, get_settings

if TYPE_CHECKING:
    from costguard.act.ledger_book import Ledger
    from costguard.act.marks import MarkRecords
    from costguard.act.shadow import ShadowMarks
    from costguard.aws.idle_history import IdleHistories
    from costguard.aws.read_plan import ReadPlans

# Runtime.act: notices queued, repeats gated, stops counted against the hourly cap. What the remediator calls
# depends on the kinds of resource a flow may remediate (act.aws.permissions_for).
# A flow whose findings are never remediable (nothing it tells is marked, stopped or armed by a tag) needs only
# REPORT_PERMISSIONS: the records of marks and arming tags are written only for what may be acted on.
REPORT_PERMISSIONS = (
    QUEUE_PERMISSIONS
    | REPEAT_GATE_PERMISSIONS
    | STOP_CAP_PERMISSIONS
    | MUTE_PERMISSIONS
    | ACCOUNT_PLACE_PERMISSIONS
)
ACT_PERMISSIONS = REPORT_PERMISSIONS | MARK_RECORD_PERMISSIONS | ARMING_PERMISSIONS | LEDGER_PERMISSIONS
# Runtime.prices: the Price List API for what the bundled table lacks (or first, when the source is live), its
# answers kept in the state table.
PRICES_PERMISSIONS = LIVE_PRICE_PERMISSIONS | PRICE_CACHE_PERMISSIONS


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    remediator: Remediator
    queue: NoticeQueue
    gate: RepeatGate
    prices: PriceBook
    limiter: StopLimiter | None = None
    mutes: MuteReader | None = None
    accounts: AccountLabels | None = None  # an organization deployment: accounts named in messages
    idle_histories: IdleHistories | None = None  # the adaptive idle policy's (COSTGUARD_IDLE_POLICY=adaptive)
    read_plans: ReadPlans | None = None  # the sweep's read schedule (COSTGUARD_READ_SCHEDULE): None reads all
    # The dry runs' marks (act/shadow.py): None when no decision can be one (remediate mode, every reason and
    # resource in it)
    shadow_marks: ShadowMarks | None = None
    # costguard's records of the live marks it wrote (act/marks.py): a mark tag without one is void
    mark_records: MarkRecords | None = None
    # costguard's records of the arming tags as first seen (act/arming.py): a tag added later only notifies
    arming: ArmingRecords | None = None
    # The savings ledger (act/ledger_book.py): each stop made, or in notify mode kept as a shadow stop
    ledger: Ledger | None = None
    # What the flows read (inventory, metrics, SageMaker, budgets): AWS, or in-memory twins in a unit test.
    reads: Reads = field(default_factory=Reads)

    @property
    def policy(self) -> Policy:
        return policy_from(self.settings)

    def dry_for(self, *reasons: Reason, field: str = "tags") -> Callable[[Any], bool] | None:
        """Which of the resources a flow reads (their tags in ``field``) it decides as dry runs for each of these
        reasons: those whose marks are kept in the state table (act/shadow.overlay). None: the same for all."""
        policy = self.policy
        if not policy.graded:
            return None
        return lambda item: all(policy.dry_run_as((reason,), getattr(item, field)) for reason in reasons)

    @property
    def repeat_window(self) -> timedelta:
        return timedelta(minutes=self.settings.dedupe_window_minutes)

    def observe(
        self, account: str, region: str, kind: ResourceKind, sightings: Iterable[Sighting], now: datetime
    ) -> None:
        """A sweep's census of every resource of a kind it listed: the arming tags of each, as first seen, kept
        (act/arming.py) before its findings are decided."""
        if self.arming is not None:
            observe(self.arming, scope_of(account, region, kind), sightings, now)

    def act(self, findings: list[Finding], now: datetime) -> Report:
        """The decide-then-act path with this process's policy, executor and notifier."""
        if self.accounts is not None:
            findings = self.accounts.label(findings)
        return act_on(
            findings,
            policy=self.policy,
            now=now,
            remediator=self.remediator,
            queue=self.queue,
            gate=self.gate,
            repeat_window=self.repeat_window,
            limiter=self.limiter,
            routing_tag_key=self.settings.routing_tag_key,
            group_above=self.settings.slack_group_above,
            mutes=self.mutes,
            source=os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME"),
            shadow=self.shadow_marks,
            records=self.mark_records,
            arming=self.arming,
            ledger=self.ledger,
        )


@lru_cache(maxsize=1)
def runtime() -> Runtime:
    settings = get_settings()
    return Runtime(
        settings=settings,
        remediator=AwsRemediator(),
        queue=SqsNoticeQueue(settings.decisions_queue_url, settings.urgent_queue_url),
        gate=DynamoRepeatGate(settings.state_table),
        prices=price_book(live=settings.price_source == "live"),
        limiter=DynamoStopLimiter(settings.state_table, settings.max_stops_per_hour),
        mutes=DynamoMutes(settings.state_table),
        accounts=OrganizationLabels() if settings.organization else None,
        idle_histories=_idle_histories(settings),
        read_plans=_read_plans(settings),
        shadow_marks=_shadow_marks(settings),
        mark_records=_mark_records(settings),
        arming=DynamoArmingRecords(settings.state_table) if settings.state_table else None,
        ledger=_ledger(settings),
    )


# The GPU sweep's stores: their modules are loaded when the runtime is built (the first event), not at import,
# and only when the settings ask for them.
def _idle_histories(settings: Settings) -> IdleHistories | None:
    if settings.idle_policy != "adaptive":
        return None
    from costguard.aws.idle_history import DynamoIdleHistories

    return DynamoIdleHistories(settings.state_table)


def _read_plans(settings: Settings) -> ReadPlans | None:
    if not (settings.reads_by_schedule and settings.state_table):
        return None
    from costguard.aws.read_plan import DynamoReadPlans

    return DynamoReadPlans(settings.state_table)


def _ledger(settings: Settings) -> Ledger | None:
    """The savings ledger, wherever a stop can be made or kept: every deployment with a state table."""
    if not settings.state_table:
        return None
    from costguard.act.ledger_book import DynamoLedger

    return DynamoLedger(
        settings.state_table,
        team_key=settings.routing_tag_key,
        retention_days=settings.ledger_retention_days,
    )


def _mark_records(settings: Settings) -> MarkRecords | None:
    """The records of the live marks, wherever a mark tag may be read: every deployment with a state table."""
    if not settings.state_table:
        return None
    from costguard.act.marks import DynamoMarkRecords

    return DynamoMarkRecords(settings.state_table)


def _shadow_marks(settings: Settings) -> ShadowMarks | None:
    """A dry run keeps its marks in the state table; a live one tags the resources. Kept wherever a decision can be
    a dry run: notify mode, or a reason in notify (ReasonModes), or a resource outside RemediateScope."""
    if not (policy_from(settings).may_dry_run and settings.state_table):
        return None
    from costguard.act.shadow import DynamoShadowMarks

    return DynamoShadowMarks(settings.state_table)
