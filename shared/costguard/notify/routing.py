"""Which webhook a message goes to: one webhook, or a map from a routing tag's value to webhooks."""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

_WEBHOOK_SCHEMES = ("https://", "http://127.0.0.1", "http://localhost")  # plain http only for a local sink


def _check_url(url: str) -> str:
    if not url.startswith(_WEBHOOK_SCHEMES):
        raise ValueError("a webhook must be an https:// URL")
    return url


class SecretFormatError(ValueError):
    """The Slack secret is neither a webhook URL nor a routing map (its content is never echoed)."""


class SlackRoutes(BaseModel):
    """The secret's content: ``{"default": url, "routes": {"ml-research": url, ...}}`` or one URL."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    default: str = Field(min_length=1)
    routes: dict[str, str] = Field(default_factory=dict)

    @field_validator("default")
    @classmethod
    def _default_is_url(cls, value: str) -> str:
        return _check_url(value)

    @field_validator("routes")
    @classmethod
    def _routes_are_urls(cls, value: dict[str, str]) -> dict[str, str]:
        for url in value.values():
            _check_url(url)
        return value

    def __repr__(self) -> str:  # never print webhook URLs
        return f"SlackRoutes(routes={sorted(self.routes)})"

    __str__ = __repr__

    def webhook_for(self, tags: dict[str, str], routing_tag_key: str) -> str:
        value = tags.get(routing_tag_key)
        return self.routes.get(value, self.default) if value else self.default


def parse_routes(secret: str) -> SlackRoutes:
    text = secret.strip()
    if not text:
        raise SecretFormatError("the Slack webhook secret is empty: put the webhook URL in it")
    if not text.startswith("{"):
        if not text.startswith(_WEBHOOK_SCHEMES):
            raise SecretFormatError("the Slack webhook secret must be an https:// URL or a JSON routing map")
        return SlackRoutes(default=text)
    problem = _parse_map(text)
    if isinstance(problem, SlackRoutes):
        return problem
    # Raised outside the except block: no chained exception carries the secret's text.
    raise SecretFormatError(f"the Slack webhook secret is not a valid routing map ({problem})")


def _parse_map(text: str) -> SlackRoutes | str:
    try:
        data = json.loads(text)
        if isinstance(data, dict) and "webhook_url" in data and "default" not in data:
            data = {"default": data.pop("webhook_url"), **data}
        return SlackRoutes.model_validate(data)
    except ValidationError as error:
        return "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'map'}: {e['msg']}" for e in error.errors(include_input=False)
        )
    except (ValueError, TypeError) as error:
        return type(error).__name__
