"""Posting to Slack as a Slack app: a small adapter over slack_sdk's WebClient, with our own errors.

**Retries.** slack_sdk's handlers retry a 429 and the Web API's own ``ok: false, error: ratelimited`` (HTTP 200)
after ``Retry-After``, a 500 or 503, and a broken connection, twice. A read timeout is retried too (slack_sdk's
connection handler leaves it out), but only for a call another try cannot repeat (``chat.update``, a read): a
``chat.postMessage`` whose connection broke after it was sent (a reset, a timeout) may have been taken, so it is
not sent blindly again. It raises ApiOutcomeUnknown instead, and ``post_once`` looks for it (the post carries its
key in the message metadata, read back with ``conversations.history`` or ``conversations.replies``) before posting
it again. No call and no retry starts unless the deadline in hand (delivery.within) can still cover it.

**Refusals.** ApiDeliveryError when another try may work, ApiPermanentError when it would not; ``whole_app`` marks
a refusal that says the app itself cannot post anywhere (its token, its workspace, its scopes, or the app rate
limited past its retries): every other call would meet the same answer.
"""

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

from costguard.notify.delivery import (
    DeliveryError,
    NotStartedError,
    PermanentDeliveryError,
    RedactingFilter,
    current_deadline,
)
from costguard.notify.routing import LOCAL_HOSTS, SlackRoutes, check_url
from costguard.notify.slack_limits import (
    BACKOFF_FACTOR,
    JITTER,
    MAX_RETRIES,
    NOT_IDEMPOTENT,
    RATE_LIMITED_ERRORS,
    limited_past_retries,
    unsent,
)

# slack_sdk's Web API client is loaded by the first client built, not by importing this module: the queued clicks'
# function loads slack_sdk at its first click (the notifier loads it at import anyway, for its Block Kit messages).
if TYPE_CHECKING:
    from slack_sdk.errors import SlackApiError
    from slack_sdk.http_retry import RetryHandler
    from slack_sdk.web import SlackResponse

# Only for the local sink: the Web API's base URL, accepted when it is plain http on this machine.
API_URL_VARIABLE = "COSTGUARD_SLACK_API_URL"
USERGROUP_MAX_AGE_SECONDS = 300.0
# How long one call may wait for Slack's answer (Slack answers in well under a second).
CALL_TIMEOUT_SECONDS = 5
_USER_ID = re.compile(r"[UW][A-Z0-9]{8,}")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
# Any Slack token (bot, user, app, config...) and anything after "Bearer".
_TOKEN = re.compile(r"xox[a-z]-[A-Za-z0-9-]+|(?i:bearer)\s+\S+")
# Slack's answers that another try may change; everything else (not_in_channel, invalid_auth...) is final.
_TRANSIENT_ERRORS = frozenset(
    {"ratelimited", "rate_limited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
# Refusals of the app itself, whatever the call: its token (revoked, expired, wrong), its workspace, its scopes.
# Slack's answers that the app may no longer post in one channel (the others are unaffected).
CHANNEL_ERRORS = frozenset({"not_in_channel", "channel_not_found", "is_archived", "channel_is_archived"})
WHOLE_APP_ERRORS = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "no_permission",
        "missing_scope",
        "not_allowed_token_type",
        "team_access_not_granted",
        "ekm_access_denied",
    }
)
_MAX_BODY = 200
# Each post carries its key in the message metadata (``event_payload.post``) under this event type.
METADATA_EVENT = "costguard_post"
# Looking for an earlier post: at most this many pages of this many messages, newest first.
FIND_PAGES = 5
FIND_PAGE_SIZE = 200
# A 429's Retry-After as Slack usually sends it (a longer one is waited for only if the deadline allows it).
_RETRY_AFTER = 1.0


def worst_call_seconds(timeout: float) -> float:
    """The longest one call may take with its retries: every try timing out, each wait the longest."""
    waits = sum(max(BACKOFF_FACTOR * 2.0**n, _RETRY_AFTER) + JITTER for n in range(MAX_RETRIES))
    return float((1 + MAX_RETRIES) * timeout + waits)


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

    def __init__(
        self, cause: str, *, error: str | None = None, status: int | None = None, past_retries: bool = False
    ) -> None:
        super().__init__(cause)
        self.error = error
        self.status = status
        self.past_retries = past_retries

    @property
    def whole_app(self) -> bool:
        """The Web API's own rate limit (HTTP 200, ``ok: false``) outlived every retry: the app is throttled."""
        return self.error in RATE_LIMITED_ERRORS and self.status == 200 and self.past_retries


