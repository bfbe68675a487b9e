"""Capacity Blocks ending or unused, and future-dated reservation state changes. Pure; never remediable."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from costguard.model import CapacityReservation, Ec2Instance, Finding, Reason, Resource, ResourceKind
from costguard.pricing import Price

# Tags that tie an instance to the training job it runs, most specific first.
JOB_TAGS = ("sagemaker:training-job-name", "costguard:job", "aws:batch:job-id")
# EC2 starts terminating a block's instances 30 minutes before its end, 60 for UltraServer types.
TERMINATION_LEAD = timedelta(minutes=30)
ULTRASERVER_TERMINATION_LEAD = timedelta(minutes=60)
ULTRASERVER_TYPE_PREFIXES = ("p6e-gb200", "trn2u")
METRIC_PERIOD = timedelta(minutes=5)  # AWS/EC2CapacityReservations publishes every five minutes
PRICE_NOTE = (
    "a Capacity Block's price is set at purchase and no API costguard reads returns it: "
    "the on-demand price of the type stands in as an estimate"
)
NEVER_CANCELLED = "never cancelled: AWS does not allow cancelling a Capacity Block"

STATE_TEXT = {
    "scheduled": "is scheduled: it becomes active, and starts billing, on its start date",
    "active": (
        "is now active and billing; the hourly capacity sweep watches its utilization from its next run on"
    ),
    "delayed": "is delayed: AWS could not provide the capacity on the start date and keeps trying",
    "unsupported": "is unsupported: AWS cannot provide this request",
    "failed": "failed: AWS could not provide the capacity, and nothing is billed",
    "expired": "has expired: the capacity is released",
    "cancelled": "was cancelled: the capacity is released",
}


def termination_lead(instance_type: str | None) -> timedelta:
    if instance_type and instance_type.startswith(ULTRASERVER_TYPE_PREFIXES):
        return ULTRASERVER_TERMINATION_LEAD
    return TERMINATION_LEAD


def jobs_on(instances: Sequence[Ec2Instance]) -> list[str]:
    """The jobs the instances' tags name, each once, in instance order."""
    jobs: list[str] = []
    for instance in instances:
        job = next((instance.tags[k] for k in JOB_TAGS if instance.tags.get(k)), None)
        if job and job not in jobs:
            jobs.append(job)
    return jobs


def reservation_resource(
    reservation_id: str, reservation: CapacityReservation | None, *, account: str, region: str
) -> Resource:
    return Resource(
        kind=ResourceKind.CAPACITY_RESERVATION,
        id=reservation_id,
        account=reservation.account if reservation else account,
        region=region,
        arn=reservation.arn if reservation else None,
        instance_type=reservation.instance_type if reservation else None,
        instance_count=reservation.total if reservation else 1,
        tags=reservation.tags if reservation else {},
    )


def _hourly(reservation: CapacityReservation | None, price: Price | None) -> float | None:
    return round(reservation.total * price.usd_per_hour, 4) if reservation and price else None


def _describe(instance: Ec2Instance) -> str:
    return f"{instance.id} ({instance.name})" if instance.name else instance.id


