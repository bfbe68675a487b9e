"""The Slack interactions endpoint (a Lambda Function URL): verify, refuse replays, queue, answer 200 at once.

Slack wants an answer within three seconds, so nothing is done here beyond checking the request: the verified
payload goes to the interactions queue and functions/interaction_actions does the work.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import ValidationError

from costguard.aws import clients
from costguard.interact import state
from costguard.interact.verify import FunctionUrlRequest, SlackRequest, Unauthorized, verify
from costguard.notify.delivery import SECRET_PERMISSIONS, load_routes
from costguard.observability import logger, metrics
from costguard.permissions import needs

QUEUE_VARIABLE = "COSTGUARD_INTERACTIONS_QUEUE_URL"
PERMISSIONS = SECRET_PERMISSIONS | state.SEEN_PERMISSIONS | needs("sqs:SendMessage")


class EndpointConfigError(ValueError):
    """The endpoint's environment is incomplete; the message names the variable."""


def interactions_queue_url() -> str:
    """The queue the verified payloads go to, from COSTGUARD_INTERACTIONS_QUEUE_URL (checked at cold start)."""
    url = os.environ.get(QUEUE_VARIABLE, "").strip()
    if not url:
        raise EndpointConfigError(f"{QUEUE_VARIABLE} is not set: the interactions queue's URL is needed")
    return url


def http(status: int, body: str = "") -> dict[str, Any]:
    return {"statusCode": status, "headers": {"Content-Type": "text/plain"}, "body": body}


def signing_secret(secret_id: str) -> str | None:
    """The Slack app's signing secret (the app form of the Slack secret); None for the webhook form."""
    return load_routes(secret_id).signing_secret


def answer(
    event: dict[str, Any], *, secret: str | None, table: str, queue_url: str, now: datetime
) -> dict[str, Any]:
    """The HTTP answer to one request; a verified first delivery is queued first."""
    try:
        method = FunctionUrlRequest.model_validate(event).requestContext.http.method
    except ValidationError:
        return http(400, "invalid request")
    if method != "POST":
        return http(405, "method not allowed")
    if not secret:
        logger.error("Slack interactions refused: the Slack secret holds no signing secret (app form)")
        return http(503, "not configured")
    try:
        request = verify(event, secret, now)
    except Unauthorized as refused:
        # Which check failed, never the body or the secret.
        logger.warning("Slack request refused", extra={"check": type(refused).__name__, "why": refused.why})
        metrics.add_metric(name="SlackRequestsRefused", unit=MetricUnit.Count, value=1)
        return http(refused.status, "invalid request" if refused.status == 400 else "unauthorized")
    if not state.first_delivery(table, request.fingerprint, now):
        # The same signed request again: a replay, or Slack retrying one it already sent. Answered 200 so
        # Slack stops retrying; nothing is queued again.
        logger.info("Slack request seen before: ignored", extra={"retry_num": request.retry_num})
        return http(200)
    enqueue(request, queue_url, now)
    return http(200)


def enqueue(request: SlackRequest, queue_url: str, now: datetime) -> None:
    """The request as Slack signed it (body, timestamp, signature): the actions worker verifies it again, so a
    message that write access to the queue alone could put there changes nothing."""
    body = {
        "body": request.body,
        "timestamp": str(request.timestamp),
        "signature": request.signature,
        # For whoever reads a dead-lettered click: when the endpoint took it. Never trusted: the worker checks
        # the signature's age at SQS's own SentTimestamp.
        "received_at": now.astimezone(UTC).isoformat(),
        "retry_num": request.retry_num,
    }
    clients.sqs().send_message(QueueUrl=queue_url, MessageBody=json.dumps(body, separators=(",", ":")))
