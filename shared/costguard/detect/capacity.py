"""Capacity reservations paid for but unused: AWS Health ODCR underutilization, and the hourly sweep's
utilization verdict (which alone may allow a cancel). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from costguard.model import MARK_TAG_KEY, CapacityReservation, Finding, Reason, Resource, ResourceKind
from costguard.pricing import Price


@dataclass(frozen=True)
class HealthEntry:
    """One affected reservation of a Health event: "cr-id | AZ | type | platform | util%" or a bare id."""

    reservation_id: str
    availability_zone: str | None = None
    instance_type: str | None = None
    platform: str | None = None
    utilization_percent: float | None = None


def parse_entry(text: str) -> HealthEntry:
    parts = [p.strip() for p in text.split("|")]
    reservation_id = parts[0].rsplit("/", 1)[-1]  # an ARN names the reservation last
    if len(parts) < 5:
        return HealthEntry(reservation_id)
    try:
        utilization: float | None = float(parts[4].rstrip("%").strip())
    except ValueError:
        utilization = None
    return HealthEntry(reservation_id, parts[1] or None, parts[2] or None, parts[3] or None, utilization)


def utilization_of(entry: HealthEntry, reservation: CapacityReservation | None) -> float | None:
    """The event's figure when it has one, else the share of the reservation in use now."""
    if entry.utilization_percent is not None:
        return entry.utilization_percent
    if reservation and reservation.total:
        return 100.0 * (reservation.total - reservation.available) / reservation.total
    return None


def unused_usd_per_day(utilization_percent: float, total: int, price: Price | None) -> float | None:
    """(1 - utilization) x total x on-demand price x 24."""
    if price is None:
        return None
    return round((1 - utilization_percent / 100.0) * total * price.usd_per_hour * 24, 2)


def idle_reservation_finding(
    entry: HealthEntry,
    reservation: CapacityReservation | None,
    *,
    account: str,
    region: str,
    price: Price | None,
    observed_at: datetime,
    event_id: str | None,
) -> Finding:
    instance_type = (reservation.instance_type if reservation else None) or entry.instance_type
    total = reservation.total if reservation else None
    utilization = utilization_of(entry, reservation)
    per_day = unused_usd_per_day(utilization, total, price) if utilization is not None and total else None
    resource = Resource(
        kind=ResourceKind.CAPACITY_RESERVATION,
        id=entry.reservation_id,
        account=account,
        region=region,
        arn=reservation.arn if reservation else None,
        instance_type=instance_type,
        instance_count=total or 1,
        tags=reservation.tags if reservation else {},
    )
    util_text = "unknown" if utilization is None else f"{utilization:g}%"
    money = f"${per_day:,.2f} a day" if per_day is not None else "an unknown amount"
    if per_day is None and price is not None:
        # What is known: what each unused instance-hour of the type costs, whatever the count.
        unknown = "instance count" if not total else "utilization"
        money += (
            f" (the {unknown} is unknown; each unused {instance_type} instance-hour costs "
            f"${price.usd_per_hour:,.2f}, ${price.usd_per_hour * 24:,.2f} a day)"
        )
    return Finding(
        reason=Reason.CAPACITY_RESERVATION_IDLE,
        resource=resource,
        summary=(
            f"Capacity reservation {entry.reservation_id} ({instance_type or 'unknown type'} x "
            f"{total if total else 'unknown'}) is {util_text} used: {money} paid for unused instances."
        ),
        observed_at=observed_at,
        evidence={
            "utilization_percent": utilization,
            "availability_zone": entry.availability_zone
            or (reservation.availability_zone if reservation else None),
            "platform": entry.platform,
            "usd_per_day_unused": per_day,
            "usd_per_unused_instance_hour": price.usd_per_hour if price else None,
            "price_source": price.source if price else None,
            "reservation_type": reservation.reservation_type if reservation else None,
            "note": None if reservation else "reservation not found by DescribeCapacityReservations",
        },
        hourly_usd=round(total * price.usd_per_hour, 4) if total and price else None,
        event_id=event_id,
    )


# The owner's opt-in: without it an idle reservation is only reported, whatever the mode.
AUTO_CANCEL_TAG = "costguard:auto-cancel"


@dataclass(frozen=True)
class UsageWindow:
    """The sweep's rule: under ``threshold_percent`` on average over the last ``hours`` is idle."""

    hours: int
    threshold_percent: float


def opted_in(tags: dict[str, str]) -> bool:
    # Exactly what the IAM condition accepts (StringEqualsIgnoreCase "true"): a cancel IAM refuses is no cancel.
    return tags.get(AUTO_CANCEL_TAG, "").lower() == "true"


