"""The cost-alerts topic: exactly AWS Budgets and Cost Anomaly Detection may publish, and the optional GPU
budget alerts that topic and nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from costguard.local.template import Template

pytestmark = pytest.mark.template

ROOT = Path(__file__).resolve().parents[2]
PUBLISHERS = {"budgets.amazonaws.com", "costalerts.amazonaws.com"}


def _resources() -> dict[str, Any]:
    return Template.load(ROOT / "template.yaml").resources


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_topic_policy_lets_exactly_the_two_services_publish() -> None:
    resources = _resources()
    policies = [
        r
        for r in resources.values()
        if r.get("Type") == "AWS::SNS::TopicPolicy"
        and {"Ref": "CostAlertsTopic"} in _as_list(r["Properties"]["Topics"])
    ]
    assert len(policies) == 1, "the cost-alerts topic needs exactly one topic policy"
    statements = policies[0]["Properties"]["PolicyDocument"]["Statement"]
    principals: list[str] = []
    for statement in statements:
        assert statement["Effect"] == "Allow"
        principal = statement["Principal"]
        assert set(principal) == {"Service"}, f"{statement.get('Sid')}: only service principals may publish"
        principals += _as_list(principal["Service"])
        assert [a.lower() for a in _as_list(statement["Action"])] == ["sns:publish"]
        assert statement["Resource"] == {"Ref": "CostAlertsTopic"}
        # Each service publishes only on behalf of this account (no confused deputy).
        assert statement["Condition"]["StringEquals"]["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}
    assert sorted(principals) == sorted(PUBLISHERS)


def test_budgets_function_is_subscribed_to_the_topic_and_the_anomaly_rule() -> None:
    events = _resources()["BudgetsFunction"]["Properties"]["Events"]
    sns = [e for e in events.values() if e["Type"] == "SNS"]
    assert [e["Properties"]["Topic"] for e in sns] == [{"Ref": "CostAlertsTopic"}]
    assert sns[0]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"] == {
        "Fn::GetAtt": ["FailedEventsQueue", "Arn"]
    }
    patterns = [e["Properties"]["Pattern"] for e in events.values() if e["Type"] == "EventBridgeRule"]
    assert patterns == [{"source": ["aws.ce"], "detail-type": ["Anomaly Detected"]}]


def test_gpu_budget_is_optional_and_alerts_only_the_topic() -> None:
    resources = _resources()
    budget = resources["GpuBudget"]
    assert budget["Condition"] == "CreateGpuBudget"
    props = budget["Properties"]
    assert props["Budget"]["BudgetType"] == "COST"
    assert props["Budget"]["TimeUnit"] == "MONTHLY"
    assert props["Budget"]["BudgetLimit"]["Amount"] == {"Ref": "MonthlyGpuBudgetUsd"}
    kinds = {
        (n["Notification"]["NotificationType"], n["Notification"]["Threshold"])
        for n in props["NotificationsWithSubscribers"]
    }
    assert {("ACTUAL", 100), ("FORECASTED", 100)} <= kinds
    for notification in props["NotificationsWithSubscribers"]:
        assert notification["Subscribers"] == [
            {"SubscriptionType": "SNS", "Address": {"Ref": "CostAlertsTopic"}}
        ]
