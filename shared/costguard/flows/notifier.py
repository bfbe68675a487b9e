"""The notifier: a queued notice becomes one Slack message on the right channel."""

from __future__ import annotations

from costguard.notify.delivery import SECRET_PERMISSIONS, load_routes, post
from costguard.notify.message import build_message
from costguard.notify.notice import Notice
from costguard.settings import Settings

DELIVER_PERMISSIONS = SECRET_PERMISSIONS  # deliver


def deliver(notice: Notice, settings: Settings) -> None:
    routes = load_routes(settings.slack_secret_id)
    url = routes.webhook_for(notice.decision.resource.tags, settings.routing_tag_key)
    post(url, build_message(notice))
