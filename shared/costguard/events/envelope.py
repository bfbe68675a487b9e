"""The EventBridge envelope every event model extends.

The same model as powertools' ``parser.models.EventBridgeModel`` (same fields, aliases, types and the
EventBridge Scheduler's ``"{}"`` detail read as empty), declared here because importing one model from
powertools' parser loads every model it ships (API Gateway, ALB, Kafka, ...): tens of milliseconds of each
function's cold start for nothing it reads. tests/contract/test_envelope.py holds the two to the same answers
on every shipped event.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator


class EventBridgeModel(BaseModel):
    """An EventBridge event: its envelope, and a ``detail`` each event model types."""

    model_config = ConfigDict(populate_by_name=True)

    version: str
    id: str
    source: str
    account: str
    time: datetime
    region: str
    resources: list[str]
    detail_type: str = Field(alias="detail-type")
    detail: dict[str, Any] | type[BaseModel] | BaseModel
    replay_name: str | None = Field(None, alias="replay-name")

    @field_validator("detail", mode="before")
    @classmethod
    def _scheduler_detail(cls, value: Any, info: ValidationInfo) -> Any:
        # EventBridge Scheduler sends the detail as the string "{}" when a schedule has no payload.
        return {} if info.data.get("source") == "aws.scheduler" and value == "{}" else value
