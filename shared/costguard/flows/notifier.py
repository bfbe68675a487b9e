"""The notifier: a queued notice becomes one Slack message on the right channel."""

from __future__ import annotations

from costguard.notify.delivery import SECRET_PERMISSIONS, load_routes, post
from costguard.notify.message import build_message
from costguard.notify.notice import Notice
from costguard.settings import Settings

DELIVER_PERMISSIONS = SECRET_PERMISSIONS  # deliver


def deliver(notice: Notice, settings: Settings) -> None:
    """Post the notice's message.

    Raises PermanentDeliveryError when another try would meet the same answer (Slack refused the message with
    a 4xx other than 429, or the webhook secret is malformed), DeliveryError when it might not.
    """
    routes = load_routes(settings.slack_secret_id)
    url = routes.webhook_for(notice.decision.resource.tags, settings.routing_tag_key)
    post(url, build_message(notice))
