"""Entry point: AWS Health ODCR underutilization events (capacity_reservation_idle)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard import clock
from costguard.entry import OncePerEvent, Rejected, parse_event
from costguard.events.health import OdcrUnderutilization
from costguard.flows.capacity import handle_odcr_underutilization
from costguard.observability import logger, metrics, tracer
from costguard.runtime import runtime
from costguard.settings import get_settings

settings = get_settings()  # validated at cold start: a bad variable fails here, named


def process(event: OdcrUnderutilization) -> dict[str, Any]:
    return handle_odcr_underutilization(event, runtime(), clock.now()).summary()


# A redelivered Health event must alert once.
process_once = OncePerEvent(process)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        model = parse_event(event, (OdcrUnderutilization,), function="capacity")
    except Rejected as rejected:
        return rejected.result
    return process_once(model, context)
