"""Entry point: Slack's interaction requests (buttons, menus) on a Function URL; verified, queued, answered 200.

The Function URL's AuthType is NONE (Slack cannot sign AWS SigV4): the Slack signature is the authentication.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard import clock
from costguard.handler import lambda_entry
from costguard.interact.endpoint import PERMISSIONS as ENDPOINT_PERMISSIONS
from costguard.interact.endpoint import answer, interactions_queue_url, signing_secret
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = ENDPOINT_PERMISSIONS

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(get_settings(), "state_table", "slack_secret_id")


@lambda_entry
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return answer(
        event,
        secret=signing_secret(settings.slack_secret_id),
        table=settings.state_table,
        queue_url=interactions_queue_url(),  # a missing variable fails the request, named
        now=clock.now(),
    )
