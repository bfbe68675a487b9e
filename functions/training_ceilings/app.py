"""Entry point: the scheduled training-job sweep (cost ceilings every 15 minutes, the digest after midnight UTC)."""

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
from costguard.flows.training_ceilings import SCHEDULE_PERMISSIONS, handle_schedule, sweep_region
from costguard.observability import EVENT_ID_PATH, logger, metrics, tracer
from costguard.pipeline import Report
from costguard.runtime import runtime
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = PARSE_PERMISSIONS | SCHEDULE_PERMISSIONS | FAN_OUT_PERMISSIONS | ASSUME_PERMISSIONS

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(
    check_settings(get_settings()), "state_table", "decisions_queue_url", "failed_events_queue_url"
)


def sweep_one(item: SweepItem, now: datetime) -> Report:
    """An organization sweep's work item: one account and region."""
    return sweep_region(
        runtime(),
        now,
        account=item.account,
        region=item.region,
        scheduled_at=item.time,
        event_id=item.event_id,
    )


@logger.inject_lambda_context(correlation_id_path=EVENT_ID_PATH, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if is_work_batch(event):
        return run_items(
            event, context, runtime=runtime(), now=clock.now, sweep=sweep_one, function="training_ceilings"
        )
    try:
        model = parse_event(event, (ScheduledEvent,), function="training_ceilings")
    except Rejected as rejected:
        return rejected.result
    assert isinstance(model, ScheduledEvent)
    if settings.organization:
        return fan_out("training_ceilings", model, settings)
    return handle_schedule(
        runtime(),
        clock.now(),
        account=model.account,
        default_region=model.region,
        scheduled_at=model.time,
        event_id=model.id,
    ).summary()
