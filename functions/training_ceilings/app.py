"""Entry point: the scheduled training-job sweep (cost ceilings every 15 minutes, the digest after midnight UTC)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard import clock
from costguard.entry import PARSE_PERMISSIONS, Rejected, parse_event
from costguard.events.scheduled import ScheduledEvent
from costguard.flows.training_ceilings import SCHEDULE_PERMISSIONS, handle_schedule
from costguard.observability import logger, metrics, tracer
from costguard.runtime import runtime
from costguard.settings import get_settings

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = PARSE_PERMISSIONS | SCHEDULE_PERMISSIONS

settings = get_settings()  # validated at cold start


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        model = parse_event(event, (ScheduledEvent,), function="training_ceilings")
    except Rejected as rejected:
        return rejected.result
    assert isinstance(model, ScheduledEvent)
    return handle_schedule(
        runtime(),
        clock.now(),
        account=model.account,
        default_region=model.region,
        scheduled_at=model.time,
        event_id=model.id,
    ).summary()
