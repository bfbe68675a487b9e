"""capacity_reservation_idle: Health entries parsed, and the dollars a day of unused reserved instances."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from costguard.detect.capacity import idle_reservation_finding, parse_entry, unused_usd_per_day
from costguard.model import CapacityReservation, Reason, ResourceKind
from costguard.pricing import Price, bundled_table

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
P4D = float(bundled_table()["ec2"]["p4d.24xlarge"])


def reservation(total: int = 2, available: int = 2) -> CapacityReservation:
    return CapacityReservation(
        id="cr-0123",
        account="123456789012",
        region="us-east-1",
        instance_type="p4d.24xlarge",
        total=total,
        available=available,
        tags={"team": "ml"},
    )


def test_pipe_delimited_entry_is_parsed() -> None:
    entry = parse_entry("cr-0123 | us-east-1a | p4d.24xlarge | Linux/UNIX | 12.5%")
    assert (entry.reservation_id, entry.availability_zone, entry.instance_type, entry.platform) == (
        "cr-0123",
        "us-east-1a",
        "p4d.24xlarge",
        "Linux/UNIX",
    )
    assert entry.utilization_percent == 12.5


def test_bare_id_has_no_utilization() -> None:
    entry = parse_entry("cr-0123")
    assert entry.reservation_id == "cr-0123"
    assert entry.utilization_percent is None


def test_unused_dollars_per_day() -> None:
    assert unused_usd_per_day(25.0, 4, Price(10.0, "t")) == pytest.approx(0.75 * 4 * 10 * 24)
    assert unused_usd_per_day(25.0, 4, None) is None


def test_finding_uses_the_event_utilization_over_the_current_one() -> None:
    finding = idle_reservation_finding(
        parse_entry("cr-0123 | us-east-1a | p4d.24xlarge | Linux/UNIX | 50%"),
        reservation(available=0),
        account="123456789012",
        region="us-east-1",
        price=Price(P4D, "t"),
        observed_at=NOW,
        event_id="e",
    )
    assert finding.reason is Reason.CAPACITY_RESERVATION_IDLE
    assert finding.resource.kind is ResourceKind.CAPACITY_RESERVATION
    assert (finding.resource.instance_type, finding.resource.instance_count) == ("p4d.24xlarge", 2)
    assert finding.evidence["usd_per_day_unused"] == pytest.approx(round(0.5 * 2 * P4D * 24, 2))
    assert not finding.remediable


def test_bare_id_takes_utilization_from_the_reservation() -> None:
    finding = idle_reservation_finding(
        parse_entry("cr-0123"),
        reservation(total=4, available=3),
        account="123456789012",
        region="us-east-1",
        price=Price(P4D, "t"),
        observed_at=NOW,
        event_id="e",
    )
    assert finding.evidence["utilization_percent"] == 25.0
    assert finding.evidence["usd_per_day_unused"] == pytest.approx(round(0.75 * 4 * P4D * 24, 2))


def test_unknown_reservation_costs_unknown_not_zero() -> None:
    finding = idle_reservation_finding(
        parse_entry("cr-0123 | us-east-1a | p4d.24xlarge | Linux/UNIX | 0%"),
        None,
        account="123456789012",
        region="us-east-1",
        price=Price(P4D, "t"),
        observed_at=NOW,
        event_id="e",
    )
    assert finding.evidence["usd_per_day_unused"] is None
    assert finding.hourly_usd is None
    # What is known is still said: the price of each unused instance-hour of the type.
    assert finding.evidence["usd_per_unused_instance_hour"] == P4D
    assert f"each unused p4d.24xlarge instance-hour costs ${P4D:,.2f}" in finding.summary
    assert "instance count is unknown" in finding.summary
