"""Capacity reservations: AWS Health notices, the hourly sweep, Capacity Block events and future-dated state
changes, each read through the capacity adapter and decided on the one decide-then-act path."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from costguard.act.arming import Sighting
from costguard.act.aws import permissions_for
from costguard.act.shadow import key_of, overlay
from costguard.aws import capacity, metrics
from costguard.aws.capacity import CapacityReservations, capacity_reservations
from costguard.aws.metrics import MetricSet, Query, get_metric_data
from costguard.detect.capacity import UsageWindow, idle_reservation_finding, parse_entry, sweep_findings
from costguard.detect.capacity_blocks import METRIC_PERIOD, expiring_finding, state_finding, unused_finding
from costguard.events.capacity import CapacityBlockEvent, ReservationStateChange
from costguard.events.health import OdcrUnderutilization
from costguard.model import CapacityReservation, Finding, Reason, ResourceKind
from costguard.observability import tracer
from costguard.pipeline import Report
from costguard.runtime import ACT_PERMISSIONS, PRICES_PERMISSIONS, Runtime

# Every handler here: reservations and what runs in them, their utilization, and marks and cancels.
PERMISSIONS = (
    capacity.READ_PERMISSIONS
    | metrics.READ_PERMISSIONS
    | ACT_PERMISSIONS
    | PRICES_PERMISSIONS
    | permissions_for(ResourceKind.CAPACITY_RESERVATION)
)

NAMESPACE = "AWS/EC2CapacityReservations"
DIMENSION = "CapacityReservationId"
HOUR = timedelta(hours=1)
# How far back a block's UsedInstanceCount is read to find when an instance last ran in it.
BLOCK_LOOKBACK = timedelta(hours=24)


@tracer.capture_method
def handle_odcr_underutilization(
    event: OdcrUnderutilization,
    runtime: Runtime,
    now: datetime,
    reservations: CapacityReservations | None = None,
) -> Report:
    entries = list({e.reservation_id: e for e in map(parse_entry, event.entries)}.values())
    described = (reservations or capacity_reservations()).describe(
        event.region, event.account, [e.reservation_id for e in entries]
    )
    by_id = {r.id: r for r in described}
    findings = []
    for entry in entries:
        reservation = by_id.get(entry.reservation_id)
        instance_type = reservation.instance_type if reservation else entry.instance_type
        findings.append(
            idle_reservation_finding(
                entry,
                reservation,
                account=event.account,
                region=event.region,
                price=runtime.prices.hourly(instance_type, event.region),
                observed_at=event.time,
                event_id=event.id,
            )
        )
    return runtime.act(findings, now)


# -- the hourly sweep ------------------------------------------------------------------------------------


def window_of(runtime: Runtime) -> UsageWindow:
    s = runtime.settings
    return UsageWindow(hours=s.capacity_window_hours, threshold_percent=s.capacity_idle_threshold_percent)


def read_utilization(
    region: str, odcrs: Sequence[CapacityReservation], window: UsageWindow, now: datetime
) -> MetricSet:
    """Hourly mean and peak InstanceUtilization of every ODCR over whole clock hours: two queries per
    reservation, 500 to a GetMetricData call. Whole hours make "every hour of the window" countable."""
    if not odcrs:
        return MetricSet()
    end = now.replace(minute=0, second=0, microsecond=0)
    queries = [
        Query((r.id, measure, ""), NAMESPACE, "InstanceUtilization", ((DIMENSION, r.id),), stat=stat)
        for r in odcrs
        for measure, stat in (("mean", "Average"), ("peak", "Maximum"))
    ]
    return get_metric_data(region, queries, end - window.hours * HOUR, end, int(HOUR.total_seconds()))


def read_block_usage(region: str, blocks: Sequence[CapacityReservation], now: datetime) -> MetricSet:
    """UsedInstanceCount (Maximum per five minutes) of each block over the last day, one batched read."""
    if not blocks:
        return MetricSet()
    queries = [
        Query((b.id, "used", ""), NAMESPACE, "UsedInstanceCount", ((DIMENSION, b.id),), stat="Maximum")
        for b in blocks
    ]
    return get_metric_data(region, queries, now - BLOCK_LOOKBACK, now, int(METRIC_PERIOD.total_seconds()))


def block_findings(
    region: str,
    account: str,
    blocks: Sequence[CapacityReservation],
    runtime: Runtime,
    reservations: CapacityReservations,
    now: datetime,
    event_id: str | None,
) -> list[Finding]:
    if not blocks:
        return []
    running = reservations.instances_in(region, account, [b.id for b in blocks])
    usage = read_block_usage(region, blocks, now)
    idle = timedelta(minutes=runtime.settings.capacity_block_idle_minutes)
    found = [
        unused_finding(
            block,
            running.get(block.id, []),
            usage.measure(block.id, "used"),
            idle=idle,
            price=runtime.prices.hourly(block.instance_type, region),
            now=now,
            event_id=event_id,
        )
        for block in blocks
    ]
    return [f for f in found if f is not None]


@tracer.capture_method
def evaluate(
    region: str,
    account: str,
    runtime: Runtime,
    now: datetime,
    event_id: str | None,
    reservations: CapacityReservations | None = None,
) -> Report:
    """Every active reservation of the region: ODCRs by utilization, Capacity Blocks by what runs in them."""
    reservations = reservations or capacity_reservations()
    active = reservations.active(region, account)
    # In notify mode, the marks it keeps in the state table, as a live run reads its tags (act/shadow.py): an
    # ODCR in use again has its mark cancelled in both modes. Capacity Blocks are never marked.
    odcrs = overlay(
        [r for r in active if not r.is_capacity_block],
        runtime.shadow_marks,
        now,
        lambda r: key_of(r.account, r.region, ResourceKind.CAPACITY_RESERVATION, r.id),
        dry=runtime.dry_for(Reason.CAPACITY_RESERVATION_IDLE),
    )
    blocks = [r for r in active if r.is_capacity_block]
    runtime.observe(
        account,
        region,
        ResourceKind.CAPACITY_RESERVATION,
        [
            Sighting(key_of(r.account, r.region, ResourceKind.CAPACITY_RESERVATION, r.id), r.created, r.tags)
            for r in odcrs
        ],
        now,
    )
    window = window_of(runtime)
    data = read_utilization(region, odcrs, window, now)
    findings: list[Finding] = []
    for odcr in odcrs:
        findings += sweep_findings(
            odcr,
            data.measure(odcr.id, "mean"),
            data.measure(odcr.id, "peak"),
            window=window,
            price=runtime.prices.hourly(odcr.instance_type, region),
            now=now,
            event_id=event_id,
        )
    findings += block_findings(region, account, blocks, runtime, reservations, now, event_id)
    return runtime.act(findings, now)


@tracer.capture_method
def handle_sweep(
    runtime: Runtime,
    now: datetime,
    default_region: str,
    account: str,
    event_id: str | None,
    reservations: CapacityReservations | None = None,
) -> Report:
    combined = Report()
    for region in runtime.settings.regions or (default_region,):
        combined.extend(evaluate(region, account, runtime, now, event_id, reservations))
    return combined


# -- Capacity Block events and future-dated state changes ------------------------------------------------


@tracer.capture_method
def handle_capacity_block(
    event: CapacityBlockEvent,
    runtime: Runtime,
    now: datetime,
    reservations: CapacityReservations | None = None,
) -> Report:
    """Expiration Warning: what runs in the block, so it checkpoints now. Delivered: whether it sits unused
    (a block just delivered usually is not yet past the idle window: the hourly sweep looks again)."""
    reservations = reservations or capacity_reservations()
    region, account, cr = event.region, event.account, event.reservation_id
    found = reservations.describe(region, account, [cr])
    reservation = found[0] if found else None
    instances = reservations.instances_in(region, account, [cr]).get(cr, [])
    price = runtime.prices.hourly(reservation.instance_type, region) if reservation else None
    findings: list[Finding] = []
    if event.is_expiration_warning:
        findings.append(
            expiring_finding(
                cr,
                reservation,
                instances,
                end=event.end,
                account=account,
                region=region,
                price=price,
                now=now,
                event_id=event.id,
            )
        )
    elif reservation is not None:
        unused = unused_finding(
            reservation,
            instances,
            read_block_usage(region, [reservation], now).measure(cr, "used"),
            idle=timedelta(minutes=runtime.settings.capacity_block_idle_minutes),
            price=price,
            now=now,
            event_id=event.id,
        )
        findings += [unused] if unused else []
    return runtime.act(findings, now)


@tracer.capture_method
def handle_reservation_state(
    event: ReservationStateChange,
    runtime: Runtime,
    now: datetime,
    reservations: CapacityReservations | None = None,
) -> Report:
    """An informational message for the states the user asked for (CapacityStateNotices). A reservation that
    became active needs no action here: the hourly sweep lists active reservations and judges it from then on."""
    if event.state not in runtime.settings.capacity_state_notices:
        return Report()
    reservations = reservations or capacity_reservations()
    found = reservations.describe(event.region, event.account, [event.reservation_id])
    reservation = found[0] if found else None
    price = runtime.prices.hourly(reservation.instance_type, event.region) if reservation else None
    finding = state_finding(
        event.state,
        event.reservation_id,
        reservation,
        account=event.account,
        region=event.region,
        price=price,
        observed_at=event.time,
        event_id=event.id,
    )
    return runtime.act([finding], now)
