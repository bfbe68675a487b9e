"""The interactions queue's records, carried out (functions/interaction_actions is its entry point)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from costguard.act.aws import AwsRemediator
from costguard.act.limits import PERMISSIONS as STOP_CAP_PERMISSIONS
from costguard.act.limits import DynamoStopLimiter
from costguard.aws import inventory
from costguard.aws.sagemaker import STOP_TRAINING_JOB_PERMISSIONS
from costguard.interact import resources, state
from costguard.interact.actions import Interactions, Result, UnreadableClick, carry_out, click_of
from costguard.interact.authorize import Allowed
from costguard.notify.delivery import SECRET_PERMISSIONS, load_routes
from costguard.notify.queue import PERMISSIONS as QUEUE_PERMISSIONS
from costguard.notify.queue import SqsNoticeQueue
from costguard.notify.slack_api import api_for
from costguard.permissions import needs
from costguard.policy import Policy
from costguard.pricing import price_book
from costguard.settings import Settings

# The stops a click may make: the executor's calls (AwsRemediator.stop), the read of an instance's stop
# protection before it, and the hourly cap. Never a mark or an unmark: only the snooze and protect tags.
STOP_PERMISSIONS = (
    needs("ec2:StopInstances", "sagemaker:StopNotebookInstance")
    | STOP_TRAINING_JOB_PERMISSIONS
    | inventory.STOP_PROTECTION_PERMISSIONS
    | STOP_CAP_PERMISSIONS
)
PERMISSIONS = (
    SECRET_PERMISSIONS  # the bot token: replies, owner and user group look-ups
    | resources.READ_PERMISSIONS
    | resources.TAG_PERMISSIONS
    | state.RECORD_PERMISSIONS
    | state.MUTE_PERMISSIONS
    | QUEUE_PERMISSIONS
    | STOP_PERMISSIONS
)


def interactions(settings: Settings, allowed: Allowed) -> Interactions:
    """What carrying clicks out needs (the Slack secret is read here: the entry point builds it on first use)."""
    return Interactions(
        table=settings.state_table,
        policy=Policy(
            dry_run=settings.dry_run,
            protect_tag_key=settings.protect_tag_key,
            grace=timedelta(minutes=settings.grace_minutes),
            max_stops=settings.max_stops_per_run,
        ),
        allowed=allowed,
        slack=api_for(load_routes(settings.slack_secret_id)),
        queue=SqsNoticeQueue(settings.decisions_queue_url),
        remediator=AwsRemediator(),
        prices=price_book(
            live=False
        ),  # the bundled table: an hourly figure for the thread, no Price List call
        limiter=DynamoStopLimiter(settings.state_table, settings.max_stops_per_hour),
    )


def handle_record(body: str, deps: Interactions, now: datetime) -> Result:
    """One queued interaction. An unreadable one raises UnreadableClick: the entry point logs it with its
    message id, counts it, and leaves it to the queue's dead-letter queue, where it is kept."""
    try:
        message: dict[str, Any] = json.loads(body)
        click = click_of(message["payload"])
    except UnreadableClick:
        raise
    except (ValueError, KeyError, TypeError) as error:
        raise UnreadableClick(f"not a queued interaction: {type(error).__name__}") from None
    return carry_out(click, deps, now)
