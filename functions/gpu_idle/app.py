"""Entry point: a GPU-idle alarm entering ALARM, and the scheduled sweep over every GPU instance."""

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
from costguard.events.cloudwatch import AlarmStateChange
from costguard.events.scheduled import ScheduledEvent
from costguard.flows.gpu import handle_alarm, handle_sweep
from costguard.observability import logger, metrics, tracer
from costguard.runtime import runtime
from costguard.settings import get_settings

settings = get_settings()  # validated at cold start
idempotency = IdempotencyConfig(event_key_jmespath="id", expires_after_seconds=24 * 3600)


@cache
def _on_alarm() -> Any:
    persistence = DynamoDBPersistenceLayer(table_name=settings.state_table)

    @idempotent_function(data_keyword_argument="event", persistence_store=persistence, config=idempotency)  # type: ignore[untyped-decorator]
    def on_alarm(event: AlarmStateChange) -> dict[str, Any]:
        return handle_alarm(event, runtime(), clock.now()).summary()

    return on_alarm


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        model = parse_event(event, (AlarmStateChange, ScheduledEvent), function="gpu_idle")
    except Rejected as rejected:
        return rejected.result
    if isinstance(model, ScheduledEvent):
        return handle_sweep(runtime(), clock.now(), model.region, model.id).summary()
    idempotency.register_lambda_context(context)
    result: dict[str, Any] = _on_alarm()(event=model)
    return result
