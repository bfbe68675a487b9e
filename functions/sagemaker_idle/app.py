"""Entry point: the scheduled sweep over SageMaker training jobs, notebook instances and endpoints."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard import clock
from costguard.entry import PARSE_PERMISSIONS, Rejected, parse_event
from costguard.events.scheduled import ScheduledEvent
from costguard.flows.org import (
    ASSUME_PERMISSIONS,
    FAN_OUT_PERMISSIONS,
    SweepItem,
    check_settings,
    fan_out,
    is_work_batch,
    run_items,
)
from costguard.flows.sagemaker import SWEEP_PERMISSIONS, evaluate, handle_sweep
from costguard.observability import EVENT_ID_PATH, logger, metrics, tracer
from costguard.pipeline import Report
from costguard.runtime import runtime
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = PARSE_PERMISSIONS | SWEEP_PERMISSIONS | FAN_OUT_PERMISSIONS | ASSUME_PERMISSIONS

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(
    check_settings(get_settings()), "state_table", "decisions_queue_url", "failed_events_queue_url"
)


def sweep_one(item: SweepItem, now: datetime) -> Report:
    """An organization sweep's work item: one account and region."""
    return evaluate(item.region, runtime(), now, item.event_id)


@logger.inject_lambda_context(correlation_id_path=EVENT_ID_PATH, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if is_work_batch(event):
        return run_items(
            event, context, runtime=runtime(), now=clock.now, sweep=sweep_one, function="sagemaker_idle"
        )
    try:
        model = parse_event(event, (ScheduledEvent,), function="sagemaker_idle")
    except Rejected as rejected:
        return rejected.result
    assert isinstance(model, ScheduledEvent)
    if settings.organization:
        return fan_out("sagemaker", model, settings)
    return handle_sweep(runtime(), clock.now(), model.region, model.id).summary()
