"""Entry point: the scheduled sweep over SageMaker training jobs, notebook instances and endpoints."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard import clock
from costguard.entry import PARSE_PERMISSIONS, Rejected, parse_event
from costguard.events.scheduled import ScheduledEvent
from costguard.flows.sagemaker import SWEEP_PERMISSIONS, handle_sweep
from costguard.observability import logger, metrics, tracer
from costguard.runtime import runtime
from costguard.settings import get_settings

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = PARSE_PERMISSIONS | SWEEP_PERMISSIONS

settings = get_settings()  # validated at cold start


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        model = parse_event(event, (ScheduledEvent,), function="sagemaker_idle")
    except Rejected as rejected:
        return rejected.result
    assert isinstance(model, ScheduledEvent)
    return handle_sweep(runtime(), clock.now(), model.region, model.id).summary()
