"""`costguard replay` of events captured in the user's own account: every rule pins the stack's account, so the
stack is played as deployed in the event's account; a no-match names the field that fails; an SNS alert whose
topic ARN was redacted is still delivered, its account read from the message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from costguard.cli import main
from tests.conftest import EVENTS

OTHER = "999988887777"
DEMO_ACCOUNT = "123456789012"


def held(name: str, to: Path, account: str = OTHER, **detail: Any) -> str:
    """A copy of events/<name> as captured in ``account`` (every mention of the samples' account changed)."""
    text = (EVENTS / name).read_text().replace(DEMO_ACCOUNT, account)
    event = json.loads(text)
    event["detail"].update(detail)
    to.write_text(json.dumps(event))
    return str(to)


def redacted_topic(name: str, to: Path) -> str:
    """An SNS alert from events/ whose TopicArn's account was blanked out by hand, as in a pasted capture."""
    event = json.loads((EVENTS / name).read_text())
    sns = event["Records"][0]["Sns"]
    sns["TopicArn"] = sns["TopicArn"].replace(f":{DEMO_ACCOUNT}:", ": 1234567890:")
    to.write_text(json.dumps(event))
    return str(to)


def test_events_of_the_users_own_account(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sleeps: list[float]
) -> None:
    failed = held("sagemaker-training-job-failed.json", tmp_path / "failed.json")
    stopping = held(
        "sagemaker-training-job-failed.json", tmp_path / "stopping.json", TrainingJobStatus="Stopping"
    )
    spot = held("ec2-spot-interruption-warning.json", tmp_path / "spot.json")
    budget = redacted_topic("budget-actual-100-ml-research.json", tmp_path / "budget.json")
    anomaly = redacted_topic("cost-anomaly-sns.json", tmp_path / "anomaly.json")
    assert json.loads(Path(failed).read_text())["account"] == OTHER

    assert main(["replay", failed, stopping, spot, budget, anomaly, "--json"]) == 1  # the no-match
    out, err = capsys.readouterr()
    lines = {(line := json.loads(text))["event"]: line for text in out.strip().splitlines()}

    # Routed by the rule as deployed in 999988887777, and handled.
    for path, function, reason in (
        (failed, "TrainingJobsFunction", "training_job_failed"),
        (spot, "SpotInterruptionsFunction", "spot_interruption"),
    ):
        line = lines[path]
        assert "error" not in line, line
        assert (line["function"], line["route"]) == (function, "routed by rule")
        assert reason in {d["reason"] for d in line["decisions"]}
        assert any(f"the event's account {OTHER}" in note for note in line["notes"])

    # A no-match names the field that fails, and what the rule takes.
    error = lines[stopping]["error"]
    assert "no rule in template.yaml matches this event (source='aws.sagemaker', detail-type=" in error
    assert "the field that fails is detail.TrainingJobStatus: the event has 'Stopping'" in error
    assert "TrainingJobsFunction's rule takes" in error and '"Failed"' in error
    assert "account" not in error.split("matches this event", 1)[1]
    assert f"costguard: {stopping}: no rule in template.yaml matches this event" in err

    # The redacted topic account does not reject the alert: its account is the message's.
    for path, reason in ((budget, "budget_breach"), (anomaly, "cost_anomaly")):
        line = lines[path]
        assert "error" not in line, line
        assert line["function"] == "BudgetsFunction"
        assert reason in {d["reason"] for d in line["decisions"]}
        assert line["slack"], "delivered"
    [breach] = [d for d in lines[budget]["decisions"] if d["resource_id"].startswith("ml-research-gpu")]
    assert breach["action"] == "notify"
