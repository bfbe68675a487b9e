"""Entry point: EC2 instance state changes keep one GPU-idle alarm per running GPU instance; a schedule repairs drift."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard.aws import clients
from costguard.entry import PARSE_PERMISSIONS, Rejected, parse_event
from costguard.events.ec2 import InstanceStateChange
from costguard.events.scheduled import ScheduledEvent
from costguard.flows.gpu import ALARMS_PERMISSIONS, handle_state_change, reconcile
from costguard.observability import EVENT_ID_PATH, logger, metrics, tracer
from costguard.runtime import runtime
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = PARSE_PERMISSIONS | ALARMS_PERMISSIONS | clients.ASSUME_PERMISSIONS

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(get_settings(), "failed_events_queue_url")


@logger.inject_lambda_context(correlation_id_path=EVENT_ID_PATH, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        model = parse_event(event, (InstanceStateChange, ScheduledEvent), function="gpu_alarms")
    except Rejected as rejected:
        return rejected.result
    if isinstance(model, ScheduledEvent):
        return {"reconcile": reconcile(runtime(), model.region)}
    assert isinstance(model, InstanceStateChange)
    return handle_state_change(model, runtime())
