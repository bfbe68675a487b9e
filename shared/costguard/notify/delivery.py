"""Posting to Slack through slack_sdk's webhook client and its retry handlers."""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from costguard.notify.routing import SecretFormatError, SlackRoutes, parse_routes
from costguard.permissions import needs

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError
    from slack_sdk.webhook import WebhookClient

SECRET_MAX_AGE_SECONDS = 300
SECRET_PERMISSIONS = needs("secretsmanager:GetSecretValue")  # load_routes
# The path of a webhook URL is the secret (and user info may be one): slack_sdk logs full URLs when it retries.
_WEBHOOK_PATH = re.compile(r"(https?://)(?:[^/\s@]*@)?([^/\s@]+)(?:/\S*)?")


def redact(text: str) -> str:
    """Whatever is logged or kept goes through here: a URL keeps its scheme and host, nothing else."""
    return _WEBHOOK_PATH.sub(r"\1\2/<redacted>", text)


class RedactingFilter(logging.Filter):
    """Every record of a logger, rendered and passed through ``redactor`` (slack_sdk logs URLs and requests)."""

    def __init__(self, redactor: Callable[[str], str]) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.redactor(record.getMessage())
        record.args = ()
        return True


_slack_logger = logging.getLogger("costguard.slack")
_slack_logger.addFilter(RedactingFilter(redact))


# Left over when an invocation's last call may start: its bookkeeping (DynamoDB writes) and its answer to Lambda.
DEADLINE_MARGIN_SECONDS = 3.0


class Deadline:
    """The time an invocation has left (Lambda's context): every new piece of work, every call and every retry
    asks it first, so that a batch hands back what it cannot finish instead of being killed in the middle of a
    call (a killed batch comes back whole, and what it had posted would be looked for again)."""

    def __init__(self, remaining: Callable[[], float] | None = None, margin: float | None = None):
        self._remaining = remaining
        self.margin = DEADLINE_MARGIN_SECONDS if margin is None else margin

    @classmethod
    def of(cls, context: Any, margin: float | None = None) -> Deadline:
        """From a Lambda context (``get_remaining_time_in_millis``)."""
        return cls(lambda: context.get_remaining_time_in_millis() / 1000.0, margin)

    def left(self) -> float:
        """Seconds left (infinite without a context: a test, a local run)."""
        return math.inf if self._remaining is None else max(0.0, float(self._remaining()))

    def allows(self, seconds: float) -> bool:
        """Whether ``seconds`` of work still fit, with the margin after them."""
        return self.left() >= seconds + self.margin


UNBOUNDED = Deadline()
_deadline: ContextVar[Deadline] = ContextVar("costguard_delivery_deadline", default=UNBOUNDED)


def current_deadline() -> Deadline:
    """The deadline of the work in hand (set by ``within``), UNBOUNDED outside any."""
    return _deadline.get()


@contextmanager
def within(deadline: Deadline) -> Iterator[Deadline]:
    """Calls made inside the block (and their clients' retries) answer to ``deadline``."""
    token = _deadline.set(deadline)
    try:
        yield deadline
    finally:
        _deadline.reset(token)


# Extra webhook hosts besides hooks.slack.com (GovSlack's hooks.slack-gov.com, say): comma-separated host names.
WEBHOOK_HOSTS_VARIABLE = "COSTGUARD_SLACK_WEBHOOK_HOSTS"
# Statuses worth another try: throttling, a timeout, Slack's own errors. Any other 4xx says the same every time.
_TRANSIENT_4XX = frozenset({408, 429})
_MAX_BODY = 200


class DeliveryError(RuntimeError):
    """Slack did not accept the message after the client's retries; another try may work."""


