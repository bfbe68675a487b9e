"""What the Slack client (notify/slack_api.py) and its retry handlers (notify/slack_retry.py) share: the retry
policy's figures, which calls may be retried, and whether a retry still fits the invocation's deadline. A leaf both
import, so neither leans on the other."""

from __future__ import annotations

import socket
from contextvars import ContextVar
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from costguard.notify.delivery import current_deadline

if TYPE_CHECKING:
    from slack_sdk.http_retry.response import HttpResponse

RATE_LIMITED_ERRORS = frozenset({"ratelimited", "rate_limited"})
# Calls another try would repeat (a second message): never retried once sent.
NOT_IDEMPOTENT = frozenset({"chat.postMessage", "chat.postEphemeral"})
MAX_RETRIES = 2
# slack_sdk's back-off before retry n (0-based): 0.5 * 2**n seconds plus up to 1 s of jitter.
BACKOFF_FACTOR = 0.5
JITTER = 1.0


# Set by the rate-limit handler when a call was still limited after its last retry (read by _refused).
limited_past_retries: ContextVar[bool] = ContextVar("costguard_slack_limited_past_retries", default=False)


def method_of(url: str) -> str:
    return urlsplit(url).path.rsplit("/", 1)[-1]


def unsent(error: BaseException) -> bool:
    """The request surely never reached Slack: the connection was refused, or the host not found."""
    from urllib.error import URLError

    reason = error.reason if isinstance(error, URLError) else error
    return isinstance(reason, ConnectionRefusedError | socket.gaierror)


def retry_after(response: HttpResponse) -> float:
    for name, values in response.headers.items():
        if name.lower() == "retry-after":
            value = values[0] if isinstance(values, list) and values else values
            try:
                return max(0.0, float(str(value)))
            except ValueError:
                break
    return 1.0


def fits(seconds: float) -> bool:
    return current_deadline().allows(seconds)


__all__ = [
    "BACKOFF_FACTOR",
    "JITTER",
    "MAX_RETRIES",
    "NOT_IDEMPOTENT",
    "RATE_LIMITED_ERRORS",
    "fits",
    "limited_past_retries",
    "method_of",
    "retry_after",
    "unsent",
]
