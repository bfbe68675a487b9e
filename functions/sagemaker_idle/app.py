"""Entry point: the scheduled sweep over SageMaker training jobs, notebook instances and endpoints."""

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
from costguard.flows.sagemaker import SWEEP_PERMISSIONS, evaluate, handle_sweep
from costguard.handler import OrgSweep, event_handler
from costguard.pipeline import Report
from costguard.runtime import runtime
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = (
    PARSE_PERMISSIONS
    | SWEEP_PERMISSIONS
    | FAN_OUT_PERMISSIONS
    | ASSUME_PERMISSIONS
    | presence.SAGEMAKER_PERMISSIONS
)

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(
    check_settings(get_settings()), "state_table", "decisions_queue_url", "failed_events_queue_url"
)


def on_schedule(event: ScheduledEvent) -> dict[str, Any]:
    return handle_sweep(runtime(), clock.now(), event.region, event.id).summary()


def sweep_one(item: SweepItem, now: datetime) -> Report:
    """An organization sweep's work item: one account and region."""
    return evaluate(item.region, runtime(), now, item.event_id)


lambda_handler = event_handler(
    "sagemaker_idle",
    {ScheduledEvent: on_schedule},
    sweep=OrgSweep(
        "sagemaker",
        sweep_one,
        settings,
        interval=SWEEP_INTERVALS["sagemaker"],
        probe=presence.sagemaker_resources,
    ),
)
