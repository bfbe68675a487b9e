"""The webhook URL check parses the URL: https to hooks.slack.com (or an allowed host), plain http only for a
local sink. A prefix test let lookalike hosts, hosts hidden in the path and user info through."""

from __future__ import annotations

import json
import re

import pytest

from costguard.notify.delivery import WEBHOOK_HOSTS_VARIABLE, webhook_hosts
from costguard.notify.routing import SecretFormatError, SlackRoutes, check_url, parse_routes

REAL = "https://hooks.slack.com/services/T0000/B0000/realSECRETtoken"

REFUSED = {
    "https://hooks.slack.com.evil.com/services/T0/B0/SECRETtoken": "host must be hooks.slack.com",
    "https://evil.com/hooks.slack.com/services/T0/B0/SECRETtoken": "host must be hooks.slack.com",
    "https://evil.com?https://hooks.slack.com/services/T0/B0/SECRETtoken": "host must be hooks.slack.com",
    "https://user@evil.com": "user info",
    "https://user:SECRETtoken@evil.com/services/T0/B0/x": "user info",
    "https://hooks.slack.com@evil.com/services/T0/B0/SECRETtoken": "user info",
    "https://hooks.slack.com:SECRETtoken@evil.com/services/x": "user info",
    "http://hooks.slack.com/services/T0/B0/SECRETtoken": "plain http only for a local sink",
    "http://127.0.0.1.evil.com/services/T0/B0/SECRETtoken": "plain http only for a local sink",
    "http://localhost.evil.com/services/T0/B0/SECRETtoken": "plain http only for a local sink",
    "http://localhost@evil.com/services/T0/B0/SECRETtoken": "user info",
    "https://hooks.slack.com:8443/services/T0/B0/SECRETtoken": "https port",
    "https://hooks.slack.com": "must have a path",
    "https://hooks.slack.com/": "must have a path",
    "ftp://hooks.slack.com/services/T0/B0/SECRETtoken": "must be an https:// URL",
    "javascript://hooks.slack.com/%0aSECRETtoken": "must be an https:// URL",
    "https://hooks.slack.com\\@evil.com/services/SECRETtoken": "backslashes",
    "https://hooks.slack.com/services/T0/B0/SECRET token": "spaces",
    "https://hooks.slack.com./services/T0/B0/SECRETtoken": "host must be hooks.slack.com",
    "https://[::1]:99999/services/SECRETtoken": "valid URL",
}


@pytest.mark.parametrize(("url", "why"), REFUSED.items(), ids=list(REFUSED))
def test_a_webhook_that_is_not_slack_is_refused_with_a_clear_error(url: str, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        check_url(url)
    for secret in (url, json.dumps({"default": url}), json.dumps({"default": REAL, "routes": {"ml": url}})):
        with pytest.raises(SecretFormatError, match=re.escape(why)) as refused:
            parse_routes(secret)
        message = str(refused.value)
        assert "SECRETtoken" not in message  # the URL (its path, its user info) is never echoed
        assert refused.value.__cause__ is None


def test_a_refused_route_is_named() -> None:
    with pytest.raises(SecretFormatError, match="route 'ml-research'"):
        parse_routes(json.dumps({"default": REAL, "routes": {"ml-research": "https://evil.com/x"}}))


@pytest.mark.parametrize(
    "url",
    [
        REAL,
        "https://HOOKS.SLACK.COM/services/T0000/B0000/realSECRETtoken",
        "https://hooks.slack.com:443/services/T0000/B0000/realSECRETtoken",
        "https://hooks.slack.com/triggers/T0000/1234/abcd",  # a Workflow Builder webhook
        "http://127.0.0.1:8080/services/T000/B000/local",  # the local sink
        "http://localhost:9000/services/T000/B000/local",
    ],
)
def test_the_real_shapes_are_accepted(url: str) -> None:
    assert check_url(url) == url
    assert parse_routes(url).default == url
    assert parse_routes(json.dumps({"default": REAL, "routes": {"ml": url}})).routes == {"ml": url}


def test_an_allowed_host_is_accepted_only_when_configured() -> None:
    gov = "https://hooks.slack-gov.com/services/T0000/B0000/govSECRETtoken"
    with pytest.raises(SecretFormatError, match=r"host must be hooks\.slack\.com"):
        parse_routes(gov)
    assert parse_routes(gov, ["hooks.slack-gov.com"]).default == gov
    assert parse_routes(
        json.dumps({"default": REAL, "routes": {"gov": gov}}), ["Hooks.Slack-Gov.com "]
    ).routes
    # Exact names only: the allow-list does not admit subdomains or lookalikes.
    with pytest.raises(SecretFormatError):
        parse_routes("https://x.hooks.slack-gov.com/services/T0/B0/x", ["hooks.slack-gov.com"])


@pytest.mark.parametrize(
    "entry", ["*.slack.com", "evil.com/path", "https://hooks.slack-gov.com", "user@evil.com"]
)
def test_an_allow_list_entry_must_be_a_plain_host_name(entry: str) -> None:
    with pytest.raises(SecretFormatError, match="plain host name"):
        parse_routes(REAL, [entry])


def test_the_allow_list_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert webhook_hosts() == ()
    monkeypatch.setenv(WEBHOOK_HOSTS_VARIABLE, "hooks.slack-gov.com, hooks.example.org,")
    assert webhook_hosts() == ("hooks.slack-gov.com", " hooks.example.org")
    assert parse_routes("https://hooks.example.org/services/x", webhook_hosts()).default


def test_routes_built_directly_are_checked_too() -> None:
    with pytest.raises(ValueError, match=r"host must be hooks\.slack\.com"):
        SlackRoutes(default="https://hooks.slack.com.evil.com/services/x")
