"""Entry point: the savings ledger's daily run (yesterday's line; on Mondays, each team's week; the metrics)."""

from __future__ import annotations

from typing import Any

from costguard import clock
from costguard.entry import PARSE_PERMISSIONS
from costguard.events.scheduled import ScheduledEvent
from costguard.flows.ledger_report import PERMISSIONS as REPORT_PERMISSIONS
from costguard.flows.ledger_report import handle_schedule
from costguard.handler import event_handler
from costguard.runtime import runtime
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = PARSE_PERMISSIONS | REPORT_PERMISSIONS

# Validated at cold start: a bad variable, or a table or queue it needs unset, fails here, named.
settings = require(get_settings(), "state_table", "decisions_queue_url", "failed_events_queue_url")


def on_schedule(event: ScheduledEvent) -> dict[str, Any]:
    return handle_schedule(
        runtime(), clock.now(), account=event.account, region=event.region, event_id=event.id
    ).summary()


lambda_handler = event_handler("ledger_report", {ScheduledEvent: on_schedule})
