"""The ops topic: what costguard cannot tell through Slack is told there, once (an unfilled webhook secret per
cold start; Slack refusing the app, or one channel, once a day across notifiers)."""

from __future__ import annotations

import os
from datetime import timedelta

from aws_lambda_powertools.metrics import MetricUnit

from costguard.aws import clients
from costguard.clock import now as clock_now
from costguard.notify.delivery import DeliveryError
from costguard.notify.slack_limits import RATE_LIMITED_ERRORS
from costguard.observability import logger, metrics
from costguard.permissions import needs
from costguard.settings import Settings

# The ops topic's ARN (the NotifierFunction's environment only); unset, the notice is logged and counted only.
OPS_TOPIC_VARIABLE = "COSTGUARD_OPS_TOPIC_ARN"


OPS_PERMISSIONS = needs("sns:Publish")  # tell_ops_once: the ops topic only


OPS_SUBJECT = "costguard: the Slack webhook secret is not filled in"


# The (secret, topic) pairs this process (one Lambda cold start) has told about already. A Lambda process has one
# of each; keyed, a local stack (a new secret ARN each time) starts afresh in the same test process.
_told: set[tuple[str, str]] = set()


def whole_app(error: Exception) -> bool:
    """Slack refused the app itself (its token, workspace or scopes, or its own rate limit past the retries)."""
    return bool(getattr(error, "whole_app", False))


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
    return _publish_ops(topic, OPS_SUBJECT, text)


OPS_APP_SUBJECT = "costguard: Slack refuses the costguard app"


OPS_TOLD_LIFETIME = timedelta(days=1)  # told again a day later if the refusal lasts


# What to fix, by Slack's answer.
_REINSTALL = (
    "Slack no longer accepts the app's bot token: the app was uninstalled, its token revoked, rotated or expired, "
    "or the workspace deactivated. Reinstall the app (api.slack.com/apps, OAuth & Permissions, Reinstall to "
    "Workspace) and put its new Bot User OAuth Token in the secret, with the rest of the secret as it was:\n"
    "  aws secretsmanager put-secret-value --secret-id {secret} --secret-string "
    '\'{{"bot_token": "xoxb-...", "signing_secret": "...", "default": "C...", "routes": {{...}}}}\'\n\n'
)


_SCOPE_FIX = (
    "The app lacks a scope it needs (README, Connecting Slack: chat:write, channels:history, groups:history, "
    "users:read, users:read.email, usergroups:read). Add it in the app's manifest, reinstall the app, and put the "
    "new bot token in the secret {secret}.\n\n"
)


_PARKED = (
    "Meanwhile no call is made with it: each notice is parked once in the failed-events queue. Once fixed, queue "
    "them again: costguard redrive --parked --stack <stack>. This is sent once a day at most while it lasts."
)


_RATE_FIX = (
    "Slack's Web API answers 'ratelimited' to the app (HTTP 200, ok: false) past costguard's own retries: the "
    "app is throttled across the workspace (another app or script sharing its token, or a flood of messages). "
    "Notices wait in the decisions queue and are retried; those that fail five receives wait in the dead-letter "
    "queue (costguard redrive --stack <stack>). This is sent once a day at most while it lasts."
)


def tell_ops_app_refused(problem: Exception, settings: Settings) -> bool:
    """Log, count and publish to the ops topic that Slack refuses the app itself (invalid_auth, token_revoked,
    account_inactive, missing_scope, its own rate limit...): once per refusal, across notifiers (a marker in the
    state table) and cold starts, for a day. Returns whether the ops topic took the message; never raises."""
    code = str(getattr(problem, "error", None) or type(problem).__name__)
    topic = os.environ.get(OPS_TOPIC_VARIABLE, "").strip()
    if (f"slack-app:{code}", topic) in _told:
        return False
    _told.add((f"slack-app:{code}", topic))
    logger.error(
        "Slack refuses the app", extra={"error": code, "problem": str(problem), "ops_topic": topic or None}
    )
    metrics.add_metric(name="SlackAppRefused", unit=MetricUnit.Count, value=1)
    if not topic or not _first_to_tell(settings, f"slack-app:{code}"):
        return False
    secret = settings.slack_secret_id
    if code in RATE_LIMITED_ERRORS:
        fix = _RATE_FIX
    else:
        fix = (_SCOPE_FIX if code in ("missing_scope", "no_permission") else _REINSTALL).format(secret=secret)
        fix += _PARKED
    text = f"costguard cannot post to Slack: Slack answers '{code}' ({problem}).\n\n{fix}"
    return _publish_ops(topic, OPS_APP_SUBJECT, text)


