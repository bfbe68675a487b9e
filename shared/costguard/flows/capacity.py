"""Capacity reservations: AWS Health ODCR underutilization events, one finding per reservation."""

from __future__ import annotations

from datetime import datetime

from costguard.aws.capacity import CapacityReservations, capacity_reservations
from costguard.detect.capacity import idle_reservation_finding, parse_entry
from costguard.events.health import OdcrUnderutilization
from costguard.pipeline import Report
from costguard.runtime import Runtime


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
