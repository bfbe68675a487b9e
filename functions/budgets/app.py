"""Entry point: AWS Budgets alerts and Cost Anomaly Detection alerts (SNS, EventBridge), and the follow-up run."""

from __future__ import annotations

from typing import Any

from costguard import clock
from costguard.aws import clients
from costguard.entry import ONCE_PERMISSIONS, PARSE_PERMISSIONS, OncePerEvent
from costguard.events.budgets import AnomalyDetected, BudgetNotification, CostAnomalyNotification
from costguard.events.scheduled import ScheduledEvent
from costguard.events.sns import SNS_MESSAGE_ID_PATH
from costguard.flows.budgets import PERMISSIONS as BUDGETS_PERMISSIONS
from costguard.flows.budgets import follow_up, handle_anomaly_event, handle_budget_notification
from costguard.handler import event_handler
from costguard.runtime import runtime
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = PARSE_PERMISSIONS | ONCE_PERMISSIONS | BUDGETS_PERMISSIONS | clients.ASSUME_PERMISSIONS

# Validated at cold start: a bad escalation level, or a table or queue it needs unset, fails here, named.
settings = require(get_settings(), "state_table", "decisions_queue_url", "failed_events_queue_url")


def on_budget(event: BudgetNotification) -> dict[str, Any]:
    return handle_budget_notification(event, runtime(), clock.now()).summary()


def on_anomaly(event: AnomalyDetected | CostAnomalyNotification) -> dict[str, Any]:
    return handle_anomaly_event(event, runtime(), clock.now()).summary()


def on_follow_up(event: ScheduledEvent) -> dict[str, Any]:
    return follow_up(runtime(), clock.now()).summary()


# SNS and EventBridge may each deliver twice: one alert, one message, one set of stops.
lambda_handler = event_handler(
    "budgets",
    {
        BudgetNotification: OncePerEvent(on_budget, key=SNS_MESSAGE_ID_PATH),
        CostAnomalyNotification: OncePerEvent(on_anomaly, key=SNS_MESSAGE_ID_PATH),
        AnomalyDetected: OncePerEvent(on_anomaly),
        ScheduledEvent: on_follow_up,
    },
)
