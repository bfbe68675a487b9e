"""Entry point: AWS Budgets alerts and Cost Anomaly Detection alerts (SNS, EventBridge), and the follow-up run."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from costguard import clock
from costguard.aws import clients
from costguard.entry import ONCE_PERMISSIONS, PARSE_PERMISSIONS, OncePerEvent, Rejected, parse_event
from costguard.events.budgets import (
    SNS_MESSAGE_ID_PATH,
    AnomalyDetected,
    BudgetNotification,
    CostAnomalyNotification,
)
from costguard.events.scheduled import ScheduledEvent
from costguard.flows.budgets import PERMISSIONS as BUDGETS_PERMISSIONS
from costguard.flows.budgets import follow_up, handle_anomaly_event, handle_budget_notification
from costguard.observability import EVENT_ID_PATH, logger, metrics, tracer
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


# SNS and EventBridge may each deliver twice: one alert, one message, one set of stops.
on_budget_once = OncePerEvent(on_budget, key=SNS_MESSAGE_ID_PATH)
on_sns_anomaly_once = OncePerEvent(on_anomaly, key=SNS_MESSAGE_ID_PATH)
on_anomaly_once = OncePerEvent(on_anomaly)


@logger.inject_lambda_context(correlation_id_path=EVENT_ID_PATH, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        model = parse_event(
            event,
            (BudgetNotification, CostAnomalyNotification, AnomalyDetected, ScheduledEvent),
            function="budgets",
        )
    except Rejected as rejected:
        return rejected.result
    if isinstance(model, ScheduledEvent):
        return follow_up(runtime(), clock.now()).summary()
    if isinstance(model, BudgetNotification):
        return on_budget_once(model, context)
    if isinstance(model, CostAnomalyNotification):
        return on_sns_anomaly_once(model, context)
    assert isinstance(model, AnomalyDetected)
    return on_anomaly_once(model, context)
