"""Entry point: EC2 Spot Instance Interruption Warning events from EventBridge (spot_interruption)."""

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
from costguard.events.ec2 import SpotInterruptionWarning
from costguard.flows.spot import handle_spot_interruption
from costguard.observability import logger, metrics, tracer
from costguard.runtime import runtime
from costguard.settings import get_settings

settings = get_settings()  # validated at cold start
# A redelivered warning must neither alert twice nor count the interruption twice.
idempotency = IdempotencyConfig(event_key_jmespath="id", expires_after_seconds=24 * 3600)


@cache
def _process() -> Any:
    persistence = DynamoDBPersistenceLayer(table_name=settings.state_table)

    @idempotent_function(data_keyword_argument="event", persistence_store=persistence, config=idempotency)  # type: ignore[untyped-decorator]
    def process(event: SpotInterruptionWarning) -> dict[str, Any]:
        return handle_spot_interruption(event, runtime(), clock.now()).summary()

    return process


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        model = parse_event(event, (SpotInterruptionWarning,), function="spot_interruptions")
    except Rejected as rejected:
        return rejected.result
    idempotency.register_lambda_context(context)
    result: dict[str, Any] = _process()(event=model)
    return result
