"""The notifier: a queued notice becomes one Slack message on the right channel.

A webhook secret nobody filled in (created empty by the stack, or blank) cannot be told through Slack: the first
notice that meets it, once per cold start, publishes one message to the ops topic (the ``OpsNotificationsTopic``
the stack creates, subscribe an email to it), logs ``Slack webhook secret not filled`` and counts
``SlackSecretNotFilled``. The notice itself goes on as before: retried while the secret has no value, parked
when it is blank.
"""

from __future__ import annotations

import os

from aws_lambda_powertools.metrics import MetricUnit

from costguard.aws import clients
from costguard.notify.delivery import (
    SECRET_PERMISSIONS,
    UNFILLED_SECRET_ERRORS,
    DeliveryError,
    load_routes,
    post,
)
from costguard.notify.message import build_message
from costguard.notify.notice import Notice
from costguard.observability import logger, metrics
from costguard.permissions import needs
from costguard.settings import Settings

# The ops topic's ARN (the NotifierFunction's environment only); unset, the notice is logged and counted only.
OPS_TOPIC_VARIABLE = "COSTGUARD_OPS_TOPIC_ARN"
OPS_PERMISSIONS = needs("sns:Publish")  # tell_ops_once: the ops topic only
DELIVER_PERMISSIONS = SECRET_PERMISSIONS | OPS_PERMISSIONS  # deliver

OPS_SUBJECT = "costguard: the Slack webhook secret is not filled in"


# The (secret, topic) pairs this process (one Lambda cold start) has told about already. A Lambda process has one
# of each; keyed, a local stack (a new secret ARN each time) starts afresh in the same test process.
_told: set[tuple[str, str]] = set()


def deliver(notice: Notice, settings: Settings) -> None:
    """Post the notice's message.

    Raises PermanentDeliveryError when another try would meet the same answer (Slack refused the message with
    a 4xx other than 429, or the webhook secret is malformed), DeliveryError when it might not.
    """
    try:
        routes = load_routes(settings.slack_secret_id)
    except UNFILLED_SECRET_ERRORS as unfilled:
        tell_ops_once(unfilled, settings)
        raise
    url = routes.webhook_for(notice.decision.resource.tags, settings.routing_tag_key)
    post(url, build_message(notice))


def tell_ops_once(problem: DeliveryError, settings: Settings) -> bool:
    """Log, count and publish to the ops topic that the webhook secret is not filled: once per cold start.

    Returns whether the ops topic took the message. A failure to publish is logged, never raised: the notice's
    own fate (retried or parked) does not depend on it.
    """
    secret = settings.slack_secret_id
    topic = os.environ.get(OPS_TOPIC_VARIABLE, "").strip()
    if (secret, topic) in _told:
        return False
    _told.add((secret, topic))
    logger.error(
        "Slack webhook secret not filled",
        extra={"secret": secret, "problem": str(problem), "ops_topic": topic or None},
    )
    metrics.add_metric(name="SlackSecretNotFilled", unit=MetricUnit.Count, value=1)
    if not topic:
        return False
    text = (
        f"costguard cannot post to Slack: {problem}.\n\n"
        f"Secret: {secret}\n"
        "Put the Slack incoming-webhook URL (or a routing map) in it:\n"
        f"  aws secretsmanager put-secret-value --secret-id {secret} "
        "--secret-string 'https://hooks.slack.com/services/...'\n\n"
        "Notices wait meanwhile: while the secret has no value they are retried, then kept in the decisions "
        "dead-letter queue (costguard redrive); a blank secret parks them in the failed-events queue "
        "(costguard redrive --parked). This message is sent at most once per notifier cold start."
    )
    try:
        clients.client("sns").publish(TopicArn=topic, Subject=OPS_SUBJECT, Message=text)
    except Exception as failed:
        logger.error(
            "ops topic refused the message", extra={"ops_topic": topic, "cause": type(failed).__name__}
        )
        return False
    return True
