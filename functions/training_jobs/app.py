"""Entry point: SageMaker Training Job State Change events from EventBridge."""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.parser import parse
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from costguard import clock
from costguard.events.sagemaker import TrainingJobStateChange
from costguard.flows.training_jobs import handle_training_job_event
from costguard.observability import logger, metrics, tracer
from costguard.runtime import reject, runtime
from costguard.settings import get_settings

settings = get_settings()  # validated at cold start: a bad variable fails here, named
# AWS may deliver one state change several times: the event id makes it one message.
idempotency = IdempotencyConfig(event_key_jmespath="id", expires_after_seconds=24 * 3600)


@cache
def _process() -> Any:
    persistence = DynamoDBPersistenceLayer(table_name=settings.state_table)

    @idempotent_function(data_keyword_argument="event", persistence_store=persistence, config=idempotency)  # type: ignore[untyped-decorator]
    def process(event: TrainingJobStateChange) -> dict[str, Any]:
        return handle_training_job_event(event, runtime(), clock.now()).summary()

    return process


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        model = parse(event=event, model=TrainingJobStateChange)
    except (ValidationError, ValueError, TypeError) as error:
        return reject(event, error, function="training_jobs")
    idempotency.register_lambda_context(context)
    result: dict[str, Any] = _process()(event=model)
    return result