class PermanentDeliveryError(DeliveryError):
    """Another try would meet the same answer: Slack refused the message itself (a 4xx other than 429), or
    the webhook secret is malformed. ``status`` and ``body`` are Slack's answer, when there was one."""

    def __init__(self, cause: str, *, status: int | None = None, body: str | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.status = status
        self.body = body


class NotStartedError(DeliveryError):
    """Not tried: the invocation's remaining time could not cover the call and its worst back-off. The notice
    goes back to the queue untouched."""


class MalformedSecretError(PermanentDeliveryError):
    """The webhook secret is not a usable URL or routing map (its content is never echoed)."""


class EmptySecretError(MalformedSecretError):
    """The webhook secret holds only blanks: permanent, so the notice is parked like any malformed secret."""


class UnsetSecretError(DeliveryError):
    """The webhook secret has no value at all (the stack creates it so): the notice is retried, as before.

    Secrets Manager answers ResourceNotFoundException "can't find the specified secret value for staging label"
    until a value is put in the secret; a secret that does not exist at all is not this error.
    """


# Either way nobody filled the secret in: the notifier says so through the ops topic (notify/ops_topic.py).
UNFILLED_SECRET_ERRORS: tuple[type[DeliveryError], ...] = (EmptySecretError, UnsetSecretError)
_EMPTY = "the Slack webhook secret is empty: put the webhook URL in it"
_NO_VALUE = "the Slack webhook secret has no value yet: put the webhook URL in it"


def webhook_hosts() -> tuple[str, ...]:
    """The extra allowed webhook hosts, from the function's environment."""
    return tuple(h for h in os.environ.get(WEBHOOK_HOSTS_VARIABLE, "").split(",") if h.strip())


def load_routes(secret_id: str, extra_hosts: tuple[str, ...] | None = None) -> SlackRoutes:
    """Read the webhook secret (cached by powertools for five minutes) and parse it.

    A malformed secret raises MalformedSecretError (EmptySecretError when it holds only blanks): retrying would
    read the same secret. A secret with no value yet raises UnsetSecretError, which is retried.
    """
    # Loaded here, not at import: powertools' parameters load boto3, which a function that reads no secret on
    # its path (a rejected event, the audit's steps) does not pay for at its cold start.
    from aws_lambda_powertools.utilities import parameters
    from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

    try:
        raw = parameters.get_secret(secret_id, max_age=SECRET_MAX_AGE_SECONDS)
    except GetParameterError as error:
        if _has_no_value(error):
            raise UnsetSecretError(_NO_VALUE) from None
        raise
    try:
        text = raw if isinstance(raw, str) else raw.decode()
        if not text.strip():
            raise EmptySecretError(_EMPTY)
        return parse_routes(text, webhook_hosts() if extra_hosts is None else extra_hosts)
    except (SecretFormatError, UnicodeDecodeError) as error:
        problem = str(error) if isinstance(error, SecretFormatError) else "the secret is not UTF-8 text"
        raise MalformedSecretError(problem) from None


def _has_no_value(error: GetParameterError) -> bool:
    """Secrets Manager's answer for a secret that exists but holds no version (AWSCURRENT) yet."""
    from botocore.exceptions import ClientError

    cause = error.__cause__ or error.__context__
    if isinstance(cause, ClientError):
        code = cause.response.get("Error", {}).get("Code", "")
        message = cause.response.get("Error", {}).get("Message", "")
    else:  # powertools keeps only the text: "An error occurred (ResourceNotFoundException) when calling..."
        code = "ResourceNotFoundException" if "(ResourceNotFoundException)" in str(error) else ""
        message = str(error)
    return code == "ResourceNotFoundException" and "secret value for staging label" in message


@lru_cache(maxsize=32)
def webhook_client(url: str, timeout: int = 10, max_retries: int = 2) -> WebhookClient:
    """One client per webhook; it retries 429 (honouring Retry-After), 5xx and connection errors. Its client is
    loaded here, by the first post, not by importing this module (the notifier loads slack_sdk anyway, for Block
    Kit)."""
    from slack_sdk.http_retry.builtin_handlers import (
        ConnectionErrorRetryHandler,
        RateLimitErrorRetryHandler,
        ServerErrorRetryHandler,
    )
    from slack_sdk.webhook import WebhookClient

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
    """Post once (with the client's own retries for 429, 5xx and connection errors).

    Raises DeliveryError if Slack is still unreachable, throttling or failing, and PermanentDeliveryError if it
    refused the message itself (400 invalid_blocks or invalid_payload, 403, 404 no_service, 410...).
    """
    try:
        response = webhook_client(url).send_dict(message)
    except Exception as error:  # connection errors that outlived the retries
        raise DeliveryError(f"Slack unreachable: {type(error).__name__}") from None
    status = response.status_code
    if status == 200:
        return
    body = redact(str(response.body)[:_MAX_BODY])
    if 400 <= status < 500 and status not in _TRANSIENT_4XX:
        raise PermanentDeliveryError(f"Slack refused the message: {status} {body}", status=status, body=body)
    raise DeliveryError(f"Slack answered {status}: {body}")
