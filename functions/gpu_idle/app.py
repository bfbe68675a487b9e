"""Entry point: a GPU-idle alarm entering ALARM, and the scheduled sweep over every GPU instance."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from costguard import clock
from costguard.aws import presence
from costguard.entry import ONCE_PERMISSIONS, PARSE_PERMISSIONS, OncePerEvent
from costguard.events.cloudwatch import AlarmNotification, AlarmStateChange
from costguard.events.scheduled import ScheduledEvent
from costguard.flows.gpu import VERDICT_PERMISSIONS, evaluate, handle_alarm, handle_sweep
from costguard.flows.org import (
    ASSUME_PERMISSIONS,
    FAN_OUT_PERMISSIONS,
    SWEEP_INTERVALS,
    SweepItem,
    check_settings,
)
from costguard.handler import OrgSweep, event_handler
from costguard.pipeline import Report
from costguard.runtime import runtime
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = (
    PARSE_PERMISSIONS
    | ONCE_PERMISSIONS
    | VERDICT_PERMISSIONS
    | FAN_OUT_PERMISSIONS
    | ASSUME_PERMISSIONS
    | presence.GPU_PERMISSIONS
)

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(
    check_settings(get_settings()), "state_table", "decisions_queue_url", "failed_events_queue_url"
)


def on_alarm(event: AlarmStateChange) -> dict[str, Any]:
    return handle_alarm(event, runtime(), clock.now()).summary()


def on_schedule(event: ScheduledEvent) -> dict[str, Any]:
    return handle_sweep(runtime(), clock.now(), event.region, event.id).summary()


def sweep_one(item: SweepItem, now: datetime) -> Report:
    """An organization sweep's work item: one account and region."""
    return evaluate(item.region, runtime(), now, event_id=item.event_id)


lambda_handler = event_handler(
    "gpu_idle",
    {AlarmStateChange: OncePerEvent(on_alarm), ScheduledEvent: on_schedule},
    converts={AlarmNotification: AlarmNotification.as_state_change},  # an SNS alarm action: the same change
    sweep=OrgSweep("gpu", sweep_one, settings, interval=SWEEP_INTERVALS["gpu"], probe=presence.gpu_instances),
)
