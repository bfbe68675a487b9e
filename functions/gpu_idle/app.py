"""Entry point: a GPU-idle alarm entering ALARM, and the scheduled sweep over every GPU instance."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard import clock
from costguard.entry import ONCE_PERMISSIONS, PARSE_PERMISSIONS, OncePerEvent, Rejected, parse_event
from costguard.events.cloudwatch import AlarmNotification, AlarmStateChange
from costguard.events.scheduled import ScheduledEvent
from costguard.flows.gpu import VERDICT_PERMISSIONS, evaluate, handle_alarm, handle_sweep
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
    PARSE_PERMISSIONS | ONCE_PERMISSIONS | VERDICT_PERMISSIONS | FAN_OUT_PERMISSIONS | ASSUME_PERMISSIONS
)

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(
    check_settings(get_settings()), "state_table", "decisions_queue_url", "failed_events_queue_url"
)


def on_alarm(event: AlarmStateChange) -> dict[str, Any]:
    return handle_alarm(event, runtime(), clock.now()).summary()


on_alarm_once = OncePerEvent(on_alarm)


def sweep_one(item: SweepItem, now: datetime) -> Report:
    """An organization sweep's work item: one account and region."""
    return evaluate(item.region, runtime(), now, event_id=item.event_id)


@logger.inject_lambda_context(correlation_id_path=EVENT_ID_PATH, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if is_work_batch(event):
        return run_items(
            event, context, runtime=runtime(), now=clock.now, sweep=sweep_one, function="gpu_idle"
        )
    try:
        model = parse_event(event, (AlarmStateChange, AlarmNotification, ScheduledEvent), function="gpu_idle")
        if isinstance(model, AlarmNotification):  # an SNS alarm action: the same state change
            model = model.as_state_change()
    except Rejected as rejected:
        return rejected.result
    if isinstance(model, ScheduledEvent):
        if settings.organization:
            return fan_out("gpu", model, settings)
        return handle_sweep(runtime(), clock.now(), model.region, model.id).summary()
    return on_alarm_once(model, context)
