"""Entry point: the audit task judging one region's resources by the right-sizing rules."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard.audit.steps import RegionTask, step_input
from costguard.entry import REJECT_PERMISSIONS
from costguard.flows.audit_evaluate import EVALUATE_REGION_PERMISSIONS, evaluate_region
from costguard.handler import lambda_entry
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = REJECT_PERMISSIONS | EVALUATE_REGION_PERMISSIONS

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(get_settings(), "audit_bucket", "failed_events_queue_url")


@lambda_entry
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return evaluate_region(step_input(event, RegionTask, function="audit_evaluate"), settings)
