"""The dashboard (Dashboard=on): its body is valid once CloudFormation substitutes it, and every figure it shows is
one costguard writes: the ledger's metrics as flows/ledger_report.py publishes them, the log line pipeline.py
writes per finding told, the stack's own log groups, functions and queues."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.detect.ledger_summary import day_figures
from costguard.flows.ledger_report import NAMESPACE
from costguard.ledger import ACTED, WOULD, Entry
from costguard.local.template import Template
from tests.conftest import ROOT
from tests.template.iam import body

pytestmark = pytest.mark.template

TEMPLATE = Template.load(ROOT / "template.yaml")


def _dashboard() -> dict[str, Any]:
    resource: dict[str, Any] = body()["Resources"]["CostguardDashboard"]
    return resource


def _substituted() -> tuple[dict[str, Any], set[str]]:
    """The body with each ${...} replaced as CloudFormation would (a placeholder), and the names it used."""
    text = _dashboard()["Properties"]["DashboardBody"]["Fn::Sub"]
    names = set(re.findall(r"\$\{([^}!]+)\}", text))
    return json.loads(re.sub(r"\$\{([^}!]+)\}", lambda m: f"sub-{m[1].replace('.', '-')}", text)), names


def test_the_dashboard_exists_only_when_asked_for() -> None:
    assert _dashboard()["Condition"] == "DashboardOn"
    assert TEMPLATE.conditions()["DashboardOn"] is False  # off by default: $3 a month
    assert TEMPLATE.conditions({"Dashboard": "on"})["DashboardOn"] is True
    assert body()["Outputs"]["DashboardName"]["Condition"] == "DashboardOn"


def test_its_body_parses_and_names_only_the_stacks_own_resources() -> None:
    dashboard, names = _substituted()
    assert len(dashboard["widgets"]) == 5
    resources = body()["Resources"]
    for name in names - {"AWS::Region", "AWS::StackName"}:
        logical_id = name.split(".")[0]
        assert logical_id in resources, name
    log_groups = {n for n in names if n.endswith("LogGroup")}
    assert {"GpuIdleLogGroup", "TrainingCeilingsLogGroup", "BudgetsLogGroup"} <= log_groups
    queues = {n.split(".")[0] for n in names if n.endswith(".QueueName")}
    assert queues == {
        "DecisionsQueue",
        "UrgentDecisionsQueue",
        "DecisionsDeadLetterQueue",
        "FailedEventsQueue",
        "SweepDeadLetterQueue",
    }


def test_the_ledger_widgets_show_the_metrics_the_daily_run_publishes() -> None:
    dashboard, _ = _substituted()
    shown = {
        (row[0], row[1], row[2], row[3])
        for widget in dashboard["widgets"]
        if widget["type"] == "metric"
        for row in widget["properties"]["metrics"]
        if isinstance(row[0], str) and row[0] == NAMESPACE
    }
    now = datetime(2026, 11, 24, 8, tzinfo=UTC)
    entry = Entry(
        "d", now - timedelta(hours=10), "1", "r", "ec2_instance", "i", "i", "t", None, "g", ACTED, 1.0
    )
    published = {
        (NAMESPACE, name, "Mode", mode)
        for mode, figures in day_figures([entry], now).items()
        for name in figures
    }
    assert shown == published  # every series the run writes is shown, and nothing it does not write
    assert {mode for *_, mode in shown} == {ACTED, WOULD}


def test_findings_by_reason_read_the_line_the_pipeline_writes_per_finding_told() -> None:
    dashboard, _ = _substituted()
    [log] = [w for w in dashboard["widgets"] if w["type"] == "log"]
    query = log["properties"]["query"]
    assert "filter message = 'finding told'" in query and "by reason" in query
    pipeline = (ROOT / "shared" / "costguard" / "pipeline.py").read_text()
    assert '"finding told"' in pipeline and '"reason": decision.reason.value' in pipeline


def test_errors_are_searched_among_the_stacks_own_functions() -> None:
    dashboard, _ = _substituted()
    [expression] = [
        row[0]["expression"]
        for w in dashboard["widgets"]
        if w["type"] == "metric"
        for row in w["properties"]["metrics"]
        if isinstance(row[0], dict)
    ]
    assert 'MetricName="Errors"' in expression and '"sub-AWS::StackName-"' in expression
