"""`costguard uninstall` on the embedded stack after costguard has worked in remediate mode: a dry run changes
nothing; --yes leaves no costguard tag, alarm or state item, and the user's protect tags stay."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard.aws import clients
from costguard.aws.alarms import ALARM_PREFIX
from costguard.cli import main
from costguard.local.interactions import block_actions, offered_elements, signed_request
from costguard.local.replay import ReplayResult, replay_event
from costguard.local.sink import SlackSink
from costguard.local.stack import TABLE, LocalStack
from costguard.local.world import World
from costguard.model import MARK_TAG_KEY
from costguard.notify.values import action_value
from costguard.ops import uninstall
from costguard.policy import SNOOZE_TAG_KEY
from tests.conftest import EVENTS

REGION = "us-east-1"
IDLE_G6E = "i-0a1f00000000000d1"  # idle: the 12:00 sweep marks it
PROTECT_TAG_KEY = "costguard:protect"
LEFTOVER_OPS_ALARM = "costguard-ops-notifier"  # one of the stack's alarms, left behind


@pytest.fixture
def worked(world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path) -> Iterator[LocalStack]:
    """The stack after a sweep and a click in remediate mode, with the GPU-idle alarms on: marks, a snooze, an
    alarm, state items; and one of the stack's own alarms still there (the stack itself is gone)."""
    with LocalStack(
        world,
        sink=sink,
        mode="remediate",
        slack_app=True,
        until=world.now + timedelta(hours=1),
        overrides={"COSTGUARD_GPU_ALARMS": "on"},
    ) as stack:
        _replay(stack, tmp_path, "schedule-gpu-sweep-1200.json")
        _keep(stack, tmp_path, IDLE_G6E)
        _replay(stack, tmp_path, "ec2-instance-running.json")
        _leave_ops_alarm()
        yield stack


def _leave_ops_alarm() -> None:
    """One of the stack's ops alarms, as a deleted stack would leave it behind."""
    clients.cloudwatch(REGION).put_metric_alarm(
        AlarmName=LEFTOVER_OPS_ALARM,
        Namespace="AWS/Lambda",
        MetricName="Errors",
        Statistic="Sum",
        Period=300,
        EvaluationPeriods=1,
        Threshold=1,
        ComparisonOperator="GreaterThanOrEqualToThreshold",
    )


def _replay(stack: LocalStack, tmp_path: Path, name: str) -> ReplayResult:
    result = replay_event(stack, EVENTS / name)
    assert result.ok, result.error
    return result


def _keep(stack: LocalStack, tmp_path: Path, instance_id: str) -> None:
    """The Keep button on costguard's message about the instance, clicked five minutes later (a snooze tag)."""
    value = action_value("gpu_idle", f"123456789012/{REGION}/ec2_instance/{instance_id}", 4)
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
    result = replay_event(stack, path)
    assert result.ok and result.output["http"]["statusCode"] == 200, result.error


def _instance_tags() -> dict[str, dict[str, str]]:
    ec2 = clients.ec2(REGION)
    return {
        instance["InstanceId"]: {t["Key"]: t["Value"] for t in instance.get("Tags", [])}
        for reservation in ec2.describe_instances()["Reservations"]
        for instance in reservation["Instances"]
    }


def _sagemaker_tags() -> dict[str, dict[str, str]]:
    sagemaker = clients.sagemaker(REGION)
    arns = [n["NotebookInstanceArn"] for n in sagemaker.list_notebook_instances()["NotebookInstances"]]
    arns += [j["TrainingJobArn"] for j in sagemaker.list_training_jobs()["TrainingJobSummaries"]]
    return {arn: {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=arn)["Tags"]} for arn in arns}


def _costguard_tags() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for resource, tags in {**_instance_tags(), **_sagemaker_tags()}.items():
        if keys := {k for k in tags if k in (MARK_TAG_KEY, SNOOZE_TAG_KEY)}:
            found[resource] = keys
    return found


def _protected() -> dict[str, str]:
    return {
        resource: tags[PROTECT_TAG_KEY]
        for resource, tags in {**_instance_tags(), **_sagemaker_tags()}.items()
        if PROTECT_TAG_KEY in tags
    }


def _alarms() -> set[str]:
    cloudwatch = clients.cloudwatch(REGION)
    return {a["AlarmName"] for a in cloudwatch.describe_alarms()["MetricAlarms"]}


def _state_items() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = clients.client("dynamodb").scan(TableName=TABLE)["Items"]
    return items


