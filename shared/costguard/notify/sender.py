"""One destination's sender: a channel through the Web API, or a webhook (no threads, no look-ups)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from costguard.notify.delivery import post
from costguard.notify.message import OWNER_TAG
from costguard.notify.notice import Notice

if TYPE_CHECKING:
    from costguard.notify.slack_api import SlackApi


# The webhook client's timeout (delivery.webhook_client): what one webhook call may take before its retries.
WEBHOOK_TIMEOUT_SECONDS = 10


class Sender:
    """The final calls for one destination: a webhook post, or the Slack app's posts, look-ups and updates."""

    def __init__(self, destination: str, api: SlackApi | None, *, buttons: bool = True) -> None:
        self.destination = destination
        self.api = api  # when the secret holds the app's token
        self.buttons = buttons  # the app's interactions endpoint is deployed: a click reaches costguard

    @property
    def threads(self) -> bool:
        return self.api is not None

    @property
    def interactive(self) -> bool:
        """Messages carry buttons: posted as the app, whose clicks costguard receives (SlackApp=on)."""
        return self.api is not None and self.buttons

    @property
    def channel(self) -> str | None:
        """The channel id posted to (Slack app); a webhook has none to record."""
        return self.destination if self.api is not None else None

    @property
    def worst(self) -> float:
        """The longest the next call may take with its retries: no new post starts unless it fits."""
        from costguard.notify.slack_api import worst_call_seconds

        return worst_call_seconds(self.api.timeout if self.api is not None else WEBHOOK_TIMEOUT_SECONDS)

    def owner(self, notice: Notice) -> str | None:
        tag = notice.decision.resource.tags.get(OWNER_TAG, "").strip()
        if not tag or self.api is None:
            return None
        try:
            return self.api.user_for(tag)
        except Exception:  # an owner nobody can resolve falls back to the channel
            return None

    def send(
        self,
        message: dict[str, Any],
        *,
        key: str | None = None,
        thread_ts: str | None = None,
        look_first: bool = False,
    ) -> str | None:
        """Post ``message``: through the webhook (no ts), or as the app, once for ``key`` (SlackApi.post_once)."""
        if self.api is None:
            post(self.destination, message)
            return None
        if key is None:
            return self.api.post(self.destination, message, thread_ts)
        return self.api.post_once(
            self.destination, message, key=key, thread_ts=thread_ts, look_first=look_first
        )

    def find(self, key: str, thread_ts: str | None = None) -> str | None:
        return self.api.find(self.destination, key, thread_ts) if self.api is not None else None

    def update(self, ts: str, message: dict[str, Any]) -> None:
        if self.api is not None:
            self.api.update(self.destination, ts, message)