OPS_CHANNEL_SUBJECT = "costguard: Slack refuses a channel"


_CHANNEL_FIX = {
    "not_in_channel": "the app's bot is no longer a member of it (removed, or never invited)",
    "channel_not_found": "Slack knows no such channel (deleted, or the id in the secret's routes is wrong)",
    "is_archived": "the channel is archived",
    "channel_is_archived": "the channel is archived",
}


def tell_ops_channel_refused(channel: str, code: str, parked: int, settings: Settings) -> bool:
    """Publish to the ops topic, once a day per channel and answer across notifiers, that Slack refuses the app
    in one channel (the others are told as usual): which channel, Slack's answer, how many notices this batch
    parked, and the fix. Logged and counted each time; returns whether the ops topic took the message."""
    topic = os.environ.get(OPS_TOPIC_VARIABLE, "").strip()
    what = f"slack-channel:{channel}:{code}"
    logger.error(
        "Slack refuses a channel",
        extra={"channel": channel, "error": code, "parked": parked, "ops_topic": topic or None},
    )
    metrics.add_metric(name="SlackChannelRefused", unit=MetricUnit.Count, value=1)
    if (what, topic) in _told or not topic or not _first_to_tell(settings, what):
        return False
    _told.add((what, topic))
    why = _CHANNEL_FIX.get(code, f"Slack answers '{code}'")
    text = (
        f"costguard cannot post in Slack channel {channel}: Slack answers '{code}': {why}.\n\n"
        f"{parked} notice(s) routed there were parked in the failed-events queue by this delivery; each later one "
        "is parked the same way, and the other channels are told as usual.\n\n"
        f"Fix: invite the app to the channel (/invite @costguard in {channel}), or change the route that names it "
        f"in the Slack secret {settings.slack_secret_id} ('routes', or 'default'). Then queue the parked notices "
        "again: costguard redrive --parked --stack <stack>. This is sent once a day at most per channel while it "
        "lasts."
    )
    return _publish_ops(topic, OPS_CHANNEL_SUBJECT, text)


def _publish_ops(topic: str, subject: str, text: str) -> bool:
    """One message to the ops topic; whether it took it (a refusal is logged, never raised)."""
    try:
        clients.client("sns").publish(TopicArn=topic, Subject=subject, Message=text)
    except Exception as failed:
        logger.error(
            "ops topic refused the message", extra={"ops_topic": topic, "cause": type(failed).__name__}
        )
        return False
    return True


def _first_to_tell(settings: Settings, what: str) -> bool:
    """Whether this notifier is the first to tell ``what`` today (a conditional write in the state table); told
    anyway when the table cannot say."""
    now = clock_now()
    try:
        clients.client("dynamodb").put_item(
            TableName=settings.state_table,
            Item={
                "id": {"S": f"ops#{what}"},
                "expiration": {"N": str(int((now + OPS_TOLD_LIFETIME).timestamp()))},
            },
            ConditionExpression="attribute_not_exists(id) OR expiration < :now",
            ExpressionAttributeValues={":now": {"N": str(int(now.timestamp()))}},
        )
    except Exception as error:
        code = getattr(error, "response", {}).get("Error", {}).get("Code")
        return bool(code != "ConditionalCheckFailedException")
    return True
