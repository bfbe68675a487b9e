"""Issue 40: the shipped failed-training-job event, moved to another account in eu-west-1, replays with a cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from costguard.local.replay import replay
from costguard.local.stack import LocalStack
from costguard.pricing import bundled_price
from tests.conftest import load_event

ACCOUNT, REGION = "210987654321", "eu-west-1"


def _moved(tmp_path: Path, name: str, instance_type: str | None = None) -> Path:
    """An events/ file with its account and region changed (and its instance type, when given)."""
    event = load_event(name)
    text = json.dumps(event).replace("123456789012", ACCOUNT).replace(event["region"], REGION)
    moved = json.loads(text)
    if instance_type:
        moved["detail"]["ResourceConfig"]["InstanceType"] = instance_type
        moved["id"] = f"{moved['id'][:-4]}beef"
    path = tmp_path / f"{REGION}-{name}"
    path.write_text(json.dumps(moved))
    return path


def test_a_failed_p4d_training_job_in_eu_west_1_has_a_cost(stack: LocalStack, tmp_path: Path) -> None:
    path = _moved(tmp_path, "sagemaker-training-job-failed-p4d.json")
    detail = json.loads(path.read_text())["detail"]
    price = bundled_price("ml.p4d.24xlarge", REGION)
    assert price is not None
    [result] = replay(stack, [path])
    assert result.ok, result.error
    [decision] = result.decisions
    assert decision["reason"] == "training_job_failed"
    hours = detail["BillableTimeInSeconds"] / 3600
    expected = round(hours * detail["ResourceConfig"]["InstanceCount"] * price.usd_per_hour, 2)
    assert decision["cost_usd"] == expected
    said = json.dumps(result.slack)
    assert f"${expected:,.2f}" in said
    assert "unknown amount" not in said and "eu-west-1" in said


def test_a_type_neither_source_prices_says_which_failed(
    stack: LocalStack, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The local stack has a state table, so the default book asks the Price List (which the embedded AWS
    does not serve) for a type the table lacks: the cost is unknown, and the book says both reasons."""
    path = _moved(tmp_path, "sagemaker-training-job-failed-p4d.json", instance_type="ml.inf2.xlarge")
    [result] = replay(stack, [path])
    assert result.ok, result.error
    [decision] = result.decisions
    assert decision["cost_usd"] is None
    said = {
        getattr(record, "why", "")
        for record in caplog.records
        if record.getMessage() == "price unknown" and getattr(record, "instance_type", "") == "ml.inf2.xlarge"
    }
    [why] = said
    assert why.startswith("no price known for ml.inf2.xlarge in eu-west-1: no public source")
    assert "; the AWS Price List API failed (" in why  # the embedded AWS serves no Price List
    # The message says it too, in place of the cost: never "$0.00", never a bare "no price".
    said_in_slack = json.dumps(result.slack)
    assert (
        "cost an unknown amount (no price known for ml.inf2.xlarge in eu-west-1: no public source"
        in said_in_slack
    )
    assert "$0.00" not in said_in_slack
