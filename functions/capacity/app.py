"""Entry point: capacity reservations (capacity_reservation_idle, capacity_block_expiring, capacity_block_unused,
capacity_reservation_state): AWS Health notices, Capacity Block and reservation-state events, the hourly sweep."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard import clock
from costguard.entry import ONCE_PERMISSIONS, PARSE_PERMISSIONS, OncePerEvent, Rejected, parse_event
from costguard.events.capacity import CapacityBlockEvent, ReservationStateChange
from costguard.events.health import OdcrUnderutilization
from costguard.events.scheduled import ScheduledEvent
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
    SweepItem,
    check_settings,
    fan_out,
    is_work_batch,
    run_items,
)
from costguard.observability import EVENT_ID_PATH, logger, metrics, tracer
from costguard.pipeline import Report
from costguard.runtime import runtime
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = (
    PARSE_PERMISSIONS | ONCE_PERMISSIONS | CAPACITY_PERMISSIONS | FAN_OUT_PERMISSIONS | ASSUME_PERMISSIONS
)

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(
    check_settings(get_settings()), "state_table", "decisions_queue_url", "failed_events_queue_url"
)

ACCEPTED = (OdcrUnderutilization, CapacityBlockEvent, ReservationStateChange, ScheduledEvent)


def process(event: OdcrUnderutilization) -> dict[str, Any]:
    return handle_odcr_underutilization(event, runtime(), clock.now()).summary()


def on_capacity_block(event: CapacityBlockEvent) -> dict[str, Any]:
    return handle_capacity_block(event, runtime(), clock.now()).summary()


def on_reservation_state(event: ReservationStateChange) -> dict[str, Any]:
    return handle_reservation_state(event, runtime(), clock.now()).summary()


# A redelivered event must alert once.
process_once = OncePerEvent(process)
on_capacity_block_once = OncePerEvent(on_capacity_block)
on_reservation_state_once = OncePerEvent(on_reservation_state)


def sweep_one(item: SweepItem, now: datetime) -> Report:
    """An organization sweep's work item: one account and region."""
    return evaluate(item.region, item.account, runtime(), now, item.event_id, None)


@logger.inject_lambda_context(correlation_id_path=EVENT_ID_PATH, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if is_work_batch(event):
        return run_items(
            event, context, runtime=runtime(), now=clock.now, sweep=sweep_one, function="capacity"
        )
    try:
        model = parse_event(event, ACCEPTED, function="capacity")
    except Rejected as rejected:
        return rejected.result
    if isinstance(model, ScheduledEvent):
        if settings.organization:
            return fan_out("capacity", model, settings)
        return handle_sweep(runtime(), clock.now(), model.region, model.account, model.id).summary()
    if isinstance(model, CapacityBlockEvent):
        return on_capacity_block_once(model, context)
    if isinstance(model, ReservationStateChange):
        return on_reservation_state_once(model, context)
    assert isinstance(model, OdcrUnderutilization)
    return process_once(model, context)
