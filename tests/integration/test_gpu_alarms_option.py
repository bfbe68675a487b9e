"""The per-instance GPU-idle alarms are an option, off by default: the stack as deployed with its defaults
creates none, and what is left from when they were on is deleted."""

from __future__ import annotations

import json
from pathlib import Path

from costguard.aws import alarms, clients
from costguard.detect.gpu import Thresholds
from costguard.local.replay import replay
from costguard.local.stack import LocalStack
from tests.conftest import EVENTS

RUNNING = EVENTS / "ec2-instance-running.json"
RECONCILE = EVENTS / "schedule-gpu-alarm-reconcile.json"
IDLE, ONE_BUSY = "i-0a1f00000000000a1", "i-0a1f00000000000a2"


def alarm_names() -> set[str]:
    return {a["AlarmName"] for a in clients.cloudwatch().describe_alarms()["MetricAlarms"]}


def test_the_default_stack_runs_with_the_alarms_off(stack: LocalStack) -> None:
    [result] = replay(stack, [RUNNING])
    # Read at cold start from the function's own variable, resolved from template.yaml's GpuAlarms default.
    handler = stack.module(stack.template.functions()["GpuAlarmsFunction"])
    assert handler.settings.gpu_alarms is False
    assert result.ok, result.error
    assert result.function == "GpuAlarmsFunction"
    assert result.output == {"ignored": "running: GpuAlarms is off"}
    assert alarm_names() == set()


def test_a_stopped_instance_loses_the_alarm_left_from_when_they_were_on(
    stack: LocalStack, tmp_path: Path
) -> None:
    alarms.put_alarms("us-east-1", [IDLE, ONE_BUSY], Thresholds())
    stopped = json.loads(RUNNING.read_text())
    stopped["detail"]["state"] = "stopped"
    path = tmp_path / "ec2-instance-stopped.json"
    path.write_text(json.dumps(stopped))
    [result] = replay(stack, [path])
    assert result.ok, result.error
    assert alarm_names() == {alarms.alarm_name(ONE_BUSY)}


def test_a_reconcile_run_by_hand_deletes_every_alarm_and_creates_none(stack: LocalStack) -> None:
    alarms.put_alarms("us-east-1", [IDLE, ONE_BUSY], Thresholds())
    clients.calls.clear()
    [result] = replay(stack, [RECONCILE])
    assert result.ok, result.error
    assert result.function == "GpuAlarmsFunction"
    assert alarm_names() == set()
    assert clients.calls[("cloudwatch", "PutMetricAlarm")] == 0
