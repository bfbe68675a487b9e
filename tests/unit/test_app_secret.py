"""The Slack secret's app form: a bot token, a signing secret and channel ids, never printed; the webhook form
still reads as before."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from costguard.notify.routing import SecretFormatError, SlackRoutes, parse_routes

TOKEN = "xoxb-1234567890-0987654321-tokenSECRETvalue"
SIGNING = "abcdef0123456789signingSECRET"
WEBHOOK = "https://hooks.slack.com/services/T0000/B0000/webhookSECRETtoken"
APP: dict[str, Any] = {
    "bot_token": TOKEN,
    "signing_secret": SIGNING,
    "default": "C0123ABCD",
    "routes": {"ml-research": "C0456EFGH", "private": "G0789IJKLM"},
}


def _secret(**changes: Any) -> str:
    data = {**APP, **changes}
    return json.dumps({k: v for k, v in data.items() if v is not None})


def _never_shows_secrets(text: str) -> None:
    for secret in ("SECRET", "xoxb-1", "xoxp-1", "hooks.slack.com"):
        assert secret not in text


def test_the_app_form_is_read() -> None:
    routes = parse_routes(_secret())
    assert routes.is_app
    assert routes.bot_token == TOKEN
    assert routes.signing_secret == SIGNING
    assert routes.default == "C0123ABCD"
    assert routes.routes == {"ml-research": "C0456EFGH", "private": "G0789IJKLM"}


def test_channel_for_picks_the_channel_by_tag_value_and_falls_back_to_default() -> None:
    routes = parse_routes(_secret())
    assert routes.channel_for({"team": "ml-research"}, "team") == "C0456EFGH"
    assert routes.channel_for({"team": "private"}, "team") == "G0789IJKLM"
    assert routes.channel_for({"team": "platform"}, "team") == "C0123ABCD"
    assert routes.channel_for({"team": ""}, "team") == "C0123ABCD"
    assert routes.channel_for({}, "team") == "C0123ABCD"


def test_channel_for_gives_the_webhook_in_the_webhook_form() -> None:
    research = WEBHOOK.replace("B0000", "B1111")
    routes = parse_routes(json.dumps({"default": WEBHOOK, "routes": {"ml-research": research}}))
    assert not routes.is_app
    assert routes.bot_token is None
    assert routes.signing_secret is None
    assert routes.channel_for({"team": "ml-research"}, "team") == research
    assert routes.channel_for({"team": "platform"}, "team") == WEBHOOK
    assert routes.webhook_for({"team": "ml-research"}, "team") == research
    assert parse_routes(WEBHOOK).channel_for({}, "team") == WEBHOOK


def test_webhook_for_refuses_the_app_form_rather_than_give_a_channel_id_as_a_url() -> None:
    with pytest.raises(SecretFormatError, match="Slack app, not webhooks") as refused:
        parse_routes(_secret()).webhook_for({}, "team")
    _never_shows_secrets(str(refused.value))


def test_the_signing_secret_is_optional() -> None:
    routes = parse_routes(_secret(signing_secret=None))
    assert routes.is_app
    assert routes.signing_secret is None


BAD = {
    "user token": (_secret(bot_token="xoxp-1234-tokenSECRETvalue"), "xoxb-"),
    "no prefix": (_secret(bot_token="tokenSECRETvalue"), "xoxb-"),
    "token with a space": (_secret(bot_token="xoxb-12 tokenSECRET"), "xoxb-"),
    "empty token": (_secret(bot_token=""), "xoxb-"),
    "channel name": (_secret(default="#alerts"), "channel id"),
    "lower-case id": (_secret(default="c0123abcd"), "channel id"),
    "user id": (_secret(default="U0123ABCD"), "channel id"),
    "short id": (_secret(default="C0123"), "channel id"),
    "webhook as route": (_secret(routes={"ml": WEBHOOK}), "route 'ml'"),
    "webhook as default": (_secret(default=WEBHOOK), "channel id"),
    "signing secret too short": (_secret(signing_secret="shortSECRET"), "signing secret"),
    "signing secret with symbols": (_secret(signing_secret="abcdef0123456789-SECRET!"), "signing secret"),
    "signing secret without token": (
        json.dumps({"default": WEBHOOK, "signing_secret": SIGNING}),
        "needs a bot token",
    ),
    "unknown key": (_secret(app_token="xapp-1-SECRET"), "app_token"),
}


@pytest.mark.parametrize(("secret", "why"), BAD.values(), ids=list(BAD))
def test_a_bad_app_secret_is_refused_without_echoing_it(secret: str, why: str) -> None:
    with pytest.raises(SecretFormatError, match=re.escape(why)) as refused:
        parse_routes(secret)
    _never_shows_secrets(str(refused.value))
    assert refused.value.__cause__ is None


def test_a_model_built_directly_never_echoes_the_token_in_its_error() -> None:
    with pytest.raises(ValueError, match="xoxb-") as refused:
        SlackRoutes(default="C0123ABCD", bot_token="xoxb-12 tokenSECRET")
    assert "tokenSECRET" not in str(refused.value)
    with pytest.raises(ValueError, match="channel id") as refused:
        SlackRoutes(default="#general-SECRET", bot_token=TOKEN)
    assert "SECRET" not in str(refused.value)


def test_the_app_form_never_prints_its_token_secret_or_channels() -> None:
    routes = parse_routes(_secret())
    for shown in (repr(routes), str(routes), f"{routes}", f"{routes!r}", repr([routes])):
        _never_shows_secrets(shown)
        assert "C0123ABCD" not in shown
    assert "ml-research" in repr(routes)
    assert "app=True" in repr(routes)
    assert "app=True" not in repr(parse_routes(WEBHOOK))
