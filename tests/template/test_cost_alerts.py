"""The cost-alerts topic: exactly AWS Budgets and Cost Anomaly Detection may publish, no user or role of the
account can forge an alert, and the optional GPU budget alerts that topic and nothing else."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from costguard.detect.escalation import DEFAULT_ESCALATION, parse_levels
from costguard.local.template import Template
from tests.template.iam import (
    ACCOUNT,
    ALLOW,
    DENY,
    OTHER_ACCOUNT,
    Caller,
    Rendered,
    Request,
    body,
    decide,
    resource_policy,
)

pytestmark = pytest.mark.template

ROOT = Path(__file__).resolve().parents[2]
PUBLISHERS = {"budgets.amazonaws.com", "costalerts.amazonaws.com"}
# What an IAM user or role of the account may hold: sns:Publish on every topic.
PUBLISH_ANYWHERE = {"Effect": "Allow", "Action": "sns:Publish", "Resource": "*"}


def _resources() -> dict[str, Any]:
    return Template.load(ROOT / "template.yaml").resources


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _topic_policy(resources: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    policies = [
        (name, r)
        for name, r in resources.items()
        if r.get("Type") == "AWS::SNS::TopicPolicy"
        and {"Ref": "CostAlertsTopic"} in _as_list(r["Properties"]["Topics"])
    ]
    assert len(policies) == 1, "the cost-alerts topic needs exactly one topic policy"
    return policies[0]


def test_topic_policy_lets_exactly_the_two_services_publish() -> None:
    _, policy = _topic_policy(_resources())
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    principals: list[str] = []
    for statement in (s for s in statements if s["Effect"] == "Allow"):
        principal = statement["Principal"]
        assert set(principal) == {"Service"}, f"{statement.get('Sid')}: only service principals may publish"
        principals += _as_list(principal["Service"])
        assert [a.lower() for a in _as_list(statement["Action"])] == ["sns:publish"]
        assert statement["Resource"] == {"Ref": "CostAlertsTopic"}
        # Each service publishes only on behalf of this account (no confused deputy).
        assert statement["Condition"]["StringEquals"]["aws:SourceAccount"] == {"Ref": "AWS::AccountId"}
    assert sorted(principals) == sorted(PUBLISHERS)


def test_topic_policy_denies_publishing_to_every_iam_principal() -> None:
    _, policy = _topic_policy(_resources())
    denies = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert denies == [
        {
            "Sid": denies[0].get("Sid"),
            "Effect": "Deny",
            "Principal": "*",
            "Action": "sns:Publish",
            "Resource": {"Ref": "CostAlertsTopic"},
            "Condition": {"Bool": {"aws:PrincipalIsAWSService": "false"}},
        }
    ]


def _publish(template: dict[str, Any], caller: Caller, **context: str) -> str:
    """A Publish to the cost-alerts topic: the topic policy, plus sns:Publish on "*" for an IAM caller."""
    logical_id, _ = _topic_policy(template["Resources"])
    statements = resource_policy(template, logical_id)
    if caller.arn and caller.arn.split(":")[4] == ACCOUNT:
        statements.append(PUBLISH_ANYWHERE)
    topic = Rendered(template).ref("CostAlertsTopic")
    return decide(statements, Request("sns:Publish", topic, caller, context))


@pytest.mark.parametrize("service", sorted(PUBLISHERS))
def test_budgets_and_anomaly_detection_publish_for_this_account_only(service: str) -> None:
    caller = Caller(service=service)
    assert _publish(body(), caller, **{"aws:SourceAccount": ACCOUNT}) == ALLOW
    assert _publish(body(), caller, **{"aws:SourceAccount": OTHER_ACCOUNT}) != ALLOW


@pytest.mark.parametrize(
    "caller",
    [
        Caller.role("ml-engineer"),
        Caller.role("costguard-BudgetsFunctionRole-1A2B3C4D5E6F"),
        Caller(arn=f"arn:aws:iam::{ACCOUNT}:user/intern"),
        Caller.role("admin", account=OTHER_ACCOUNT),
    ],
    ids=lambda c: c.arn,
)
def test_no_user_or_role_can_forge_an_alert(caller: Caller) -> None:
    """A forged "ACTUAL 150%" alert would have costguard stop GPUs: refused even with sns:Publish on "*"."""
    assert _publish(body(), caller) == DENY


def test_another_service_cannot_publish() -> None:
    caller = Caller(service="events.amazonaws.com")
    assert _publish(body(), caller, **{"aws:SourceAccount": ACCOUNT}) != ALLOW


def test_without_the_deny_a_role_of_the_account_could_publish() -> None:
    """The attack the Deny stops: an identity policy alone lets a role publish to a topic of its account."""
    template = copy.deepcopy(body())
    _, policy = _topic_policy(template["Resources"])
    document = policy["Properties"]["PolicyDocument"]
    document["Statement"] = [s for s in document["Statement"] if s["Effect"] != "Deny"]
    assert _publish(template, Caller.role("ml-engineer")) == ALLOW


def test_the_deny_leaves_the_subscription_alone() -> None:
    """Only Publish is refused: the stack's subscription of the budgets function is not."""
    logical_id, _ = _topic_policy(body()["Resources"])
    statements = resource_policy(body(), logical_id)
    topic = Rendered(body()).ref("CostAlertsTopic")
    assert decide(statements, Request("sns:Subscribe", topic, Caller.role("cloudformation-deployer"))) != DENY


def test_budget_escalation_default_is_the_codes_and_stop_all_is_opt_in() -> None:
    default = Template.load(ROOT / "template.yaml").parameter_defaults()["BudgetEscalation"]
    assert default == DEFAULT_ESCALATION == "forecast:notify,actual>=100:stop_idle"
    assert "stop_all" not in default
    parse_levels(default)


def test_budgets_function_is_subscribed_to_the_topic_and_the_anomaly_rule() -> None:
    events = _resources()["BudgetsFunction"]["Properties"]["Events"]
    sns = [e for e in events.values() if e["Type"] == "SNS"]
    assert [e["Properties"]["Topic"] for e in sns] == [{"Ref": "CostAlertsTopic"}]
    assert sns[0]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"] == {
        "Fn::GetAtt": ["FailedEventsQueue", "Arn"]
    }
    patterns = [e["Properties"]["Pattern"] for e in events.values() if e["Type"] == "EventBridgeRule"]
    # The stack's own account, or (an organization's hub) any account forwarding to it.
    pin = {"Fn::If": ["IsOrganization", {"Ref": "AWS::NoValue"}, [{"Ref": "AWS::AccountId"}]]}
    assert patterns == [{"source": ["aws.ce"], "account": pin, "detail-type": ["Anomaly Detected"]}]


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
