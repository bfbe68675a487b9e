"""The interactions queue's records, carried out (functions/interaction_actions is its entry point)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from costguard.act.aws import AwsRemediator
from costguard.act.ledger_book import WRITE_PERMISSIONS as LEDGER_PERMISSIONS
from costguard.act.ledger_book import DynamoLedger
from costguard.act.limits import PERMISSIONS as STOP_CAP_PERMISSIONS
from costguard.act.limits import DynamoStopLimiter
from costguard.act.marks import PERMISSIONS as MARK_RECORD_PERMISSIONS
from costguard.act.marks import DynamoMarkRecords
from costguard.aws import inventory
from costguard.aws.sagemaker import STOP_TRAINING_JOB_PERMISSIONS
from costguard.detect.gpu import thresholds_from
from costguard.interact import offers, rejudge, resources, state
from costguard.interact.actions import Interactions, Result, UnreadableClick, carry_out, click_of
from costguard.interact.authorize import Allowed
from costguard.interact.offers import DynamoOffers
from costguard.interact.rejudge import SweepRejudge
from costguard.interact.verify import Unauthorized, verify_body
from costguard.notify.delivery import SECRET_PERMISSIONS, load_routes
from costguard.notify.queue import PERMISSIONS as QUEUE_PERMISSIONS
from costguard.notify.queue import SqsNoticeQueue
from costguard.notify.slack_api import api_for
from costguard.permissions import needs
from costguard.policy import policy_from
from costguard.pricing import price_book
from costguard.settings import Settings

# The stops a click may make: the executor's calls (AwsRemediator.stop), the read of an instance's stop
# protection before it, and the hourly cap. Never a mark or an unmark: only the snooze and protect tags.
STOP_PERMISSIONS = (
    needs("ec2:StopInstances", "sagemaker:StopNotebookInstance")
    | STOP_TRAINING_JOB_PERMISSIONS
    | inventory.STOP_PROTECTION_PERMISSIONS
    | STOP_CAP_PERMISSIONS
    | MARK_RECORD_PERMISSIONS
    | LEDGER_PERMISSIONS
)
PERMISSIONS = (
    SECRET_PERMISSIONS  # the bot token: replies, owner and user group look-ups
    | resources.READ_PERMISSIONS
    | resources.TAG_PERMISSIONS
    | state.RECORD_PERMISSIONS
    | state.MUTE_PERMISSIONS
    | QUEUE_PERMISSIONS
    | STOP_PERMISSIONS
    | offers.READ_PERMISSIONS
    | rejudge.PERMISSIONS
)


class UnverifiedClick(UnreadableClick):
    """A queued message whose Slack signature does not hold (or is too old for when it was queued): not a
    request Slack sent, whoever could write to the queue. Nothing is done; the message is kept."""


@dataclass(frozen=True)
class Worker:
    """The actions worker's parts: the signing secret it verifies every message with, and the clicks' deps."""

    signing_secret: str
    deps: Interactions


def worker(settings: Settings, allowed: Allowed) -> Worker:
    """The worker (the Slack secret is read here: the entry point builds it on first use). A secret without a
    signing secret (the webhook form) verifies nothing, so every message fails and is kept."""
    secret = load_routes(settings.slack_secret_id).signing_secret
    if not secret:
        raise UnverifiedClick("the Slack secret holds no signing secret: no interaction can be verified")
    return Worker(signing_secret=secret, deps=interactions(settings, allowed))


def interactions(settings: Settings, allowed: Allowed) -> Interactions:
    """What carrying clicks out needs."""
    return Interactions(
        table=settings.state_table,
        policy=policy_from(settings),  # Mode, ReasonModes and RemediateScope, as a sweep's
        allowed=allowed,
        slack=api_for(load_routes(settings.slack_secret_id)),
        queue=SqsNoticeQueue(settings.decisions_queue_url, settings.urgent_queue_url),
        remediator=AwsRemediator(),
        prices=price_book(
            live=False
        ),  # the bundled table: an hourly figure for the thread, no Price List call
        limiter=DynamoStopLimiter(settings.state_table, settings.max_stops_per_hour),
        offers=DynamoOffers(settings.state_table),
        rejudge=SweepRejudge(thresholds_from(settings)),
        records=DynamoMarkRecords(settings.state_table),
        ledger=DynamoLedger(
            settings.state_table,
            team_key=settings.routing_tag_key,
            retention_days=settings.ledger_retention_days,
        ),
    )


def sent_at(attributes: dict[str, Any]) -> datetime:
    """When SQS took the message from the endpoint (its SentTimestamp, set by SQS: no sender can choose it)."""
    try:
        return datetime.fromtimestamp(int(attributes["SentTimestamp"]) / 1000, UTC)
    except (KeyError, TypeError, ValueError):
        raise UnverifiedClick("the message has no SentTimestamp: its age cannot be checked") from None


def verified_payload(body: str, secret: str, queued_at: datetime) -> dict[str, Any]:
    """The interaction a queued message carries, once its Slack signature holds as of when it was queued (the
    endpoint's age limit, measured from then). Raises UnverifiedClick (kept), or UnreadableClick."""
    try:
        message: dict[str, Any] = json.loads(body)
        raw, stamp, signature = message["body"], message["timestamp"], message["signature"]
        if not all(isinstance(v, str) for v in (raw, stamp, signature)):
            raise TypeError("body, timestamp and signature must be text")
        encoded = raw.encode("ascii")
    except (ValueError, KeyError, TypeError) as error:
        raise UnverifiedClick(f"not a signed interaction: {type(error).__name__}") from None
    try:
        return verify_body(encoded, stamp, signature, secret, queued_at)
    except Unauthorized as refused:
        raise UnverifiedClick(f"{type(refused).__name__}: {refused.why}") from None


def handle_record(body: str, attributes: dict[str, Any], work: Worker, now: datetime) -> Result:
    """One queued interaction, verified again here. An unverifiable or unreadable one raises UnreadableClick
    (UnverifiedClick): the entry point logs it with its message id, counts it, and leaves it to the queue's
    dead-letter queue, where it is kept; nothing is changed."""
    payload = verified_payload(body, work.signing_secret, sent_at(attributes))
    return carry_out(click_of(payload), work.deps, now)