class ApiOutcomeUnknown(ApiDeliveryError):
    """A post was sent and its answer lost (a reset, a timeout): Slack may have taken it. Look before posting it
    again (SlackApi.post_once)."""


class ApiNotStarted(ApiDeliveryError, NotStartedError):
    """Not tried: the deadline in hand could not cover the call."""


class ApiPermanentError(PermanentDeliveryError):
    """The Web API refused the call and would again: not_in_channel, channel_not_found, invalid_auth,
    invalid_blocks, msg_too_long... ``error`` is Slack's error code."""

    def __init__(
        self, cause: str, *, error: str | None = None, status: int | None = None, channel: str | None = None
    ) -> None:
        super().__init__(cause, status=status, body=error)
        self.error = error
        self.channel = channel  # the channel the refused call was about, when it was about one

    @property
    def whole_app(self) -> bool:
        """The app cannot post at all (token, workspace, scopes): every call meets the same answer."""
        return self.error in WHOLE_APP_ERRORS

    @property
    def whole_channel(self) -> bool:
        """The app cannot post in this channel (removed from it, archived, deleted): every notice routed to it
        meets the same answer until someone invites the bot back or changes the route."""
        return self.channel is not None and self.error in CHANNEL_ERRORS


def _retry_handlers(timeout: float) -> list[RetryHandler]:
    """slack_sdk's handlers, bounded by the deadline in hand: a retry starts only if its wait and the call fit
    (notify/slack_retry.py, loaded with the first client: it loads slack_sdk's retry machinery)."""
    from costguard.notify.slack_retry import handlers

    return handlers(timeout)


def _refused(method: str, error: SlackApiError, channel: str | None = None) -> NoReturn:
    response = error.response
    status = getattr(response, "status_code", None)
    code = response.get("error") if isinstance(getattr(response, "data", None), dict) else None
    code = redact_secrets(str(code))[:_MAX_BODY] if code else "unknown_error"
    cause = f"Slack {method} refused: {code}" + (f" ({status})" if status and status != 200 else "")
    if code in _TRANSIENT_ERRORS or status == 429 or (status is not None and status >= 500):
        raise ApiDeliveryError(
            cause, error=code, status=status, past_retries=limited_past_retries.get()
        ) from None
    raise ApiPermanentError(cause, error=code, status=status, channel=channel) from None


def _metadata(key: str) -> dict[str, Any]:
    return {"event_type": METADATA_EVENT, "event_payload": {"post": key}}


def _key_of(message: Any) -> str | None:
    """The post key a message carries in its metadata (conversations.history, .replies), if costguard's."""
    metadata = message.get("metadata") if isinstance(message, dict) else None
    if not isinstance(metadata, dict) or metadata.get("event_type") != METADATA_EVENT:
        return None
    payload = metadata.get("event_payload")
    key = payload.get("post") if isinstance(payload, dict) else None
    return key if isinstance(key, str) else None


