"""Posting to Slack as a Slack app: a small adapter over slack_sdk's WebClient, with our own errors."""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlsplit

from costguard.notify.delivery import DeliveryError, PermanentDeliveryError, RedactingFilter
from costguard.notify.routing import LOCAL_HOSTS, SlackRoutes, check_url

# slack_sdk's Web API client is loaded by the first client built, not by importing this module: the queued clicks'
# function loads slack_sdk at its first click (the notifier and the interactions endpoint load it at import anyway).
if TYPE_CHECKING:
    from slack_sdk.errors import SlackApiError
    from slack_sdk.http_retry import RetryHandler
    from slack_sdk.web import SlackResponse

# Only for the local sink: the Web API's base URL, accepted when it is plain http on this machine.
API_URL_VARIABLE = "COSTGUARD_SLACK_API_URL"
USERGROUP_MAX_AGE_SECONDS = 300.0
_USER_ID = re.compile(r"[UW][A-Z0-9]{8,}")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
# Any Slack token (bot, user, app, config...) and anything after "Bearer".
_TOKEN = re.compile(r"xox[a-z]-[A-Za-z0-9-]+|(?i:bearer)\s+\S+")
# Slack's answers that another try may change; everything else (not_in_channel, invalid_auth...) is final.
_TRANSIENT_ERRORS = frozenset(
    {"ratelimited", "rate_limited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
_MAX_RETRIES = 2
_MAX_BODY = 200


# Like delivery.redact: a URL keeps its scheme and host only (a response_url's path is a credential too), but a
# Web API method's URL says which call was made and carries nothing secret, so it keeps its path.
_URL = re.compile(r"(https?://)(?:[^/\s@]*@)?([^/\s@]+)(/\S*)?")
_API_PATH = re.compile(r"/api/[A-Za-z_.]+[,;:]?")


def _redact_url(match: re.Match[str]) -> str:
    path = match.group(3) or ""
    kept = path if _API_PATH.fullmatch(path) and ".." not in path else "/<redacted>"
    return f"{match.group(1)}{match.group(2)}{kept}"


def redact_secrets(text: str) -> str:
    """Whatever is logged or raised goes through here: no token, no URL path but a Web API method's."""
    return _URL.sub(_redact_url, _TOKEN.sub("<token>", text))


_api_logger = logging.getLogger("costguard.slack_api")
_api_logger.addFilter(RedactingFilter(redact_secrets))


class ApiDeliveryError(DeliveryError):
    """The Web API did not take the call, and another try may: rate limited after retries, 5xx, no connection."""

    def __init__(self, cause: str, *, error: str | None = None, status: int | None = None) -> None:
        super().__init__(cause)
        self.error = error
        self.status = status


class ApiPermanentError(PermanentDeliveryError):
    """The Web API refused the call and would again: not_in_channel, channel_not_found, invalid_auth,
    invalid_blocks, msg_too_long... ``error`` is Slack's error code."""

    def __init__(self, cause: str, *, error: str | None = None, status: int | None = None) -> None:
        super().__init__(cause, status=status, body=error)
        self.error = error


def _retry_handlers() -> list[RetryHandler]:
    from slack_sdk.http_retry.builtin_handlers import (
        ConnectionErrorRetryHandler,
        RateLimitErrorRetryHandler,
        ServerErrorRetryHandler,
    )

    return [
        RateLimitErrorRetryHandler(max_retry_count=_MAX_RETRIES),
        ServerErrorRetryHandler(max_retry_count=_MAX_RETRIES),
        ConnectionErrorRetryHandler(max_retry_count=_MAX_RETRIES),
    ]


def _refused(method: str, error: SlackApiError) -> NoReturn:
    response = error.response
    status = getattr(response, "status_code", None)
    code = response.get("error") if isinstance(getattr(response, "data", None), dict) else None
    code = redact_secrets(str(code))[:_MAX_BODY] if code else "unknown_error"
    cause = f"Slack {method} refused: {code}" + (f" ({status})" if status and status != 200 else "")
    if code in _TRANSIENT_ERRORS or status == 429 or (status is not None and status >= 500):
        raise ApiDeliveryError(cause, error=code, status=status) from None
    raise ApiPermanentError(cause, error=code, status=status) from None


class SlackApi:
    """One app's Web API client: posts, updates, ephemeral messages, interaction responses, user look-ups.

    Raises ApiDeliveryError when another try may work and ApiPermanentError when it would not. No error, log
    line or ``repr`` carries the token.
    """

    def __init__(self, token: str, base_url: str | None = None, timeout: int = 10) -> None:
        from slack_sdk.web import WebClient

        self._client = WebClient(
            token=token,
            timeout=timeout,
            logger=_api_logger,
            retry_handlers=_retry_handlers(),
            base_url=base_url or WebClient.BASE_URL,
        )
        self._timeout = timeout
        self._lock = threading.Lock()
        self._users: dict[str, str | None] = {}  # email -> user id, or None: Slack has no such user
        self._groups: dict[str, tuple[float, frozenset[str]]] = {}  # group -> (read at, members)

    def __repr__(self) -> str:  # never the token
        return f"SlackApi(base_url={redact_secrets(self._client.base_url)!r})"

    __str__ = __repr__

    def _call(self, method: str, call: Callable[[], SlackResponse]) -> SlackResponse:
        from slack_sdk.errors import SlackApiError

        try:
            return call()
        except SlackApiError as error:
            _refused(method, error)
        except Exception as error:  # connection errors that outlived the retries
            raise ApiDeliveryError(f"Slack {method} unreachable: {type(error).__name__}") from None

    def post(self, channel: str, message: dict[str, Any], thread_ts: str | None = None) -> str:
        """chat.postMessage with the message's text and blocks; the new message's ts."""
        extra: dict[str, Any] = {"thread_ts": thread_ts} if thread_ts else {}
        response = self._call(
            "chat.postMessage",
            lambda: self._client.chat_postMessage(
                channel=channel, text=message.get("text", ""), blocks=message.get("blocks"), **extra
            ),
        )
        ts = response.get("ts")
        if not isinstance(ts, str) or not ts:
            raise ApiDeliveryError("Slack chat.postMessage answered without a ts")
        return ts

    def update(self, channel: str, ts: str, message: dict[str, Any]) -> None:
        """chat.update: the message at ``ts`` takes the new text and blocks."""
        self._call(
            "chat.update",
            lambda: self._client.chat_update(
                channel=channel, ts=ts, text=message.get("text", ""), blocks=message.get("blocks")
            ),
        )

    def ephemeral(self, channel: str, user: str, text: str) -> None:
        """chat.postEphemeral: a message only ``user`` sees, in ``channel``."""
        self._call(
            "chat.postEphemeral",
            lambda: self._client.chat_postEphemeral(channel=channel, user=user, text=text),
        )

    def respond(
        self, response_url: str, text: str, *, replace_original: bool = False, ephemeral: bool = True
    ) -> None:
        """Answer an interaction through its response_url (https://hooks.slack.com/..., or the local sink)."""
        try:
            url = check_url(response_url)
        except ValueError as error:
            raise ApiPermanentError(f"not a Slack response_url: {error}") from None
        from slack_sdk.webhook import WebhookClient

        client = WebhookClient(
            url, timeout=self._timeout, logger=_api_logger, retry_handlers=_retry_handlers()
        )
        payload = {
            "text": text,
            "replace_original": replace_original,
            "response_type": "ephemeral" if ephemeral else "in_channel",
        }
        try:
            response = client.send_dict(payload)
        except Exception as error:
            raise ApiDeliveryError(f"Slack response_url unreachable: {type(error).__name__}") from None
        status = response.status_code
        if status == 200:
            return
        body = redact_secrets(str(response.body))[:_MAX_BODY]
        cause = f"Slack refused the response: {status} {body}"
        if 400 <= status < 500 and status not in (408, 429):
            raise ApiPermanentError(cause, error=body, status=status)
        raise ApiDeliveryError(cause, error=body, status=status)

    def user_for(self, owner: str) -> str | None:
        """An owner tag's value as a Slack user id: a user id as is, an email looked up (cached, misses too)."""
        value = owner.strip()
        if _USER_ID.fullmatch(value):
            return value
        if not _EMAIL.fullmatch(value):
            return None
        email = value.lower()
        with self._lock:
            if email in self._users:
                return self._users[email]
        try:
            response = self._call(
                "users.lookupByEmail", lambda: self._client.users_lookupByEmail(email=email)
            )
        except ApiPermanentError as error:
            if error.error == "users_not_found":
                with self._lock:
                    self._users[email] = None
            else:
                _api_logger.warning("Slack user look-up failed: %s", error)
            return None
        except ApiDeliveryError as error:  # not cached: the next call may get an answer
            _api_logger.warning("Slack user look-up failed: %s", error)
            return None
        user = response.get("user")
        found = user.get("id") if isinstance(user, dict) else None
        result = found if isinstance(found, str) and _USER_ID.fullmatch(found) else None
        with self._lock:
            self._users[email] = result
        return result

    def usergroup_members(self, group: str) -> frozenset[str]:
        """The user ids of a user group (usergroups.users.list), read again after five minutes."""
        now = time.monotonic()
        with self._lock:
            cached = self._groups.get(group)
        if cached is not None and now - cached[0] < USERGROUP_MAX_AGE_SECONDS:
            return cached[1]
        response = self._call(
            "usergroups.users.list", lambda: self._client.usergroups_users_list(usergroup=group)
        )
        users = response.get("users")
        members = (
            frozenset(u for u in users if isinstance(u, str)) if isinstance(users, list) else frozenset()
        )
        with self._lock:
            self._groups[group] = (now, members)
        return members


def api_base_url() -> str | None:
    """The Web API base URL from COSTGUARD_SLACK_API_URL, for the local sink only: http on 127.0.0.1 or
    localhost. Anything else is ignored with a warning, and slack_sdk's own (https://slack.com/api/) is used."""
    raw = os.environ.get(API_URL_VARIABLE, "").strip()
    if not raw:
        return None
    try:
        parts = urlsplit(raw)
        _ = parts.port  # raises on a port that is not a number
    except ValueError:
        parts = None
    local = (
        parts is not None
        and parts.scheme == "http"
        and (parts.hostname or "").lower() in LOCAL_HOSTS
        and "@" not in parts.netloc
        and not re.search(r"[\s\x00-\x1f\x7f\\]", raw)
    )
    if not local:
        _api_logger.warning(
            "%s ignored: it is only for a local sink (http://127.0.0.1:<port>/api/)", API_URL_VARIABLE
        )
        return None
    return raw if raw.endswith("/") else raw + "/"


def api_for(routes: SlackRoutes) -> SlackApi:
    """The app's client, one per (token, base URL) in this process."""
    if routes.bot_token is None:
        raise ApiPermanentError("the Slack secret holds webhooks, not a Slack app (no bot_token)")
    return _api(routes.bot_token, api_base_url())


@lru_cache(maxsize=8)
def _api(token: str, base_url: str | None) -> SlackApi:
    return SlackApi(token, base_url)


def reset_cache() -> None:
    """Forget every client (and their user and group caches): a local stack starting afresh."""
    _api.cache_clear()
