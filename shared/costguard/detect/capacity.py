"""Capacity reservations paid for but unused (AWS Health ODCR underutilization). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from costguard.model import CapacityReservation, Finding, Reason, Resource, ResourceKind
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
    money = "an unknown amount" if per_day is None else f"${per_day:,.2f} a day"
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
            "price_source": price.source if price else None,
            "reservation_type": reservation.reservation_type if reservation else None,
            "note": None if reservation else "reservation not found by DescribeCapacityReservations",
        },
        hourly_usd=round(total * price.usd_per_hour, 4) if total and price else None,
        event_id=event_id,
    )