def sweep_findings(
    reservation: CapacityReservation,
    hourly_mean: Sequence[tuple[datetime, float]],
    hourly_peak: Sequence[tuple[datetime, float]],
    *,
    window: UsageWindow,
    price: Price | None,
    now: datetime,
    event_id: str | None,
) -> list[Finding]:
    """``capacity_reservation_idle`` for an ODCR whose InstanceUtilization averaged under the threshold over the
    window (one datapoint per hour), with the dollars wasted so far and per day ahead. It may be cancelled only
    when its owner opted in and every hour of the whole window was under the threshold; a marked reservation
    that is in use again has its mark removed. No data, or a Capacity Block, gives nothing here."""
    if reservation.is_capacity_block or not hourly_mean:
        return []
    threshold = window.threshold_percent
    mean = sum(v for _, v in hourly_mean) / len(hourly_mean)
    resource = _reservation_resource(reservation)
    hourly = round(reservation.total * price.usd_per_hour, 4) if price else None
    if mean >= threshold:
        if MARK_TAG_KEY not in reservation.tags:
            return []
        return [_in_use_again(resource, mean, len(hourly_mean), threshold, hourly, now, event_id)]
    peak = max(v for _, v in (hourly_peak or hourly_mean))
    covered = len({at for at, _ in hourly_mean})
    wasted = (
        round(sum((1 - v / 100.0) * reservation.total * price.usd_per_hour for _, v in hourly_mean), 2)
        if price
        else None
    )
    per_day = unused_usd_per_day(mean, reservation.total, price)
    return [
        Finding(
            reason=Reason.CAPACITY_RESERVATION_IDLE,
            resource=resource.model_copy(update={"stop_blocker": _cancel_blocker(covered, peak, window)}),
            summary=_idle_summary(reservation, mean, covered, threshold, wasted, per_day),
            observed_at=now,
            evidence={
                "utilization_percent": round(mean, 1),
                "peak_hour_percent": round(peak, 1),
                "hours_with_data": covered,
                "window_hours": window.hours,
                "usd_unused_in_window": wasted,
                "usd_per_day_unused": per_day,
                "availability_zone": reservation.availability_zone,
                "auto_cancel": _auto_cancel_text(reservation.tags),
                "price_source": price.source if price else None,
            },
            hourly_usd=hourly,
            cost_usd=wasted,
            remediable=opted_in(reservation.tags),
            armed_by={AUTO_CANCEL_TAG: reservation.tags[AUTO_CANCEL_TAG]}
            if opted_in(reservation.tags)
            else {},
            event_id=event_id,
        )
    ]


def _reservation_resource(reservation: CapacityReservation) -> Resource:
    """The reservation as a finding's resource."""
    return Resource(
        kind=ResourceKind.CAPACITY_RESERVATION,
        id=reservation.id,
        account=reservation.account,
        region=reservation.region,
        arn=reservation.arn,
        instance_type=reservation.instance_type,
        instance_count=reservation.total,
        tags=reservation.tags,
    )


def _in_use_again(
    resource: Resource,
    mean: float,
    hours: int,
    threshold: float,
    hourly: float | None,
    now: datetime,
    event_id: str | None,
) -> Finding:
    """A marked reservation used again (on average over ``hours``): its pending cancel is off."""
    return Finding(
        reason=Reason.GPU_ACTIVE_AGAIN,
        resource=resource,
        summary=(
            f"Capacity reservation {resource.id} is in use again ({mean:.1f}% on average over the "
            f"last {hours} h): its pending cancel is off."
        ),
        observed_at=now,
        evidence={"utilization_percent": round(mean, 1), "threshold_percent": threshold},
        hourly_usd=hourly,
        cancels_mark=True,
        event_id=event_id,
    )


def _cancel_blocker(covered: int, peak: float, window: UsageWindow) -> str | None:
    """Why an idle reservation may not be cancelled yet: data missing for part of the window, or an hour at or
    over the threshold. None: nothing stands in the way (the opt-in tag aside)."""
    threshold = window.threshold_percent
    if covered < window.hours:
        return (
            f"utilization data covers {covered} of the last {window.hours} hours; a reservation is cancelled "
            "only after a whole window under the threshold"
        )
    if peak >= threshold:
        return (
            f"its busiest hour reached {peak:g}% (threshold {threshold:g}%); a reservation is cancelled only "
            "when every hour of the window stays under it"
        )
    return None


def _idle_summary(
    reservation: CapacityReservation,
    mean: float,
    covered: int,
    threshold: float,
    wasted: float | None,
    per_day: float | None,
) -> str:
    """The idle finding's summary: how empty it was, what that cost so far and costs a day from now on."""
    so_far = "an unknown amount" if wasted is None else f"${wasted:,.2f}"
    ahead = "an unknown amount" if per_day is None else f"${per_day:,.2f} a day"
    return (
        f"Capacity reservation {reservation.id} ({reservation.instance_type} x {reservation.total}) "
        f"averaged {mean:.1f}% used over the last {covered} h (threshold {threshold:g}%): {so_far} paid "
        f"for unused instances in that time, and {ahead} from now on while it stays this empty."
    )


def _auto_cancel_text(tags: dict[str, str]) -> str:
    """Whether the owner opted in to cancelling, as the evidence says it."""
    if opted_in(tags):
        return f"opted in ({AUTO_CANCEL_TAG}=true): cancelled in remediate mode after the grace period"
    return f"not opted in: tag it {AUTO_CANCEL_TAG}=true to let costguard cancel it in remediate mode"
