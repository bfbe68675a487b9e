"""Entry point: capacity reservations (capacity_reservation_idle, capacity_block_expiring, capacity_block_unused,
capacity_reservation_state): AWS Health notices, Capacity Block and reservation-state events, the hourly sweep,
which also judges Bedrock Provisioned Throughput (bedrock_throughput_idle)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from costguard import clock
from costguard.entry import ONCE_PERMISSIONS, PARSE_PERMISSIONS, OncePerEvent
from costguard.events.capacity import CapacityBlockEvent, ReservationStateChange
from costguard.events.health import OdcrUnderutilization
from costguard.events.scheduled import ScheduledEvent
from costguard.flows import bedrock
from costguard.flows.capacity import PERMISSIONS as CAPACITY_PERMISSIONS
from costguard.flows.capacity import (
    evaluate,
    handle_capacity_block,
    handle_odcr_underutilization,
    handle_reservation_state,
    handle_sweep,
)
from costguard.flows.org import (
    ASSUME_PERMISSIONS,
    FAN_OUT_PERMISSIONS,
    SWEEP_INTERVALS,
    SweepItem,
    check_settings,
)
from costguard.handler import OrgSweep, event_handler
from costguard.pipeline import Report
from costguard.runtime import runtime
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = (
    PARSE_PERMISSIONS
    | ONCE_PERMISSIONS
    | CAPACITY_PERMISSIONS
    | bedrock.PERMISSIONS
    | FAN_OUT_PERMISSIONS
    | ASSUME_PERMISSIONS
)

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(
    check_settings(get_settings()), "state_table", "decisions_queue_url", "failed_events_queue_url"
)


def process(event: OdcrUnderutilization) -> dict[str, Any]:
    return handle_odcr_underutilization(event, runtime(), clock.now()).summary()


def on_capacity_block(event: CapacityBlockEvent) -> dict[str, Any]:
    return handle_capacity_block(event, runtime(), clock.now()).summary()


def on_reservation_state(event: ReservationStateChange) -> dict[str, Any]:
    return handle_reservation_state(event, runtime(), clock.now()).summary()


def on_schedule(event: ScheduledEvent) -> dict[str, Any]:
    now = clock.now()
    report = handle_sweep(runtime(), now, event.region, event.account, event.id)
    report.extend(bedrock.handle_sweep(runtime(), now, event.region, event.account, event.id))
    return report.summary()


def sweep_one(item: SweepItem, now: datetime) -> Report:
    """An organization sweep's work item: one account and region."""
    report = evaluate(item.region, item.account, runtime(), now, item.event_id, None)
    report.extend(bedrock.evaluate(item.region, item.account, runtime(), now, item.event_id))
    return report


lambda_handler = event_handler(
    "capacity",
    {
        # A redelivered event must alert once.
        OdcrUnderutilization: OncePerEvent(process),
        CapacityBlockEvent: OncePerEvent(on_capacity_block),
        ReservationStateChange: OncePerEvent(on_reservation_state),
        ScheduledEvent: on_schedule,
    },
    # No probe: an hourly sweep, every account-region each time (its interval is the census's).
    sweep=OrgSweep("capacity", sweep_one, settings, interval=SWEEP_INTERVALS["capacity"]),
)
