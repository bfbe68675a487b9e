"""Entry point: the audit task finding one region's running GPU and accelerator resources."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard.audit.steps import RegionTask, step_input
from costguard.aws import clients
from costguard.entry import REJECT_PERMISSIONS
from costguard.flows.audit_discover import DISCOVER_REGION_PERMISSIONS, discover_region
from costguard.handler import lambda_entry
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = REJECT_PERMISSIONS | DISCOVER_REGION_PERMISSIONS | clients.ASSUME_PERMISSIONS

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(get_settings(), "audit_bucket", "failed_events_queue_url")


@lambda_entry
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return discover_region(step_input(event, RegionTask, function="audit_discover"), settings)
