"""Which typed model each event shape parses into: the contract every file in events/ is held to."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from costguard.events.batch import BATCH_JOB_DETAIL_TYPE, BatchJobStateChange
from costguard.events.cloudwatch import ALARM_DETAIL_TYPE, AlarmStateChange
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
    ("aws.events", SCHEDULED_DETAIL_TYPE): ScheduledEvent,
    ("aws.scheduler", SCHEDULED_DETAIL_TYPE): ScheduledEvent,
}


def model_for(event: dict[str, Any]) -> type[BaseModel] | None:
    return EVENTBRIDGE_MODELS.get((str(event.get("source")), str(event.get("detail-type"))))