class SlackApi:
    """One app's Web API client: posts, updates, ephemeral messages, interaction responses, user look-ups.

    Raises ApiDeliveryError when another try may work and ApiPermanentError when it would not. No error, log
    line or ``repr`` carries the token.
    """

    def __init__(self, token: str, base_url: str | None = None, timeout: float | None = None) -> None:
        from slack_sdk.web import WebClient

        timeout = CALL_TIMEOUT_SECONDS if timeout is None else timeout  # read now: a test may shorten it

        self._client = WebClient(
            token=token,
            timeout=timeout,  # type: ignore[arg-type]  # urllib takes a float
            logger=_api_logger,
            retry_handlers=_retry_handlers(timeout),
            base_url=base_url or WebClient.BASE_URL,
        )
        self._timeout = timeout
        self._lock = threading.Lock()
        self._users: dict[str, str | None] = {}  # email -> user id, or None: Slack has no such user
        self._groups: dict[str, tuple[float, frozenset[str]]] = {}  # group -> (read at, members)

    def __repr__(self) -> str:  # never the token
        return f"SlackApi(base_url={redact_secrets(self._client.base_url)!r})"

    __str__ = __repr__

    @property
    def timeout(self) -> float:
        return self._timeout

    def _call(
        self, method: str, call: Callable[[], SlackResponse], *, channel: str | None = None
    ) -> SlackResponse:
        from slack_sdk.errors import SlackApiError

        deadline = current_deadline()
        if not deadline.allows(self._timeout):
            raise ApiNotStarted(f"Slack {method} not tried: {deadline.left():.1f} s left")
        limited_past_retries.set(False)
        try:
            return call()
        except SlackApiError as error:
            _refused(method, error, channel)
        except Exception as error:  # connection errors that outlived the retries
            if method in NOT_IDEMPOTENT and not unsent(error):
                raise ApiOutcomeUnknown(
                    f"Slack {method} sent, no answer: {type(error).__name__}", error=type(error).__name__
                ) from None
            raise ApiDeliveryError(f"Slack {method} unreachable: {type(error).__name__}") from None

    def post(
        self, channel: str, message: dict[str, Any], thread_ts: str | None = None, *, key: str | None = None
    ) -> str:
        """chat.postMessage with the message's text and blocks (and ``key`` in its metadata); the new message's
        ts. Raises ApiOutcomeUnknown when it was sent and the answer lost."""
        extra: dict[str, Any] = {"thread_ts": thread_ts} if thread_ts else {}
        if key:
            extra["metadata"] = _metadata(key)
        response = self._call(
            "chat.postMessage",
            lambda: self._client.chat_postMessage(
                channel=channel, text=message.get("text", ""), blocks=message.get("blocks"), **extra
            ),
            channel=channel,
        )
        ts = response.get("ts")
        if not isinstance(ts, str) or not ts:
            raise ApiDeliveryError("Slack chat.postMessage answered without a ts")
        return ts

    def post_once(
        self,
        channel: str,
        message: dict[str, Any],
        *,
        key: str,
        thread_ts: str | None = None,
        look_first: bool = False,
    ) -> str:
        """Post ``message`` keyed ``key`` unless Slack has it already: the ts of the one message.

        ``look_first``: an earlier attempt's outcome is unknown (a redelivery after a timeout): look for it before
        posting. A post whose answer is lost is looked for, and posted again only if it is not there. Raises
        ApiOutcomeUnknown when it may have been taken and could not be found or posted again in time.
        """
        if look_first:
            try:
                found = self.find(channel, key, thread_ts)
            except ApiDeliveryError as lost:  # still unknown: not posted blindly
                raise ApiOutcomeUnknown(
                    f"Slack chat.postMessage: an earlier try not looked for ({lost})"
                ) from None
            if found:
                return found
        for _ in range(2):
            try:
                return self.post(channel, message, thread_ts, key=key)
            except ApiOutcomeUnknown:
                try:
                    found = self.find(channel, key, thread_ts)
                except ApiDeliveryError as lost:
                    raise ApiOutcomeUnknown(f"Slack chat.postMessage: not found again ({lost})") from None
                if found:
                    return found
        raise ApiOutcomeUnknown("Slack chat.postMessage: sent twice, no answer either time")

    def find(self, channel: str, key: str, thread_ts: str | None = None) -> str | None:
        """The ts of the message keyed ``key`` in the channel's history (or ``thread_ts``'s thread), newest
        first, at most FIND_PAGES pages; None when it is not there. A look-up Slack refuses (the history scope
        missing, say) is None, with a warning: the post is then made again, at least once rather than never."""
        method = "conversations.replies" if thread_ts else "conversations.history"
        cursor: str | None = None
        for _ in range(FIND_PAGES):

            def page(cursor: str | None = cursor) -> SlackResponse:
                if thread_ts:
                    return self._client.conversations_replies(
                        channel=channel,
                        ts=thread_ts,
                        include_all_metadata=True,
                        limit=FIND_PAGE_SIZE,
                        cursor=cursor,
                    )
                return self._client.conversations_history(
                    channel=channel, include_all_metadata=True, limit=FIND_PAGE_SIZE, cursor=cursor
                )

            try:
                response = self._call(method, page)
            except ApiPermanentError as refused:
                if refused.whole_app and refused.error != "missing_scope":
                    raise
                _api_logger.warning("Slack look-up for an earlier post refused: %s", refused)
                return None
            messages = response.get("messages")
            for found in messages if isinstance(messages, list) else []:
                ts = found.get("ts") if isinstance(found, dict) else None
                if _key_of(found) == key and isinstance(ts, str) and ts:
                    return ts
            meta = response.get("response_metadata")
            cursor = meta.get("next_cursor") if isinstance(meta, dict) else None
            if not cursor:
                return None
        return None

    def update(self, channel: str, ts: str, message: dict[str, Any]) -> None:
        """chat.update: the message at ``ts`` takes the new text and blocks."""
        self._call(
            "chat.update",
            lambda: self._client.chat_update(
                channel=channel, ts=ts, text=message.get("text", ""), blocks=message.get("blocks")
            ),
            channel=channel,
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
            url,
            timeout=self._timeout,  # type: ignore[arg-type]  # urllib takes a float
            logger=_api_logger,
            retry_handlers=_retry_handlers(self._timeout),
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
