"""A CloudWatch alarm captured from an SNS alarm action is read as the same state change EventBridge delivers."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import ValidationError

from costguard.events.cloudwatch import AlarmNotification
from costguard.events.registry import model_for
from tests.conftest import load_event

ALARM = {
    "AlarmName": "costguard-gpu-idle-i-0a1f00000000000a1",
    "AWSAccountId": "123456789012",
    "NewStateValue": "ALARM",
    "NewStateReason": "Threshold Crossed: 30 datapoints were less than the threshold (5.0).",
    "StateChangeTime": "2026-11-20T12:10:00.123+0000",
    "Region": "US East (N. Virginia)",
    "AlarmArn": "arn:aws:cloudwatch:us-east-1:123456789012:alarm:costguard-gpu-idle-i-0a1f00000000000a1",
    "OldStateValue": "OK",
}


def delivery(
    message: dict[str, Any] | str, topic: str = "arn:aws:sns:eu-west-1:123456789012:ops"
) -> dict[str, Any]:
    event = copy.deepcopy(load_event("sns-cloudwatch-alarm-lambdago.json"))
    sns = event["Records"][0]["Sns"]
    sns["Message"] = message if isinstance(message, str) else json.dumps(message)
    sns["TopicArn"] = topic
    return event


def test_an_sns_alarm_action_reads_as_an_alarm_state_change() -> None:
    event = delivery(ALARM)
    assert model_for(event) is AlarmNotification
    change = AlarmNotification.model_validate(event).as_state_change()
    assert change.detail.alarm_name == ALARM["AlarmName"]
    assert change.detail.state.value == "ALARM"
    assert change.id == event["Records"][0]["Sns"]["MessageId"]  # idempotency keys on the SNS message id
    assert (change.account, change.region) == ("123456789012", "us-east-1")  # the alarm's, not the topic's
    assert change.time.isoformat() == "2026-11-20T12:10:00.123000+00:00"


def test_the_topic_region_stands_in_when_the_alarm_arn_names_none() -> None:
    change = AlarmNotification.model_validate(delivery(ALARM | {"AlarmArn": None})).as_state_change()
    assert change.region == "eu-west-1"


@pytest.mark.parametrize("broken", [{"NewStateValue": "BROKEN"}, {"AlarmName": ""}])
def test_a_malformed_alarm_fails_validation(broken: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        AlarmNotification.model_validate(delivery(ALARM | broken))
