"""CloudWatch alarm state changes delivered by EventBridge (or by an SNS alarm action)."""

from __future__ import annotations

import contextlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from costguard.events.common import json_object, to_datetime
from costguard.events.envelope import EventBridgeModel
from costguard.events.sns import SnsDelivery

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


# -- the same alarm, delivered by an SNS alarm action -----------------------------------------------


class AlarmMessage(BaseModel):
    """The JSON message of a CloudWatch alarm action on an SNS topic: what costguard needs of it."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    alarm_name: str = Field(alias="AlarmName", min_length=1, max_length=255)
    new_state: Literal["ALARM", "OK", "INSUFFICIENT_DATA"] = Field(alias="NewStateValue")
    old_state: Literal["ALARM", "OK", "INSUFFICIENT_DATA"] | None = Field(default=None, alias="OldStateValue")
    reason: str = Field(default="", alias="NewStateReason")
    state_change_time: str | None = Field(default=None, alias="StateChangeTime")
    account: str | None = Field(default=None, alias="AWSAccountId")
    alarm_arn: str | None = Field(default=None, alias="AlarmArn")


class AlarmNotification(SnsDelivery):
    """A CloudWatch alarm that reached costguard through an SNS topic instead of EventBridge (a captured
    notification replayed, or an alarm action pointed at a topic): read as the same state change."""

    @property
    def alarm(self) -> AlarmMessage:
        return AlarmMessage.model_validate(json_object(self.sns.message) or {})

    @model_validator(mode="after")
    def _alarm_parses(self) -> AlarmNotification:
        self.as_state_change()  # a malformed alarm, or one with no readable time, fails validation here
        return self

    @property
    def region(self) -> str:
        """The alarm's own region (its ARN), else the topic's."""
        parts = (self.alarm.alarm_arn or "").split(":")
        return parts[3] if len(parts) > 5 and parts[3] else super().region

    @property
    def account(self) -> str:
        return self.alarm.account or super().account

    def as_state_change(self) -> AlarmStateChange:
        alarm = self.alarm
        at = self.sns.timestamp
        if alarm.state_change_time:
            with contextlib.suppress(ValueError):  # unreadable: the SNS timestamp stands
                at = to_datetime(alarm.state_change_time.replace("+0000", "+00:00"))
        if at is None:
            raise ValueError("the alarm notification carries no readable time (StateChangeTime or Timestamp)")
        return AlarmStateChange.model_validate(
            {
                "version": "0",
                "id": self.id,
                "detail-type": ALARM_DETAIL_TYPE,
                "source": "aws.cloudwatch",
                "account": self.account,
                "time": at,
                "region": self.region,
                "resources": [alarm.alarm_arn] if alarm.alarm_arn else [],
                "detail": {
                    "alarmName": alarm.alarm_name,
                    "state": {"value": alarm.new_state, "reason": alarm.reason},
                    "previousState": {"value": alarm.old_state} if alarm.old_state else None,
                },
            }
        )
