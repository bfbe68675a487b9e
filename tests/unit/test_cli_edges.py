"""The command line's edges (issue 41): --version; --set by the template parameter's name; replay of a directory
and of a JSON array, each error said once; redrive's stack and region as doctor and uninstall take them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from botocore.stub import Stubber

from costguard import cli
from costguard.aws import clients
from costguard.local.replay import EventFileError, event_files, read_events
from costguard.ops import redrive
from tests.conftest import ROOT


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("costguard ")


def test_set_takes_the_parameter_or_its_variable() -> None:
    assert cli._settings(["ReasonModes=gpu_idle=notify", "COSTGUARD_GRACE_MINUTES=30"]) == {
        "COSTGUARD_REASON_MODES": "gpu_idle=notify",
        "COSTGUARD_GRACE_MINUTES": "30",
    }
    assert cli._settings(["RemediateScope=team=ml"]) == {"COSTGUARD_REMEDIATE_SCOPE": "team=ml"}
    with pytest.raises(SystemExit, match="--set Nope: not a costguard setting"):
        cli._settings(["Nope=1"])
    with pytest.raises(SystemExit, match="--set takes NAME=VALUE"):
        cli._settings(["ReasonModes"])


def test_a_directory_is_its_json_files_and_an_array_its_events(tmp_path: Path) -> None:
    (tmp_path / "b.json").write_text(json.dumps([{"id": "1"}, 2, {"id": "3"}]))
    (tmp_path / "a.json").write_text(json.dumps({"id": "a"}))
    (tmp_path / "notes.txt").write_text("not an event")
    files = event_files([tmp_path])
    assert [f.name for f in files] == ["a.json", "b.json"]
    events = read_events(files[1])
    assert [label.rsplit("/", 1)[-1] for label, _ in events] == ["b.json[0]", "b.json[1]", "b.json[2]"]
    assert events[0][1] == {"id": "1"} and events[2][1] == {"id": "3"}
    assert isinstance(events[1][1], EventFileError) and "not a JSON object (int)" in str(events[1][1])
    (tmp_path / "empty.json").write_text("[]")
    [(_, empty)] = read_events(tmp_path / "empty.json")
    assert isinstance(empty, EventFileError) and "empty JSON array" in str(empty)


def test_replay_of_a_directory_runs_each_file_and_says_each_error_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    event = json.loads((ROOT / "events" / "sagemaker-training-job-failed-p4d.json").read_text())
    (tmp_path / "one.json").write_text(json.dumps([event, "not an event"]))
    assert cli.main(["replay", str(tmp_path)]) == 1  # one of the two could not be read
    out, err = capsys.readouterr()
    assert "training_job_failed" in out
    assert out.count("=== ") == 2
    assert "not a JSON object (str)" not in out  # not on stdout as well
    assert err.count("not a JSON object (str)") == 1


def test_redrive_takes_the_default_stack_in_the_sessions_region(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    made: dict[str, Any] = {}

    def client(service: str, region: str | None = None, **_: Any) -> Any:

        made[service] = region
        return cloudformation

    import boto3

    cloudformation = boto3.client("cloudformation", region_name="eu-west-1")
    base = "https://sqs.eu-west-1.amazonaws.com/123456789012/costguard-"
    outputs = {
        "DecisionsDeadLetterQueueUrl": base + "dlq",
        "DecisionsQueueUrl": base + "decisions",
        "FailedEventsQueueUrl": base + "failed",
    }
    moved: list[tuple[str, str, str | None]] = []
    monkeypatch.setattr(clients, "client", client)
    monkeypatch.setattr(
        redrive,
        "redrive_report",
        lambda source, target, region=None: moved.append((source, target, region)) or redrive.Redriven(),
    )
    with Stubber(cloudformation) as stub:
        stub.add_response(
            "describe_stacks",
            {
                "Stacks": [
                    {
                        "StackName": "costguard",
                        "CreationTime": "2026-11-20T12:00:00Z",
                        "StackStatus": "CREATE_COMPLETE",
                        "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()],
                    }
                ]
            },
            {"StackName": "costguard"},
        )
        assert cli.main(["redrive"]) == 0
    assert made == {"cloudformation": "eu-west-1"}
    assert moved == [(base + "dlq", base + "decisions", None)]
    assert redrive.queue_region(base + "dlq") == "eu-west-1"
    assert redrive.queue_region("http://localhost:4566/000000000000/q") is None


def test_redrive_refuses_half_a_pair_of_queues(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["redrive", "--dlq-url", "https://sqs.us-east-1.amazonaws.com/1/q"]) == 2
    assert "give both --dlq-url and --queue-url" in capsys.readouterr().err
