"""Entry point: Slack's interaction requests (buttons, menus) on a Function URL; verified, queued, answered 200.

The Function URL's AuthType is NONE (Slack cannot sign AWS SigV4): the Slack signature is the authentication.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard import clock
from costguard.interact.endpoint import PERMISSIONS as ENDPOINT_PERMISSIONS
from costguard.interact.endpoint import answer, interactions_queue_url, signing_secret
from costguard.observability import EVENT_ID_PATH, logger, metrics, tracer
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = ENDPOINT_PERMISSIONS

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(get_settings(), "state_table", "slack_secret_id")


@logger.inject_lambda_context(correlation_id_path=EVENT_ID_PATH, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return answer(
        event,
        secret=signing_secret(settings.slack_secret_id),
        table=settings.state_table,
        queue_url=interactions_queue_url(),  # a missing variable fails the request, named
        now=clock.now(),
    )
