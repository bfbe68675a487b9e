"""Where a message goes: one webhook or a map of webhooks by a routing tag's value, or a Slack app's channels."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

SLACK_WEBHOOK_HOST = "hooks.slack.com"
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})  # plain http only for a local sink
_HOST = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+")
# Nothing a URL parser might read two ways: whitespace, control characters, backslashes.
_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f\\]")
# The Slack app form: a bot token, the app's signing secret, and channel ids (public C..., private G...).
CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{8,}")
_BOT_TOKEN = re.compile(r"xoxb-[A-Za-z0-9-]{1,250}")
_SIGNING_SECRET = re.compile(r"[A-Za-z0-9]{16,128}")


def allowed_hosts(extra: Iterable[str] = ()) -> frozenset[str]:
    """hooks.slack.com and the configured extra hosts (exact names, lower case; no wildcard)."""
    hosts = {SLACK_WEBHOOK_HOST}
    for host in extra:
        name = host.strip().lower()
        if name:
            if not _HOST.fullmatch(name):
                raise ValueError(
                    "an allowed webhook host must be a plain host name, like hooks.slack-gov.com"
                )
            hosts.add(name)
    return frozenset(hosts)


def check_url(url: str, hosts: frozenset[str] = frozenset({SLACK_WEBHOOK_HOST})) -> str:
    """The URL parsed, not prefix-tested: https to an allowed host, or plain http to a local sink.

    The error says what is wrong without echoing the URL (its path is the secret).
    """
    if _UNSAFE.search(url):
        raise ValueError("a webhook URL must not contain spaces, control characters or backslashes")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError("a webhook URL must be a valid URL") from None
    host = (parts.hostname or "").lower()
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise ValueError("a webhook URL must not carry user info (user@host)")
    if parts.scheme == "https":
        if host not in hosts:
            raise ValueError(
                f"a webhook URL's host must be {SLACK_WEBHOOK_HOST} or one of COSTGUARD_SLACK_WEBHOOK_HOSTS"
            )
        if port not in (None, 443):
            raise ValueError("a webhook URL must use the https port (443)")
    elif parts.scheme == "http":
        if host not in LOCAL_HOSTS:
            raise ValueError(
                "a webhook must be an https:// URL (plain http only for a local sink on 127.0.0.1)"
            )
    else:
        raise ValueError("a webhook must be an https:// URL")
    if parts.path in ("", "/"):
        raise ValueError("a webhook URL must have a path (https://hooks.slack.com/services/...)")
    return url


def _context_hosts(info: ValidationInfo) -> frozenset[str]:
    context = info.context if isinstance(info.context, dict) else {}
    hosts = context.get("hosts")
    return hosts if isinstance(hosts, frozenset) else frozenset({SLACK_WEBHOOK_HOST})


class SecretFormatError(ValueError):
    """The Slack secret is neither a webhook URL nor a routing map (its content is never echoed)."""


class SlackRoutes(BaseModel):
    """The secret's content, in one of two forms.

    Webhooks: ``{"default": url, "routes": {"ml-research": url, ...}}`` or one URL.
    A Slack app: ``{"bot_token": "xoxb-...", "signing_secret": "...", "default": "C0123ABCD",
    "routes": {"ml-research": "C0456EFGH"}}``, where ``default`` and ``routes`` are channel ids.
    Neither form is ever printed: not in ``repr``, not in an error.
    """

    # hide_input_in_errors: a ValidationError of a model built directly must not echo a token or URL either.
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    default: str = Field(min_length=1)
    routes: dict[str, str] = Field(default_factory=dict)
    bot_token: str | None = None
    signing_secret: str | None = None

    @field_validator("bot_token")
    @classmethod
    def _bot_token_shape(cls, value: str | None) -> str | None:
        if value is not None and not _BOT_TOKEN.fullmatch(value):
            raise ValueError("the bot token must be a Slack bot token (xoxb-...)")
        return value

    @field_validator("signing_secret")
    @classmethod
    def _signing_secret_shape(cls, value: str | None) -> str | None:
        if value is not None and not _SIGNING_SECRET.fullmatch(value):
            raise ValueError(
                "the signing secret must be the app's signing secret (16 to 128 letters and digits)"
            )
        return value

    @model_validator(mode="after")
    def _destinations(self, info: ValidationInfo) -> SlackRoutes:
        # After the fields, so the form (bot token or not) is known before the destinations are read.
        if self.bot_token is None:
            if self.signing_secret is not None:
                raise ValueError("a signing secret needs a bot token (xoxb-...) beside it")
            check = _url_checker(_context_hosts(info))
        else:
            check = _channel_id
        try:
            check(self.default)
        except ValueError as error:
            raise ValueError(f"default: {error}") from None
        for route, destination in self.routes.items():
            try:
                check(destination)
            except ValueError as error:
                raise ValueError(f"route {route[:64]!r}: {error}") from None
        return self

    @property
    def is_app(self) -> bool:
        """A Slack app (bot token, channel ids), not webhooks."""
        return self.bot_token is not None

    def __repr__(self) -> str:  # never print webhook URLs, tokens or secrets
        app = "app=True, " if self.is_app else ""
        return f"SlackRoutes({app}routes={sorted(self.routes)})"

    __str__ = __repr__

    def channel_for(
        self, tags: dict[str, str], routing_tag_key: str, account: str | None = None, ou: str | None = None
    ) -> str:
        """The destination for a resource: a channel id (app form) or a webhook URL (webhook form). The route
        of its routing tag's value, else of its account (``account:<id>``), else of its account's OU
        (``ou:<id>``), else the default."""
        value = tags.get(routing_tag_key)
        for key in (value, f"account:{account}" if account else None, f"ou:{ou}" if ou else None):
            if key and key in self.routes:
                return self.routes[key]
        return self.default

    def webhook_for(self, tags: dict[str, str], routing_tag_key: str) -> str:
        """The webhook URL for a resource's tags (webhook form only: an app's channel id is not a URL)."""
        if self.is_app:
            raise SecretFormatError(
                "the Slack secret holds a Slack app, not webhooks: post through its channels"
            )
        return self.channel_for(tags, routing_tag_key)


def _url_checker(hosts: frozenset[str]) -> Callable[[str], object]:
    return lambda url: check_url(url, hosts)


def _channel_id(value: str) -> str:
    if not CHANNEL_ID.fullmatch(value):
        raise ValueError("with a bot token, a destination must be a Slack channel id (C... or G...)")
    return value


def parse_routes(secret: str, extra_hosts: Iterable[str] = ()) -> SlackRoutes:
    """The secret's routes; every webhook URL is checked against hooks.slack.com and ``extra_hosts``, every
    channel id of the app form against Slack's shape."""
    text = secret.strip()
    if not text:
        raise SecretFormatError("the Slack webhook secret is empty: put the webhook URL in it")
    try:
        hosts = allowed_hosts(extra_hosts)
    except ValueError as error:
        raise SecretFormatError(str(error)) from None
    if not text.startswith("{"):
        if "://" not in text:
            raise SecretFormatError("the Slack webhook secret must be an https:// URL or a JSON routing map")
        problem = _validate({"default": text}, hosts)
        if isinstance(problem, SlackRoutes):
            return problem
        raise SecretFormatError(f"the Slack webhook secret is not a usable webhook URL ({problem})")
    problem = _parse_map(text, hosts)
    if isinstance(problem, SlackRoutes):
        return problem
    # Raised outside the except block: no chained exception carries the secret's text.
    raise SecretFormatError(f"the Slack webhook secret is not a valid routing map ({problem})")


def _validate(data: object, hosts: frozenset[str]) -> SlackRoutes | str:
    try:
        return SlackRoutes.model_validate(data, context={"hosts": hosts})
    except ValidationError as error:
        return "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'map'}: {e['msg']}" for e in error.errors(include_input=False)
        )


def _parse_map(text: str, hosts: frozenset[str]) -> SlackRoutes | str:
    try:
        data = json.loads(text)
    except (ValueError, TypeError, RecursionError) as error:
        return type(error).__name__
    if isinstance(data, dict) and "webhook_url" in data and "default" not in data:
        data = {"default": data.pop("webhook_url"), **data}
    return _validate(data, hosts)
