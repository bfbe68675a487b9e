"""The `costguard` command as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from costguard.local.cli import main
from tests.conftest import EVENTS, FIXTURES

FAILED = str(EVENTS / "sagemaker-training-job-failed.json")


def test_replay_json_prints_one_object_per_event(
    capsys: pytest.CaptureFixture[str], sleeps: list[float]
) -> None:
    assert main(["replay", FAILED, FAILED, "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert set(first) >= {"event", "function", "findings", "decisions", "slack"}
    [decision] = first["decisions"]
    assert {"action", "resource_id", "reason", "dry_run", "hourly_usd"} <= set(decision)
    assert decision["reason"] == "training_job_failed"
    assert len(first["slack"]) + len(second["slack"]) == 1


@pytest.mark.parametrize("name", ["not-json.json", "sagemaker-training-job-failed-bad-types.json"])
def test_replay_of_a_broken_event_exits_non_zero_naming_the_problem(
    name: str, capsys: pytest.CaptureFixture[str], sleeps: list[float]
) -> None:
    assert main(["replay", str(FIXTURES / name)]) == 1
    err = capsys.readouterr().err
    assert name in err
    assert ("bad JSON" in err) or ("InstanceCount" in err)


def test_replay_with_a_bad_world_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    world = tmp_path / "world.yaml"
    world.write_text(
        "now: 2026-11-20T12:00:00Z\ninstances:\n  - id: not-an-instance-id\n    type: p5.48xlarge\n"
    )
    assert main(["replay", FAILED, "--world", str(world)]) == 2
    assert "instances.0.id" in capsys.readouterr().err


def test_demo_shows_the_training_job_alert(demo_output: str) -> None:
    out = demo_output
    assert "** costguard: Training job failed **" in out
    assert "Summary:" in out
