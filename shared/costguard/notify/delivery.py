"""Posting to Slack through slack_sdk's webhook client and its retry handlers."""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities import parameters
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)
from slack_sdk.webhook import WebhookClient

from costguard.notify.routing import SlackRoutes, parse_routes
from costguard.permissions import needs

SECRET_MAX_AGE_SECONDS = 300
SECRET_PERMISSIONS = needs("secretsmanager:GetSecretValue")  # load_routes
# The path of a webhook URL is the secret: slack_sdk logs full URLs when it retries.
_WEBHOOK_PATH = re.compile(r"(https?://[^/\s]+)/[^\s]+")


class _RedactWebhooks(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = _WEBHOOK_PATH.sub(r"\1/<redacted>", record.getMessage())
        record.args = ()
        return True


_slack_logger = logging.getLogger("costguard.slack")
_slack_logger.addFilter(_RedactWebhooks())


class DeliveryError(RuntimeError):
    """Slack did not accept the message after the client's retries."""


def load_routes(secret_id: str) -> SlackRoutes:
    """Read the webhook secret (cached by powertools for five minutes) and parse it."""
    raw = parameters.get_secret(secret_id, max_age=SECRET_MAX_AGE_SECONDS)
    return parse_routes(raw if isinstance(raw, str) else raw.decode())


@lru_cache(maxsize=32)
def webhook_client(url: str, timeout: int = 10, max_retries: int = 2) -> WebhookClient:
    """One client per webhook; it retries 429 (honouring Retry-After), 5xx and connection errors."""
    return WebhookClient(
        url,
        timeout=timeout,
        logger=_slack_logger,
        retry_handlers=[
            RateLimitErrorRetryHandler(max_retry_count=max_retries),
            ServerErrorRetryHandler(max_retry_count=max_retries),
            ConnectionErrorRetryHandler(max_retry_count=max_retries),
        ],
    )


def post(url: str, message: dict[str, Any]) -> None:
    """Post once (with the client's own retries); raise DeliveryError if Slack still refuses."""
    try:
        response = webhook_client(url).send_dict(message)
    except Exception as error:  # connection errors that outlived the retries
        raise DeliveryError(f"Slack unreachable: {type(error).__name__}") from None
    if response.status_code != 200:
        raise DeliveryError(f"Slack answered {response.status_code}: {str(response.body)[:200]}")
