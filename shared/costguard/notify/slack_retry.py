"""slack_sdk's retry handlers as costguard runs them (notify/slack_api.py): bounded by the deadline in hand (a
retry starts only if its wait and the call fit), the Web API's ``ok: false`` rate limit retried like a 429, and a
non-idempotent post retried only when it surely never reached Slack. Loaded with the first Web API client."""

from __future__ import annotations

import random
import time
from http.client import RemoteDisconnected
from urllib.error import URLError

from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler, ServerErrorRetryHandler
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.http_retry.interval_calculator import RetryIntervalCalculator
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from costguard.notify.slack_limits import (
    BACKOFF_FACTOR,
    JITTER,
    MAX_RETRIES,
    NOT_IDEMPOTENT,
    RATE_LIMITED_ERRORS,
    fits,
    limited_past_retries,
    method_of,
    retry_after,
    unsent,
)


def backoff(state: RetryState) -> float:
    """The longest wait before the next try after ``state``'s attempts (jitter included)."""
    return BACKOFF_FACTOR * 2.0 ** int(state.current_attempt) + JITTER


class Backoff(RetryIntervalCalculator):
    """slack_sdk's exponential back-off with jitter, from slack_api's figures (the deadline's too)."""

    def calculate_sleep_duration(self, current_attempt: int) -> float:
        return BACKOFF_FACTOR * 2.0**current_attempt + random.random() * JITTER  # noqa: S311


class RateLimited(RateLimitErrorRetryHandler):
    """A 429, or the Web API's ``ok: false, error: ratelimited`` answered with HTTP 200: after Retry-After.
    Limited still once every retry is spent (not merely cut short by the deadline), the call says so."""

    def __init__(self, timeout: float, max_retry_count: int = MAX_RETRIES) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.timeout = timeout

    def can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        body = response.body if response is not None and isinstance(response.body, dict) else {}
        limited = response is not None and (
            response.status_code == 429
            or (response.status_code == 200 and body.get("error") in RATE_LIMITED_ERRORS)
        )
        if not limited or response is None:
            return False
        if state.current_attempt >= self.max_retry_count:
            limited_past_retries.set(True)
            return False
        return fits(retry_after(response) + JITTER + self.timeout)

    def prepare_for_next_attempt(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        state.next_attempt_requested = True
        wait = retry_after(response) if response is not None else 1.0
        time.sleep(wait + random.random() * JITTER)  # noqa: S311
        state.increment_current_attempt()


class ServerError(ServerErrorRetryHandler):
    """A 5xx: after a back-off, when it and the call fit the deadline."""

    def __init__(self, timeout: float, max_retry_count: int = MAX_RETRIES) -> None:
        super().__init__(max_retry_count=max_retry_count, interval_calculator=Backoff())
        self.timeout = timeout

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        return super()._can_retry(state=state, request=request, response=response, error=error) and fits(
            backoff(state) + self.timeout
        )


class Connection(RetryHandler):
    """A broken connection or a read timeout; a post only when it surely never reached Slack."""

    def __init__(self, timeout: float, max_retry_count: int = MAX_RETRIES) -> None:
        super().__init__(max_retry_count=max_retry_count, interval_calculator=Backoff())
        self.timeout = timeout

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if error is None or response is not None:
            return False
        if not isinstance(error, URLError | ConnectionError | RemoteDisconnected | TimeoutError):
            return False
        if method_of(request.url) in NOT_IDEMPOTENT and not unsent(error):
            return False
        return fits(backoff(state) + self.timeout)


def handlers(timeout: float) -> list[RetryHandler]:
    """The handlers of a client whose calls time out after ``timeout`` seconds."""
    return [RateLimited(timeout), ServerError(timeout), Connection(timeout)]
