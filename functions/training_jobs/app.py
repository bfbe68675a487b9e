"""Entry point: SageMaker Training Job State Change events from EventBridge."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard import clock
from costguard.aws import clients
from costguard.entry import ONCE_PERMISSIONS, PARSE_PERMISSIONS, OncePerEvent, Rejected, parse_event
from costguard.events.sagemaker import TrainingJobStateChange
from costguard.flows.training_jobs import EVENT_PERMISSIONS, handle_training_job_event
from costguard.observability import EVENT_ID_PATH, logger, metrics, tracer
from costguard.runtime import runtime
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = PARSE_PERMISSIONS | ONCE_PERMISSIONS | EVENT_PERMISSIONS | clients.ASSUME_PERMISSIONS

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(get_settings(), "state_table", "decisions_queue_url", "failed_events_queue_url")


def process(event: TrainingJobStateChange) -> dict[str, Any]:
    return handle_training_job_event(event, runtime(), clock.now()).summary()


# AWS may deliver one state change several times: the event id makes it one message.
process_once = OncePerEvent(process)


@logger.inject_lambda_context(correlation_id_path=EVENT_ID_PATH, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        model = parse_event(event, (TrainingJobStateChange,), function="training_jobs")
    except Rejected as rejected:
        return rejected.result
    return process_once(model, context)
