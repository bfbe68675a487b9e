"""`costguard replay` of the launch-time cases as a user runs it: the cross-region input and, with the account's
required tags set for the run, the untagged GPU instance."""

from __future__ import annotations

import json

import pytest

from costguard.cli import main
from tests.conftest import EVENTS

CROSS = str(EVENTS / "sagemaker-training-job-inprogress-cross-region.json")
UNTAGGED = str(EVENTS / "ec2-instance-running-untagged.json")


def _reasons(out: str) -> list[str]:
    return [d["reason"] for line in out.strip().splitlines() for d in json.loads(line)["decisions"]]


def test_a_replay_shows_the_cross_region_input_from_the_worlds_buckets(
    capsys: pytest.CaptureFixture[str], sleeps: list[float]
) -> None:
    assert main(["replay", CROSS, "--json"]) == 0
    assert _reasons(capsys.readouterr().out) == ["data_cross_region"]


def test_a_replay_shows_the_untagged_launch_only_with_required_tags_set(
    capsys: pytest.CaptureFixture[str], sleeps: list[float]
) -> None:
    assert main(["replay", UNTAGGED, "--json"]) == 0
    assert "untagged_gpu_spend" not in _reasons(capsys.readouterr().out)  # none required: not checked
    assert main(["replay", UNTAGGED, "--json", "--set", "COSTGUARD_REQUIRED_TAGS=team,project,owner"]) == 0
    assert _reasons(capsys.readouterr().out) == ["untagged_gpu_spend"]


def test_set_takes_costguard_settings_only() -> None:
    with pytest.raises(SystemExit, match="--set AWS_REGION: not a costguard setting"):
        main(["replay", UNTAGGED, "--set", "AWS_REGION=eu-west-1"])
