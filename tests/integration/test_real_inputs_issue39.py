"""Real inputs (issue 39, case 7): a bare SNS notification (what an HTTPS or SQS subscriber receives) replays as its
Lambda delivery does; a handled warning logs its error's type and message, not a traceback; a HyperPod node
DescribeClusterNode cannot find is told as not found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from costguard.cli import main
from tests.conftest import EVENTS, FIXTURES

WRAPPED = FIXTURES / "sns-budget-stack-finops.json"
USER_TOPIC = FIXTURES / "sns-budget-user-topic-bad-timestamp.json"
NODE = EVENTS / "sagemaker-hyperpod-node-health-unhealthy.json"
GONE_NODE = "i-0b7e5f00000000dead"


def bare(wrapped: Path, to: Path) -> str:
    """The notification of a Lambda SNS delivery as SNS posts it to an HTTPS endpoint or an SQS queue: no
    ``Records``, and the two URLs spelled as SNS's HTTP form spells them."""
    sns: dict[str, Any] = json.loads(wrapped.read_text())["Records"][0]["Sns"]
    sns["SigningCertURL"] = sns.pop("SigningCertUrl")
    sns["UnsubscribeURL"] = sns.pop("UnsubscribeUrl")
    to.write_text(json.dumps(sns, indent=2))
    return str(to)


def _replayed(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code = main(["replay", *argv, "--json"])
    line: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 0, line.get("error")
    return line


def _decided(line: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [
        (d["reason"], d["action"], d["resource_id"], d["hourly_usd"], d["dry_run"]) for d in line["decisions"]
    ]


@pytest.mark.parametrize(
    ("wrapped", "route"),
    [
        (WRAPPED, "routed by subscription"),  # the cost-alerts topic of a stack named finops
        (USER_TOPIC, "routed by content: budgets text"),  # the user's own topic
    ],
)
def test_a_bare_sns_notification_replays_as_its_lambda_delivery(
    wrapped: Path, route: str, capsys: pytest.CaptureFixture[str], sleeps: list[float], tmp_path: Path
) -> None:
    notification = bare(wrapped, tmp_path / "bare.json")
    as_lambda = _replayed(capsys, str(wrapped))
    assert (as_lambda["function"], as_lambda["route"]) == ("BudgetsFunction", route)
    assert _decided(as_lambda) and {d["reason"] for d in as_lambda["decisions"]} == {"budget_breach"}

    as_posted = _replayed(capsys, notification)
    assert (as_posted["function"], as_posted["route"]) == ("BudgetsFunction", route)
    assert _decided(as_posted) == _decided(as_lambda)
    assert [n for n in as_posted.get("notes", []) if "bare SNS notification" in n]
    # Forced to the budgets function, as the issue tried: the same decisions.
    forced = _replayed(capsys, notification, "--function", "BudgetsFunction")
    assert forced["route"] == "routed by --function" and _decided(forced) == _decided(as_lambda)


def test_a_node_describe_cluster_node_cannot_find_is_told_as_not_found_and_logged_without_a_traceback(
    capsys: pytest.CaptureFixture[str], sleeps: list[float], tmp_path: Path
) -> None:
    event = json.loads(NODE.read_text())
    event["id"] = "c0ffee00-0000-4000-8000-0000000007de"
    event["detail"]["InstanceId"] = GONE_NODE
    path = tmp_path / "node-gone.json"
    path.write_text(json.dumps(event))
    assert main(["replay", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    [finding] = json.loads(out)["findings"]
    assert "node not found" in finding["summary"] and GONE_NODE in finding["summary"]
    assert "did not name a priced type" not in finding["summary"]
    # The handled warning: one log line naming the error, its type and message, no traceback.
    [warning] = [json.loads(line) for line in err.splitlines() if "DescribeClusterNode failed" in line]
    assert warning["level"] == "WARNING"
    assert "Traceback (most recent call last)" not in err
    assert warning["exception_name"] == "ClientError"
    assert warning["exception"].startswith("ClientError: An error occurred (")
    assert GONE_NODE in warning["exception"] and "\n" not in warning["exception"]
