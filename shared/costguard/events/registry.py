"""Which typed model each event shape parses into: the contract every file in events/ is held to."""

from __future__ import annotations

import re
from importlib import import_module
from typing import Any, Final, Literal

from pydantic import BaseModel

from costguard.events.common import json_object, sns_message

# The models are named, not imported: a function loads the models of the events it takes (its app.py imports
# them), never every model of the project. "module:Class" under costguard.events; tests/contract/test_events.py
# holds each name to its module's own detail-type constants.
_RESERVATION_STATES = ("Scheduled", "Active", "Delayed", "Unsupported", "Failed", "Expired", "Cancelled")
# (source, detail-type) of EventBridge events -> model.
EVENTBRIDGE_MODELS: dict[tuple[str, str], str] = {
    ("aws.sagemaker", "SageMaker Training Job State Change"): "sagemaker:TrainingJobStateChange",
    ("aws.sagemaker", "SageMaker HyperPod Cluster State Change"): "hyperpod:ClusterStateChange",
    ("aws.sagemaker", "SageMaker HyperPod Cluster Event"): "hyperpod:ClusterEvent",
    ("aws.sagemaker", "SageMaker HyperPod Cluster Node Health Event"): "hyperpod:NodeHealthEvent",
    ("aws.ec2", "EC2 Instance State-change Notification"): "ec2:InstanceStateChange",
    ("aws.ec2", "EC2 Spot Instance Interruption Warning"): "ec2:SpotInterruptionWarning",
    ("aws.batch", "Batch Job State Change"): "batch:BatchJobStateChange",
    ("aws.cloudwatch", "CloudWatch Alarm State Change"): "cloudwatch:AlarmStateChange",
    ("aws.health", "AWS Health Event"): "health:OdcrUnderutilization",
    ("aws.ce", "Anomaly Detected"): "budgets:AnomalyDetected",
    ("aws.events", "Scheduled Event"): "scheduled:ScheduledEvent",
    ("aws.scheduler", "Scheduled Event"): "scheduled:ScheduledEvent",
    **{
        ("aws.ec2", f"EC2 Capacity Reservation {state}"): "capacity:ReservationStateChange"
        for state in _RESERVATION_STATES
    },
}
# (source, detail-type prefix) -> model, for families AWS has renamed (tried after the exact matches).
EVENTBRIDGE_PREFIXES: list[tuple[str, str, str]] = [
    ("aws.ec2", "Capacity Block", "capacity:CapacityBlockEvent"),
]


def model_named(name: str) -> type[BaseModel]:
    """The model a registry name (``module:Class``) stands for, its module imported on first use."""
    module, attribute = name.split(":")
    model: type[BaseModel] = getattr(import_module(f"costguard.events.{module}"), attribute)
    return model


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
        return model_named("budgets:CostAnomalyNotification")
    if content == CLOUDWATCH_ALARM:
        return model_named("cloudwatch:AlarmNotification")
    return model_named("budgets:BudgetNotification")


def model_for(event: dict[str, Any]) -> type[BaseModel] | None:
    message = sns_message(event)
    if message is not None:
        return sns_model_for(message)
    source, detail_type = str(event.get("source")), str(event.get("detail-type"))
    exact = EVENTBRIDGE_MODELS.get((source, detail_type))
    if exact is not None:
        return model_named(exact)
    return next(
        (
            model_named(name)
            for src, prefix, name in EVENTBRIDGE_PREFIXES
            if src == source and detail_type.startswith(prefix)
        ),
        None,
    )
