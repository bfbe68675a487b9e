"""Entry point: the audit task reading one region's utilization over the window, 500 series per call."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard.audit.steps import RegionTask, step_input
from costguard.flows.audit import read_region_metrics
from costguard.observability import logger, metrics, tracer
from costguard.settings import get_settings

settings = get_settings()  # validated at cold start


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return read_region_metrics(step_input(event, RegionTask, function="audit_metrics"), settings)
