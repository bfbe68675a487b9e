"""Entry point: the scheduled training-job sweep (cost ceilings every 15 minutes, the digest after midnight UTC)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from costguard import clock
from costguard.aws import presence
from costguard.entry import PARSE_PERMISSIONS
from costguard.events.scheduled import ScheduledEvent
from costguard.flows.org import (
    ASSUME_PERMISSIONS,
    FAN_OUT_PERMISSIONS,
    SWEEP_INTERVALS,
    SweepItem,
    check_settings,
)
from costguard.flows.training_ceilings import SCHEDULE_PERMISSIONS, handle_schedule, sweep_region
from costguard.handler import OrgSweep, event_handler
from costguard.pipeline import Report
from costguard.runtime import runtime
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = (
    PARSE_PERMISSIONS
    | SCHEDULE_PERMISSIONS
    | FAN_OUT_PERMISSIONS
    | ASSUME_PERMISSIONS
    | presence.TRAINING_PERMISSIONS
)

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(
    check_settings(get_settings()), "state_table", "decisions_queue_url", "failed_events_queue_url"
)


def on_schedule(event: ScheduledEvent) -> dict[str, Any]:
    return handle_schedule(
        runtime(),
        clock.now(),
        account=event.account,
        default_region=event.region,
        scheduled_at=event.time,
        event_id=event.id,
    ).summary()


def sweep_one(item: SweepItem, now: datetime) -> Report:
    """An organization sweep's work item: one account and region."""
    return sweep_region(
        runtime(),
        now,
        account=item.account,
        region=item.region,
        scheduled_at=item.time,
        event_id=item.event_id,
    )


lambda_handler = event_handler(
    "training_ceilings",
    {ScheduledEvent: on_schedule},
    sweep=OrgSweep(
        "training_ceilings",
        sweep_one,
        settings,
        interval=SWEEP_INTERVALS["training_ceilings"],
        probe=presence.training_jobs,
    ),
)
