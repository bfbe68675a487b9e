"""Which typed model each event shape parses into: the contract every file in events/ is held to."""

from __future__ import annotations

import re
from typing import Any, Final, Literal

from pydantic import BaseModel

from costguard.events.batch import BATCH_JOB_DETAIL_TYPE, BatchJobStateChange
from costguard.events.budgets import (
    ANOMALY_DETAIL_TYPE,
    AnomalyDetected,
    BudgetNotification,
    CostAnomalyNotification,
    json_object,
    sns_message,
)
from costguard.events.capacity import (
    CAPACITY_BLOCK_PREFIX,
    RESERVATION_STATE_DETAIL_TYPES,
    CapacityBlockEvent,
    ReservationStateChange,
)
from costguard.events.cloudwatch import ALARM_DETAIL_TYPE, AlarmNotification, AlarmStateChange
from costguard.events.ec2 import (
    INSTANCE_STATE_DETAIL_TYPE,
    SPOT_INTERRUPTION_DETAIL_TYPE,
    InstanceStateChange,
    SpotInterruptionWarning,
)
from costguard.events.health import HEALTH_DETAIL_TYPE, OdcrUnderutilization
from costguard.events.sagemaker import TRAINING_JOB_DETAIL_TYPE, TrainingJobStateChange
from costguard.events.scheduled import SCHEDULED_DETAIL_TYPE, ScheduledEvent

# (source, detail-type) of EventBridge events -> model.
EVENTBRIDGE_MODELS: dict[tuple[str, str], type[BaseModel]] = {
    ("aws.sagemaker", TRAINING_JOB_DETAIL_TYPE): TrainingJobStateChange,
    ("aws.ec2", INSTANCE_STATE_DETAIL_TYPE): InstanceStateChange,
    ("aws.ec2", SPOT_INTERRUPTION_DETAIL_TYPE): SpotInterruptionWarning,
    ("aws.batch", BATCH_JOB_DETAIL_TYPE): BatchJobStateChange,
    ("aws.cloudwatch", ALARM_DETAIL_TYPE): AlarmStateChange,
    ("aws.health", HEALTH_DETAIL_TYPE): OdcrUnderutilization,
    ("aws.ce", ANOMALY_DETAIL_TYPE): AnomalyDetected,
    ("aws.events", SCHEDULED_DETAIL_TYPE): ScheduledEvent,
    ("aws.scheduler", SCHEDULED_DETAIL_TYPE): ScheduledEvent,
    **{("aws.ec2", detail_type): ReservationStateChange for detail_type in RESERVATION_STATE_DETAIL_TYPES},
}
# (source, detail-type prefix) -> model, for families AWS has renamed (tried after the exact matches).
EVENTBRIDGE_PREFIXES: list[tuple[str, str, type[BaseModel]]] = [
    ("aws.ec2", CAPACITY_BLOCK_PREFIX, CapacityBlockEvent),
]


# What an SNS message holds, read from its content (SNS deliveries carry no type).
BUDGETS_TEXT: Final = "budgets text"
COST_ANOMALY: Final = "cost anomaly"
CLOUDWATCH_ALARM: Final = "cloudwatch alarm"
SnsContent = Literal["budgets text", "cost anomaly", "cloudwatch alarm"]
_BUDGETS_WORDING = re.compile(r"AWS Budget|^\s*Budget Name\s*:", re.IGNORECASE | re.MULTILINE)


def sns_content(message: str, subject: str | None = None) -> SnsContent | None:
    """What a notification is by its content: AWS Budgets' plain text, a Cost Anomaly Detection alert (JSON with
    an anomalyId) or a CloudWatch alarm action (JSON with AlarmName and NewStateValue); None for anything else."""
    body = json_object(message)
    if body is not None:
        if "anomalyId" in body:
            return COST_ANOMALY
        if "AlarmName" in body and "NewStateValue" in body:
            return CLOUDWATCH_ALARM
        return None
    if _BUDGETS_WORDING.search(message) or (isinstance(subject, str) and _BUDGETS_WORDING.search(subject)):
        return BUDGETS_TEXT
    return None


def sns_content_of(event: Any) -> SnsContent | None:
    """:func:`sns_content` of an SNS delivery; None when the event is not one."""
    message = sns_message(event) if isinstance(event, dict) else None
    if message is None:
        return None
    subject = event["Records"][0]["Sns"].get("Subject")
    return sns_content(message, subject if isinstance(subject, str) else None)


def sns_model_for(message: str) -> type[BaseModel]:
    """SNS deliveries carry no type: a JSON anomaly or alarm action is one, anything else is read as a budget
    alert (whose parser forwards wording it cannot read instead of dropping it)."""
    content = sns_content(message)
    if content == COST_ANOMALY:
        return CostAnomalyNotification
    if content == CLOUDWATCH_ALARM:
        return AlarmNotification
    return BudgetNotification


def model_for(event: dict[str, Any]) -> type[BaseModel] | None:
    message = sns_message(event)
    if message is not None:
        return sns_model_for(message)
    source, detail_type = str(event.get("source")), str(event.get("detail-type"))
    exact = EVENTBRIDGE_MODELS.get((source, detail_type))
    if exact is not None:
        return exact
    return next(
        (
            model
            for src, prefix, model in EVENTBRIDGE_PREFIXES
            if src == source and detail_type.startswith(prefix)
        ),
        None,
    )
