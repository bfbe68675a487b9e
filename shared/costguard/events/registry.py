"""Which typed model each event shape parses into: the contract every file in events/ is held to."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from costguard.events.sagemaker import TRAINING_JOB_DETAIL_TYPE, TrainingJobStateChange

# (source, detail-type) of EventBridge events -> model.
EVENTBRIDGE_MODELS: dict[tuple[str, str], type[BaseModel]] = {
    ("aws.sagemaker", TRAINING_JOB_DETAIL_TYPE): TrainingJobStateChange,
}


def model_for(event: dict[str, Any]) -> type[BaseModel] | None:
    return EVENTBRIDGE_MODELS.get((str(event.get("source")), str(event.get("detail-type"))))
