"""CloudWatch alarm state changes delivered by EventBridge."""

from __future__ import annotations

from typing import Any, Literal

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import BaseModel, ConfigDict, Field

ALARM_DETAIL_TYPE = "CloudWatch Alarm State Change"


class AlarmState(BaseModel):
    model_config = ConfigDict(extra="allow")

    value: Literal["ALARM", "OK", "INSUFFICIENT_DATA"]
    reason: str = ""
    timestamp: str | None = None


class AlarmDetail(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    alarm_name: str = Field(alias="alarmName", min_length=1, max_length=255)
    state: AlarmState
    previous_state: AlarmState | None = Field(default=None, alias="previousState")
    configuration: dict[str, Any] = Field(default_factory=dict)
    alarm_tags: dict[str, str] = Field(default_factory=dict, alias="alarmTags")


class AlarmStateChange(EventBridgeModel):
    detail_type: Literal["CloudWatch Alarm State Change"] = Field(alias="detail-type")
    source: Literal["aws.cloudwatch"]
    detail: AlarmDetail
