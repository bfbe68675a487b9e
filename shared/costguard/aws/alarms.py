"""costguard's per-instance GPU-idle alarms: one Metrics Insights alarm over all of an instance's GPUs."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from costguard.aws import clients
from costguard.detect.gpu import Thresholds
from costguard.permissions import needs

ALARM_PREFIX = "costguard-gpu-idle-"
DELETE_BATCH = 100  # DeleteAlarms takes at most 100 names
ALARM_PERIOD_SECONDS = 300

# PutMetricAlarm with Tags also needs cloudwatch:TagResource.
PERMISSIONS = needs(
    "cloudwatch:PutMetricAlarm",
    "cloudwatch:TagResource",
    "cloudwatch:DeleteAlarms",
    "cloudwatch:DescribeAlarms",
)
_INSTANCE_ID = re.compile(r"i-[0-9a-f]{8,17}")


def alarm_name(instance_id: str) -> str:
    return f"{ALARM_PREFIX}{instance_id}"


def instance_of(alarm: str) -> str | None:
    """Whatever follows costguard's prefix (the reconcile deletes an alarm of any such name it finds no
    running instance for); None for a name without the prefix."""
    return alarm.removeprefix(ALARM_PREFIX) if alarm.startswith(ALARM_PREFIX) else None


def alarm_instance(alarm: str) -> str | None:
    """The instance id an alarm's name carries, only when the name is exactly costguard's prefix and an
    instance id: an alarm named anything else (``costguard-gpu-idle-foo``) names no instance."""
    instance_id = instance_of(alarm)
    return instance_id if instance_id is not None and _INSTANCE_ID.fullmatch(instance_id) else None


def alarm_request(instance_id: str, thresholds: Thresholds) -> dict[str, Any]:
    """The alarm: the busiest GPU (MAX across every per-GPU series of the instance) under the idle
    threshold for the whole idle window. Missing data is not idle: it never breaches."""
    periods = max(1, math.ceil(thresholds.idle_window.total_seconds() / ALARM_PERIOD_SECONDS))
    if not _INSTANCE_ID.fullmatch(instance_id):
        raise ValueError(f"not an instance id: {instance_id!r}")
    # Safe to interpolate: the id was just checked to be i- and hex digits.
    query = f"SELECT MAX(nvidia_smi_utilization_gpu) FROM CWAgent WHERE InstanceId = '{instance_id}'"  # noqa: S608
    return {
        "AlarmName": alarm_name(instance_id),
        "AlarmDescription": f"costguard: every GPU of {instance_id} under {thresholds.idle_percent:g}%",
        "Metrics": [
            {"Id": "busiest_gpu", "Expression": query, "Period": ALARM_PERIOD_SECONDS, "ReturnData": True}
        ],
        "EvaluationPeriods": periods,
        "DatapointsToAlarm": periods,
        "Threshold": thresholds.idle_percent,
        "ComparisonOperator": "LessThanThreshold",
        "TreatMissingData": "notBreaching",
        "ActionsEnabled": False,  # EventBridge carries the state change; the alarm needs no action
        "Tags": [{"Key": "costguard:instance-id", "Value": instance_id}],
    }


def put_alarms(region: str, instance_ids: Iterable[str], thresholds: Thresholds) -> list[str]:
    """PutMetricAlarm has no batch form: one call per new alarm (the reconcile only creates missing ones)."""
    cloudwatch = clients.cloudwatch(region)
    made = []
    for instance_id in instance_ids:
        cloudwatch.put_metric_alarm(**alarm_request(instance_id, thresholds))
        made.append(instance_id)
    return made


def delete_alarms(region: str, instance_ids: Iterable[str]) -> list[str]:
    names = [alarm_name(i) for i in instance_ids]
    cloudwatch = clients.cloudwatch(region)
    for start in range(0, len(names), DELETE_BATCH):
        cloudwatch.delete_alarms(AlarmNames=names[start : start + DELETE_BATCH])
    return [i for n in names if (i := instance_of(n))]


def alarmed_instances(region: str) -> set[str]:
    """Instances that have a costguard alarm: ceil(alarms / 100) DescribeAlarms calls."""
    pages = (
        clients.cloudwatch(region)
        .get_paginator("describe_alarms")
        .paginate(
            AlarmNamePrefix=ALARM_PREFIX, AlarmTypes=["MetricAlarm"], PaginationConfig={"PageSize": 100}
        )
    )
    return {i for page in pages for alarm in page["MetricAlarms"] if (i := instance_of(alarm["AlarmName"]))}
