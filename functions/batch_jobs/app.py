"""Entry point: AWS Batch Job State Change events from EventBridge (batch_retry_loop)."""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard import clock
from costguard.entry import Rejected, parse_event
from costguard.events.batch import BatchJobStateChange
from costguard.flows.batch import handle_batch_job_event
from costguard.observability import logger, metrics, tracer
from costguard.runtime import runtime
from costguard.settings import get_settings

settings = get_settings()  # validated at cold start
# A redelivered event must neither alert twice nor count its job twice against the queue.
idempotency = IdempotencyConfig(event_key_jmespath="id", expires_after_seconds=24 * 3600)


@cache
def _process() -> Any:
    persistence = DynamoDBPersistenceLayer(table_name=settings.state_table)

    @idempotent_function(data_keyword_argument="event", persistence_store=persistence, config=idempotency)  # type: ignore[untyped-decorator]
    def process(event: BatchJobStateChange) -> dict[str, Any]:
        return handle_batch_job_event(event, runtime(), clock.now()).summary()

    return process


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        model = parse_event(event, (BatchJobStateChange,), function="batch_jobs")
    except Rejected as rejected:
        return rejected.result
    idempotency.register_lambda_context(context)
    result: dict[str, Any] = _process()(event=model)
    return result
