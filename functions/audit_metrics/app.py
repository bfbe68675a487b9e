"""Entry point: the audit task reading one region's utilization over the window, 500 series per call."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard.audit.steps import RegionTask, step_input
from costguard.aws import clients
from costguard.entry import REJECT_PERMISSIONS
from costguard.flows.audit_metrics import READ_REGION_METRICS_PERMISSIONS, read_region_metrics
from costguard.handler import lambda_entry
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = REJECT_PERMISSIONS | READ_REGION_METRICS_PERMISSIONS | clients.ASSUME_PERMISSIONS

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(get_settings(), "audit_bucket", "failed_events_queue_url")


@lambda_entry
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return read_region_metrics(step_input(event, RegionTask, function="audit_metrics"), settings)