def expiring_finding(
    reservation_id: str,
    reservation: CapacityReservation | None,
    instances: Sequence[Ec2Instance],
    *,
    end: datetime | None,
    account: str,
    region: str,
    price: Price | None,
    now: datetime,
    event_id: str | None,
) -> Finding:
    """``capacity_block_expiring``: the Expiration Warning (40 minutes ahead), naming what runs in the block."""
    end = end or (reservation.end if reservation else None)
    lead = termination_lead(reservation.instance_type if reservation else None)
    terminate_at = end - lead if end else None
    jobs = jobs_on(instances)
    if terminate_at:
        minutes = int((terminate_at - now).total_seconds() // 60)
        left = f"{minutes} minutes from now" if minutes > 0 else "already under way"
        when = (
            f"ends at {end:%H:%M} UTC; EC2 starts terminating its instances at {terminate_at:%H:%M} UTC "
            f"({int(lead.total_seconds() // 60)} minutes before the end, {left})"
        )
    else:
        when = f"ends soon; EC2 starts terminating its instances {int(lead.total_seconds() // 60)} minutes before"
    if instances:
        running = ", ".join(_describe(i) for i in instances)
        work = f" Checkpoint now: {len(instances)} instance(s) still run in it: {running}"
        work += f"; jobs: {', '.join(jobs)}." if jobs else "."
    else:
        work = " No instance runs in it any more: nothing to save."
    return Finding(
        reason=Reason.CAPACITY_BLOCK_EXPIRING,
        resource=reservation_resource(reservation_id, reservation, account=account, region=region),
        summary=f"Capacity Block {reservation_id} {when}.{work}",
        observed_at=now,
        evidence={
            "end": end.isoformat() if end else None,
            "terminating_from": terminate_at.isoformat() if terminate_at else None,
            "instances": [_describe(i) for i in instances],
            "jobs": jobs,
            "price_note": PRICE_NOTE if price else None,
            "cancel": NEVER_CANCELLED,
        },
        hourly_usd=_hourly(reservation, price),
        event_id=event_id,
    )


def unused_finding(
    reservation: CapacityReservation,
    instances: Sequence[Ec2Instance],
    used: Sequence[tuple[datetime, float]],
    *,
    idle: timedelta,
    price: Price | None,
    now: datetime,
    event_id: str | None,
) -> Finding | None:
    """``capacity_block_unused``: an active block with no instance now, none counted by UsedInstanceCount since,
    for at least ``idle``. Idle since the later of its start and the last datapoint that counted an instance;
    with neither known, nothing is said."""
    if not reservation.is_capacity_block or instances:
        return None
    if reservation.end is not None and reservation.end <= now:
        return None
    busy = [at for at, value in used if value > 0]
    marks = [t for t in (reservation.start, busy[-1] + METRIC_PERIOD if busy else None) if t is not None]
    if not marks and used:
        marks = [used[0][0]]  # all zero as far back as the data goes
    if not marks:
        return None
    idle_since = max(marks)
    if now - idle_since < idle:
        return None
    idle_hours = (now - idle_since).total_seconds() / 3600
    hourly = _hourly(reservation, price)
    spent = round(idle_hours * hourly, 2) if hourly is not None else None
    per_hour = "an unknown amount" if hourly is None else f"${hourly:,.2f}"
    ends = f" It ends at {reservation.end:%Y-%m-%d %H:%M} UTC." if reservation.end else ""
    return Finding(
        reason=Reason.CAPACITY_BLOCK_UNUSED,
        resource=reservation_resource(
            reservation.id, reservation, account=reservation.account, region=reservation.region
        ),
        summary=(
            f"Capacity Block {reservation.id} ({reservation.instance_type} x {reservation.total}) has had no "
            f"instance running in it since {idle_since:%H:%M} UTC ({int(idle_hours * 60)} minutes): each idle "
            f"hour costs about {per_hour} (estimated at the on-demand price).{ends}"
        ),
        observed_at=now,
        evidence={
            "idle_since": idle_since.isoformat(),
            "idle_minutes": int(idle_hours * 60),
            "usd_per_idle_hour": hourly,
            "usd_idle_so_far": spent,
            "end": reservation.end.isoformat() if reservation.end else None,
            "price_note": PRICE_NOTE if price else None,
            "cancel": NEVER_CANCELLED,
        },
        hourly_usd=hourly,
        cost_usd=spent,
        event_id=event_id,
    )


def state_finding(
    state: str,
    reservation_id: str,
    reservation: CapacityReservation | None,
    *,
    account: str,
    region: str,
    price: Price | None,
    observed_at: datetime,
    event_id: str | None,
) -> Finding:
    """``capacity_reservation_state``: what a future-dated reservation's new state means. Informational."""
    what = f"{reservation.instance_type} x {reservation.total}" if reservation else "type and count unknown"
    hourly = _hourly(reservation, price)
    money = f" It costs ${hourly:,.2f} an hour (on-demand price) while active." if hourly else ""
    start = f" Start: {reservation.start:%Y-%m-%d %H:%M} UTC." if reservation and reservation.start else ""
    return Finding(
        reason=Reason.CAPACITY_RESERVATION_STATE,
        resource=reservation_resource(reservation_id, reservation, account=account, region=region),
        summary=(
            f"Capacity reservation {reservation_id} ({what}) "
            f"{STATE_TEXT.get(state, f'is now {state}')}.{start}{money}"
        ),
        observed_at=observed_at,
        evidence={"state": state, "price_source": price.source if price else None},
        hourly_usd=hourly,
        repeat_scope=state,  # Scheduled then Active within the repeat window are two pieces of news
        event_id=event_id,
    )