def test_uninstall_leaves_no_costguard_tag_alarm_or_state_and_keeps_the_protect_tags(
    worked: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    tagged, protected, alarms, items = _costguard_tags(), _protected(), _alarms(), _state_items()
    assert SNOOZE_TAG_KEY in tagged[IDLE_G6E] and MARK_TAG_KEY in tagged[IDLE_G6E]
    assert len(tagged) >= 2, "the sweep marked several idle instances"
    assert f"{ALARM_PREFIX}i-0a1f00000000000a1" in alarms and LEFTOVER_OPS_ALARM in alarms
    assert protected and items

    # The dry run (the default) lists and changes nothing.
    assert main(["uninstall", "--region", REGION, "--state-table", TABLE]) == 0
    listed = capsys.readouterr().out
    assert "a dry run" in listed and f"would remove tag {MARK_TAG_KEY} from" in listed
    assert f"keeps the protect tag {PROTECT_TAG_KEY} on {len(protected)} resource" in listed
    assert "stack costguard is gone" in listed
    assert (_costguard_tags(), _protected(), _alarms(), len(_state_items())) == (
        tagged,
        protected,
        alarms,
        len(items),
    )

    assert main(["uninstall", "--region", REGION, "--state-table", TABLE, "--include-snoozes", "--yes"]) == 0
    done = capsys.readouterr().out
    assert f"removed tag {SNOOZE_TAG_KEY} from 1 resource: {IDLE_G6E}" in done
    assert _costguard_tags() == {}
    assert not {a for a in _alarms() if a.startswith((ALARM_PREFIX, "costguard-ops-"))}
    assert _state_items() == []
    assert _protected() == protected, "the user's protect tags stay"
    # Nothing is left: a second run finds nothing to remove.
    assert uninstall.find(REGION, state_table=TABLE).nothing


def test_include_protect_removes_the_protect_tag_too(worked: LocalStack) -> None:
    assert _protected()
    assert main(["uninstall", "--region", REGION, "--include-protect", "--include-snoozes", "--yes"]) == 0
    assert _protected() == {} and _costguard_tags() == {}


def test_an_error_is_one_sentence_and_exit_2(stack: LocalStack, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["uninstall", "--region", REGION, "--state-table", "no-such-table"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("costguard uninstall: ") and "\n" not in error and "Traceback" not in error
    assert "no-such-table" in error or "ResourceNotFound" in error


def test_the_audit_buckets_are_kept_unless_asked_then_emptied_and_deleted(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    """The buckets `sam delete` retained (one each time), found by the name CloudFormation gave them, in the region
    asked only."""
    kept = ["costguard-auditreportsbucket-1a2b3c4d5e6f", "costguard-auditreportsbucket-6f5e4d3c2b1a"]
    elsewhere = "costguard-auditreportsbucket-0e0e0e0e0e0e"
    s3 = clients.client("s3", REGION)
    for bucket in kept:
        s3.create_bucket(Bucket=bucket)
        for key in ("reports/2026-11-16/report.html", "reports/2026-11-16/report.json", "config/rules.json"):
            s3.put_object(Bucket=bucket, Key=key, Body=b"{}")
    clients.client("s3", "eu-west-1").create_bucket(
        Bucket=elsewhere, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )

    def names() -> set[str]:
        return {b["Name"] for b in s3.list_buckets()["Buckets"]}

    assert main(["uninstall", "--region", REGION, "--yes"]) == 0
    out = capsys.readouterr().out
    assert all(f"keeps the audit bucket {bucket} (3 objects" in out for bucket in kept)
    assert elsewhere not in out and names() >= {*kept, elsewhere}
    assert main(["uninstall", "--region", REGION, "--empty-audit-bucket"]) == 0
    assert f"would remove the audit bucket {kept[0]} and its 3 objects" in capsys.readouterr().out
    assert main(["uninstall", "--region", REGION, "--empty-audit-bucket", "--yes"]) == 0
    assert f"removed the audit bucket {kept[1]} and its 3 objects" in capsys.readouterr().out
    assert names() & {*kept, elsewhere} == {elsewhere}


def test_while_the_stack_exists_what_it_owns_is_left_to_sam_delete(
    stack: LocalStack, capsys: pytest.CaptureFixture[str]
) -> None:
    template = {
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {"StateTableName": {"Value": TABLE}},
    }
    clients.client("cloudformation", REGION).create_stack(
        StackName="costguard", TemplateBody=json.dumps(template)
    )
    _leave_ops_alarm()
    assert main(["uninstall", "--region", REGION]) == 0
    out = capsys.readouterr().out
    assert "stack costguard exists" in out and "leaves the stack's 1 alarm to `sam delete`" in out
    assert f"the state table {TABLE} goes with the stack" in out and "delete it first" in out
    # --yes removes nothing while the stack is deployed (tests/integration/test_uninstall_live.py).
    assert main(["uninstall", "--region", REGION, "--yes"]) == 2
    assert "nothing was changed" in capsys.readouterr().err
    assert LEFTOVER_OPS_ALARM in _alarms()
    assert main(["uninstall", "--region", REGION, "--empty-audit-bucket", "--audit-bucket", "b"]) == 2
    assert "run `sam delete` before --empty-audit-bucket" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["uninstall"], "costguard uninstall: no AWS region is set: give --region"),
        (["uninstall", "--region", REGION], "costguard uninstall: no AWS credentials were found"),
    ],
)
def test_without_aws_it_says_so_in_one_sentence(
    argv: list[str],
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    clients.reset()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and err.startswith(said), err
