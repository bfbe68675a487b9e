"""Which webhook a message goes to: one webhook, or a map from a routing tag's value to webhooks."""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class SecretFormatError(ValueError):
    """The Slack secret is neither a webhook URL nor a routing map (its content is never echoed)."""


class SlackRoutes(BaseModel):
    """The secret's content: ``{"default": url, "routes": {"ml-research": url, ...}}`` or one URL."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    default: str = Field(min_length=1)
    routes: dict[str, str] = Field(default_factory=dict)

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
    if text.startswith("{"):
        try:
            data = json.loads(text)
            if "webhook_url" in data and "default" not in data:
                data = {"default": data.pop("webhook_url"), **data}
            return SlackRoutes.model_validate(data)
        except (ValueError, ValidationError, TypeError) as error:
            kind = type(error).__name__
            raise SecretFormatError(f"the Slack webhook secret is not a valid routing map ({kind})") from None
    if not text.startswith(("https://", "http://")):
        raise SecretFormatError("the Slack webhook secret must be a URL or a JSON routing map")
    return SlackRoutes(default=text)
