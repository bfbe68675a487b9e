"""`costguard uninstall` while a costguard stack is still deployed (issue 39, case 4): with its own name or with
another stack's (``costguard-dev``), ``--yes`` refuses and changes nothing, since the GPU-idle alarms
(``costguard-gpu-idle-*``) do not say which stack made them and the live stack reads the snooze tags. Once no
costguard stack is deployed it removes costguard's marks and alarms, and keeps a person's snooze unless asked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard.aws import clients
from costguard.aws.alarms import ALARM_PREFIX
from costguard.cli import main
from costguard.local.interactions import block_actions, offered_elements, signed_request
from costguard.local.replay import replay_event
from costguard.local.sink import SlackSink
from costguard.local.stack import TABLE, LocalStack
from costguard.local.world import World
from costguard.model import MARK_TAG_KEY
from costguard.notify.values import action_value
from costguard.ops import uninstall
from costguard.policy import SNOOZE_TAG_KEY
from tests.conftest import EVENTS

REGION = "us-east-1"
IDLE_G6E = "i-0a1f00000000000d1"  # idle: the 12:00 sweep marks it, and its owner keeps it until 16:05
# What `sam deploy` leaves: the template's description and some of its outputs (what uninstall knows it by).
DEPLOYED = {
    "Description": "costguard: an event-driven GPU cost monitor and auto-remediator.",
    "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
    "Outputs": {
        "StateTableName": {"Value": TABLE},
        "GpuAlarmsFunctionName": {"Value": "costguard-GpuAlarmsFunction-AbC123"},
        "NotifierFunctionName": {"Value": "costguard-NotifierFunction-AbC123"},
    },
}
UNRELATED = {"Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}}


@pytest.fixture
def live(world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path) -> Iterator[LocalStack]:
    """The stack deployed as `costguard` (CloudFormation knows it), after a sweep marked idle instances, their
    alarms were made, and an owner kept one running for 4 hours (a snooze tag)."""
    with LocalStack(
        world,
        sink=sink,
        mode="remediate",
        slack_app=True,
        until=world.now + timedelta(hours=1),
        overrides={"COSTGUARD_GPU_ALARMS": "on"},
    ) as stack:
        for name in ("schedule-gpu-sweep-1200.json", "ec2-instance-running.json"):
            assert replay_event(stack, EVENTS / name).ok
        _keep(stack, tmp_path)
        _deploy("costguard", DEPLOYED)
        yield stack


def _deploy(name: str, template: dict[str, Any]) -> None:
    clients.client("cloudformation", REGION).create_stack(StackName=name, TemplateBody=json.dumps(template))


def _keep(stack: LocalStack, tmp_path: Path) -> None:
    value = action_value("gpu_idle", f"123456789012/{REGION}/ec2_instance/{IDLE_G6E}", 4)
    [offered] = [
        o for o in offered_elements(stack.sink) if o.action_id == "costguard:keep" and o.value == value
    ]
    at = stack.world.now + timedelta(minutes=5)
    payload = block_actions(
        "costguard:keep",
        value,
        action_ts=f"{int(at.timestamp())}.000200",
        channel=offered.channel,
        message_ts=offered.ts,
    )
    path = tmp_path / "keep.json"
    path.write_text(json.dumps(signed_request(payload, signed_at=at, arrived=at)))
    assert replay_event(stack, path).ok


def _tags() -> dict[str, dict[str, str]]:
    ec2 = clients.ec2(REGION)
    return {
        instance["InstanceId"]: {
            t["Key"]: t["Value"]
            for t in instance.get("Tags", [])
            if t["Key"] in (MARK_TAG_KEY, SNOOZE_TAG_KEY)
        }
        for reservation in ec2.describe_instances()["Reservations"]
        for instance in reservation["Instances"]
    }


def _alarms() -> set[str]:
    return {a["AlarmName"] for a in clients.cloudwatch(REGION).describe_alarms()["MetricAlarms"]}


def _world_state() -> tuple[dict[str, dict[str, str]], set[str], int]:
    items = clients.client("dynamodb").scan(TableName=TABLE)["Items"]
    return _tags(), _alarms(), len(items)


@pytest.mark.parametrize(
    ("stack_name", "options"), [("costguard", ["--include-snoozes"]), ("costguard-dev", [])]
)
def test_yes_refuses_while_a_costguard_stack_is_deployed_and_changes_nothing(
    live: LocalStack, stack_name: str, options: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = _world_state()
    tags, alarms, _ = before
    assert tags[IDLE_G6E][SNOOZE_TAG_KEY] == "2026-11-20T16:05:00+00:00" and MARK_TAG_KEY in tags[IDLE_G6E]
    assert any(a.startswith(ALARM_PREFIX) for a in alarms)

    argv = ["uninstall", "--region", REGION, "--stack", stack_name, "--state-table", TABLE, "--yes"]
    assert main([*argv, *options]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("costguard uninstall: ") and len(err.strip().splitlines()) == 1, err
    assert "costguard (CREATE_COMPLETE)" in err and "nothing was changed" in err
    assert "sam delete --stack-name costguard" in err
    assert _world_state() == before, "the live stack's marks, snoozes, alarms and state stay"


def test_a_dry_run_under_a_live_stack_says_yes_would_refuse(
    live: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _world_state()
    assert main(["uninstall", "--region", REGION, "--stack", "costguard-dev"]) == 0
    out = capsys.readouterr().out
    assert (
        "--yes removes nothing while a costguard stack is deployed here: costguard (CREATE_COMPLETE)" in out
    )
    assert "Nothing was changed: delete the stack first (`sam delete`), then run again with --yes." in out
    assert _world_state() == before


def test_once_the_stack_is_deleted_marks_and_alarms_go_and_the_snooze_stays_unless_asked(
    live: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    _deploy("unrelated", UNRELATED)  # not costguard's: it holds nothing back
    clients.client("cloudformation", REGION).delete_stack(StackName="costguard")
    assert main(["uninstall", "--region", REGION, "--yes"]) == 0
    out = capsys.readouterr().out
    assert f"removed tag {MARK_TAG_KEY} from" in out
    assert f"keeps the snooze tag {SNOOZE_TAG_KEY} on 1 resource" in out and "--include-snoozes" in out
    assert {i: t for i, t in _tags().items() if t} == {
        IDLE_G6E: {SNOOZE_TAG_KEY: "2026-11-20T16:05:00+00:00"}
    }
    assert not {a for a in _alarms() if a.startswith(ALARM_PREFIX)}

    assert main(["uninstall", "--region", REGION, "--include-snoozes", "--yes"]) == 0
    assert f"removed tag {SNOOZE_TAG_KEY} from 1 resource: {IDLE_G6E}" in capsys.readouterr().out
    assert not any(_tags().values())


def test_only_the_named_stacks_ops_alarms_are_removed(stack: LocalStack) -> None:
    """`costguard-ops-*` is the stack `costguard`'s; a stack named `costguard-ops-x` has `costguard-ops-x-ops-*`,
    which also starts with `costguard-ops-` and is not costguard's to remove."""
    for name in ("costguard-ops-notifier", "costguard-ops-x-ops-notifier"):
        clients.cloudwatch(REGION).put_metric_alarm(
            AlarmName=name,
            Namespace="AWS/Lambda",
            MetricName="Errors",
            Statistic="Sum",
            Period=300,
            EvaluationPeriods=1,
            Threshold=1,
            ComparisonOperator="GreaterThanOrEqualToThreshold",
        )
    found = uninstall.find(REGION, "costguard")
    assert "costguard-ops-notifier" in found.alarms and "costguard-ops-x-ops-notifier" not in found.alarms
