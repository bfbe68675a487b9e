"""Entry point: the audit state machine's first task, naming the run, its moment and its items: one per
(account, region), written to S3 for the Map's ItemReader."""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard.audit.steps import PlanInput, step_input
from costguard.entry import REJECT_PERMISSIONS
from costguard.flows.audit_plan import PLAN_PERMISSIONS, account_of_arn, plan_run
from costguard.handler import lambda_entry
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = REJECT_PERMISSIONS | PLAN_PERMISSIONS

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(get_settings(), "audit_bucket", "failed_events_queue_url")


@lambda_entry
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    step = step_input(event, PlanInput, function="audit_plan")
    # The hub's account, should neither the settings nor the state machine's ARN name it: this function's own.
    hub = account_of_arn(getattr(context, "invoked_function_arn", None))
    return plan_run(step, settings, os.environ["AWS_REGION"], hub)
