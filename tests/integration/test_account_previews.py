"""`costguard doctor --world` and `costguard uninstall --world`: the account commands' own code run on the embedded
stack seeded with a world (the demo's by default) after the stack's first GPU sweep and alarm reconcile, a
stand-in `costguard` stack deployed, instead of on an account. What they print of the demo world; that the
uninstall preview is a dry run that changes nothing and refuses --yes; that a bad world file is one sentence."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from costguard.aws import clients
from costguard.aws.alarms import ALARM_PREFIX
from costguard.cli import main
from costguard.local.stack import TABLE
from costguard.model import MARK_TAG_KEY
from costguard.ops import preview, uninstall
from tests.conftest import DEMO_WORLD

REGION = "us-east-1"
NO_AGENT = "i-0a1f00000000000a5"  # nlp-g6-no-agent: it publishes no GPU series
# The idle instances the first sweep marks (remediate mode).
MARKED = ["i-0a1f00000000000a1", "i-0a1f00000000000a9", "i-0a1f00000000000d1"]
PREVIEW_OF_THE_DEMO = (
    "a local preview of the demo world worlds/demo.yaml (account 123456789012, us-east-1, at "
)


def test_doctor_world_prints_the_doctors_report_of_the_demo_world(
    sleeps: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--world"]) == 1  # the doctor's own code: the demo world has something to fix
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith(f"costguard doctor --world: {PREVIEW_OF_THE_DEMO}2026-11-20 12:00 UTC)")
    assert "on the embedded AWS, not an account" in lines[0] and "Mode=remediate, GpuAlarms=on" in lines[0]
    assert lines[1] == (
        "costguard doctor: account 123456789012, us-east-1, stack costguard (remediate mode), at 2026-11-20 12:00 UTC"
    )
    assert "  OK       costguard: deployed in us-east-1 in remediate mode" in lines
    assert (
        f"  FIX      instance {NO_AGENT} nlp-g6-no-agent (g6.xlarge): publishes no nvidia_smi_utilization_gpu"
        in out
    )
    assert (
        "  OK       notebook dana-scratch (ml.g5.xlarge): its GPU publishes nvidia_smi_utilization_gpu"
        in lines
    )
    assert "subscribed by the stack's budgets function costguard-BudgetsFunction-preview" in out
    assert "  OK       the Slack secret: a webhook: a default channel" in lines
    # The reconcile made one alarm per running NVIDIA GPU instance; the quota is AWS's default.
    assert "the region has 20 (20 of them costguard's) against a quota of 200 (AWS default)" in out
    assert (
        "What a first sweep would find (remediate mode: it marks, then stops after the grace period)" in lines
    )
    assert any(line.startswith(f"  gpu_metrics_missing  ec2_instance {NO_AGENT}") for line in lines)
    assert lines[-1] == "Summary: 3 to fix."
    assert "costguard doctor: reading account and stack costguard in us-east-1..." in err
    assert "Traceback" not in err


def test_doctor_world_json_keeps_stdout_json(sleeps: list[float], capsys: pytest.CaptureFixture[str]) -> None:
    """A world file named; with --json the preview's first line goes to stderr, and stdout is the report."""
    assert main(["doctor", "--world", str(DEMO_WORLD), "--json"]) == 1
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert err.startswith(f"costguard doctor --world: {PREVIEW_OF_THE_DEMO}")
    assert (report["account"], report["region"], report["stack"], report["mode"]) == (
        "123456789012",
        REGION,
        "costguard",
        "remediate",
    )
    status = {(c["area"], c["subject"]): c["status"] for c in report["checks"]}
    assert status[("Stack", "costguard")] == status[("GPU-idle alarms", "GpuAlarms")] == "ok"


def _state() -> tuple[dict[str, str], list[str], int]:
    """The marks on the instances, the GPU-idle alarms and the state table's item count, as moto holds them."""
    marks = {
        instance["InstanceId"]: tag["Value"]
        for reservation in clients.ec2(REGION).describe_instances()["Reservations"]
        for instance in reservation["Instances"]
        for tag in instance.get("Tags", [])
        if tag["Key"] == MARK_TAG_KEY
    }
    alarms = sorted(
        a["AlarmName"]
        for a in clients.cloudwatch(REGION).describe_alarms(AlarmNamePrefix=ALARM_PREFIX)["MetricAlarms"]
    )
    items = clients.client("dynamodb", REGION).scan(TableName=TABLE, Select="COUNT")["Count"]
    return marks, alarms, items


def test_uninstall_world_lists_the_sweeps_marks_and_alarms_and_changes_nothing(
    sleeps: list[float], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """uninstall's own run(), watched inside the preview: the embedded AWS before and after it is the same."""
    seen: list[tuple[Any, Any, argparse.Namespace]] = []
    run = uninstall.run

    def watched(args: argparse.Namespace, out: Callable[[str], None] = print) -> uninstall.Leftovers:
        before = _state()
        found = run(args, out)
        seen.append((before, _state(), args))
        return found

    monkeypatch.setattr(uninstall, "run", watched)
    assert main(["uninstall", "--world"]) == 0
    out, _ = capsys.readouterr()

    [(before, after, args)] = seen
    assert after == before, "the preview removed nothing"
    marks, alarms, _ = before
    assert sorted(marks) == MARKED and len(alarms) == 20
    assert (args.yes, args.world, args.region) == (False, None, REGION)

    lines = out.splitlines()
    assert lines[0].startswith(f"costguard uninstall --world: {PREVIEW_OF_THE_DEMO}")
    assert lines[1] == "costguard uninstall in us-east-1 (stack costguard exists), a dry run:"
    assert f"  would remove tag {MARK_TAG_KEY} from 3 resources: {', '.join(MARKED)}" in lines
    assert f"  would remove 20 alarms: {', '.join(alarms[:5])} and 15 more" in lines
    assert (
        lines[-1] == "Nothing was changed: delete the stack first (`sam delete`), then run again with --yes."
    )


def test_uninstall_world_refuses_yes_before_anything_starts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(world: Any) -> Any:
        raise AssertionError("no stack is played for a refused preview")

    monkeypatch.setattr(preview, "played", never)
    assert main(["uninstall", "--world", "--yes"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("costguard uninstall: --world is a local preview and always a dry run: drop --yes")
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["doctor", "uninstall"])
def test_a_missing_world_file_is_one_sentence_and_exit_2(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-world.yaml"
    assert main([command, "--world", str(missing)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"costguard: bad world file: {missing}: ") and "No such file" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_region_the_world_does_not_name_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--world", "--region", "eu-west-1"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "costguard doctor: the demo world worlds/demo.yaml names us-east-1, not eu-west-1: give one of them as "
        "--region, or none\n"
    )
