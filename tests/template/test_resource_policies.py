"""Resource policies, evaluated: the decisions queue takes notices from costguard's own roles only, and the
audit bucket takes nothing over plain HTTP."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.template.iam import (
    ACCOUNT,
    ALLOW,
    DENY,
    OTHER_ACCOUNT,
    STACK_ID,
    Caller,
    Rendered,
    Request,
    body,
    decide,
    grants,
    resource_policy,
    slack_app_body,
)

pytestmark = pytest.mark.template

QUEUE = "DecisionsQueue"
QUEUE_ARN = {"Fn::GetAtt": [QUEUE, "Arn"]}
REDRIVE_ROLE = "DecisionsRedriveRole"
# What a user or role of the account may hold: every SQS action on every queue.
SQS_ANYWHERE = {"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _queue_policy(template: dict[str, Any]) -> str:
    found: list[str] = [
        name
        for name, r in template["Resources"].items()
        if r.get("Type") == "AWS::SQS::QueuePolicy" and {"Ref": QUEUE} in _as_list(r["Properties"]["Queues"])
    ]
    # A queue has one policy: a second QueuePolicy resource would overwrite the first.
    assert len(found) == 1, f"the decisions queue needs exactly one queue policy, found {found}"
    return found[0]


def _senders(template: dict[str, Any]) -> set[str]:
    """The function roles granted sqs:SendMessage on the decisions queue."""
    return {
        g.role
        for g in grants(template)
        if "sqs:SendMessage" in g.actions and QUEUE_ARN in _as_list(g.statement["Resource"])
    }


def _role_arn(template: dict[str, Any], function: str) -> str:
    return str(Rendered(template).attribute(f"{function}Role", "Arn"))


def _send(template: dict[str, Any], caller: Caller, action: str = "sqs:SendMessage", **context: str) -> str:
    """A request on the decisions queue: its policy, plus sqs:* on "*" for an IAM caller of the account."""
    statements = resource_policy(template, _queue_policy(template))
    if caller.arn and caller.arn.split(":")[4] == ACCOUNT:
        statements.append(SQS_ANYWHERE)
    queue = Rendered(template).attribute(QUEUE, "Arn")
    return decide(statements, Request(action, queue, caller, context))


def test_the_functions_that_queue_notices_are_the_ones_the_policy_names() -> None:
    template = body()
    senders = _senders(template)
    assert {"GpuIdleFunction", "BudgetsFunction", "TrainingJobsFunction"} <= senders
    assert "NotifierFunction" not in senders
    policy = template["Resources"][_queue_policy(template)]["Properties"]["PolicyDocument"]
    [deny] = [s for s in policy["Statement"] if s["Effect"] == "Deny"]
    assert deny["Principal"] == "*"
    assert deny["Action"] == "sqs:SendMessage", (
        "only sending is refused: receive and delete stay the notifier's"
    )
    # A role of a function that exists only under a condition (the Slack app's worker) is named under it.
    named = []
    for arn in deny["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]:
        if "Fn::If" in arn:
            condition, arn, absent = arn["Fn::If"]
            assert absent == {"Ref": "AWS::NoValue"}
            function = arn["Fn::GetAtt"][0].removesuffix("Role")
            assert template["Resources"][function]["Condition"] == condition, function
        named.append(arn)
    expected = [{"Fn::GetAtt": [f"{f}Role", "Arn"]} for f in sorted(senders)] + [
        {"Fn::GetAtt": [REDRIVE_ROLE, "Arn"]}
    ]
    assert sorted(named, key=str) == sorted(expected, key=str)


@pytest.mark.parametrize("function", sorted(_senders(body())))
def test_costguards_functions_queue_notices(function: str) -> None:
    template = slack_app_body()  # every function exists
    assert _send(template, Caller(arn=_role_arn(template, function))) == ALLOW


def test_without_a_slack_app_the_worker_is_not_named_and_the_others_still_queue() -> None:
    template = body()
    assert template["Parameters"]["SlackApp"]["Default"] == "off"
    worker = _role_arn(template, "InteractionActionsFunction")
    assert _send(template, Caller(arn=worker)) == DENY
    assert _send(template, Caller(arn=_role_arn(template, "GpuIdleFunction"))) == ALLOW


@pytest.mark.parametrize(
    "caller",
    [
        Caller.role("ml-engineer"),
        Caller.role("costguard-NotifierFunctionRole-1A2B3C4D5E6F"),
        Caller(arn=f"arn:aws:iam::{ACCOUNT}:user/intern"),
        Caller.role("admin", account=OTHER_ACCOUNT),
    ],
    ids=lambda c: c.arn,
)
def test_nobody_else_queues_a_notice(caller: Caller) -> None:
    """A queued notice is posted to Slack as costguard's word: refused even with sqs:* on "*"."""
    assert _send(body(), caller) == DENY


def test_without_the_deny_any_role_of_the_account_could_queue_a_notice() -> None:
    template = copy.deepcopy(body())
    document = template["Resources"][_queue_policy(template)]["Properties"]["PolicyDocument"]
    document["Statement"] = [s for s in document["Statement"] if s["Effect"] != "Deny"]
    assert _send(template, Caller.role("ml-engineer")) == ALLOW


def test_the_ops_alarm_rule_still_queues_its_notices_and_no_other_rule_does() -> None:
    template = body()
    rule = Rendered(template).attribute("OpsAlarmRule", "Arn")
    events = Caller(service="events.amazonaws.com")
    assert _send(template, events, **{"aws:SourceArn": rule}) == ALLOW
    other = rule.replace(":rule/", ":rule/someone-elses-")
    assert _send(template, events, **{"aws:SourceArn": other}) != ALLOW
    assert _send(template, Caller(service="sns.amazonaws.com")) != ALLOW


def test_the_notifier_still_receives_and_deletes() -> None:
    """The SQS poller reads with the notifier's role (AWSLambdaSQSQueueExecutionRole): not refused."""
    notifier = Caller(arn=_role_arn(body(), "NotifierFunction"))
    for action in (
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:GetQueueAttributes",
    ):
        assert _send(body(), notifier, action=action) == ALLOW, action


# --- the redrive ------------------------------------------------------------------------------------


def test_the_redrive_role_moves_notices_back_and_nothing_more() -> None:
    template = body()
    rendered = Rendered(template)
    role = Caller(arn=rendered.attribute(REDRIVE_ROLE, "Arn"))
    statements = resource_policy(template, REDRIVE_ROLE)
    assert {a for s in statements for a in _as_list(s["Action"])} == {
        "cloudformation:DescribeStacks",
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:SendMessage",
    }
    dlq = rendered.attribute("DecisionsDeadLetterQueue", "Arn")
    failed = rendered.attribute("FailedEventsQueue", "Arn")
    queue = rendered.attribute(QUEUE, "Arn")
    for source in (dlq, failed):
        for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage"):
            assert decide(statements, Request(action, source, role)) == ALLOW
        assert decide(statements, Request("sqs:SendMessage", source, role)) != ALLOW
    assert decide(statements, Request("sqs:SendMessage", queue, role)) == ALLOW
    assert decide(statements, Request("sqs:ReceiveMessage", queue, role)) != ALLOW
    assert decide(statements, Request("cloudformation:DescribeStacks", STACK_ID, role)) == ALLOW
    # and the queue's own policy lets it send
    assert _send(template, role) == ALLOW


def test_the_redrive_role_is_assumed_from_the_account_only() -> None:
    [trust] = Rendered(body()).value(
        body()["Resources"][REDRIVE_ROLE]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    )
    assert trust == {
        "Effect": "Allow",
        "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
        "Action": "sts:AssumeRole",
    }
    outputs = body()["Outputs"]
    assert outputs["DecisionsRedriveRoleArn"]["Value"] == {"Fn::GetAtt": [REDRIVE_ROLE, "Arn"]}


# --- TLS only --------------------------------------------------------------------------------------


def _bucket(template: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    [name] = [
        n
        for n, r in template["Resources"].items()
        if r.get("Type") == "AWS::S3::BucketPolicy"
        and r["Properties"]["Bucket"] == {"Ref": "AuditReportsBucket"}
    ]
    return resource_policy(template, name), Rendered(template).attribute("AuditReportsBucket", "Arn")


@pytest.mark.parametrize(
    ("action", "key"),
    [
        ("s3:GetObject", "reports/2026/11/20/run/report.html"),
        ("s3:PutObject", "runs/run/us-east-1/metrics.json"),
        ("s3:DeleteObject", "reports/2026/11/20/run/report.json"),
        ("s3:GetObjectVersion", "config/rules.json"),
        ("s3:ListBucket", None),
        ("s3:GetBucketPolicy", None),
        ("s3:PutBucketPolicy", None),
        ("s3:PutLifecycleConfiguration", None),
    ],
)
def test_nothing_goes_over_plain_http(action: str, key: str | None) -> None:
    statements, bucket = _bucket(body())
    resource = f"{bucket}/{key}" if key else bucket
    admin = Caller.role("admin")
    statements = [*statements, {"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]
    assert decide(statements, Request(action, resource, admin, {"aws:SecureTransport": "false"})) == DENY
    assert decide(statements, Request(action, resource, admin, {"aws:SecureTransport": "true"})) == ALLOW


# --- the interactions queue: only the endpoint's clicks ------------------------------------------------------


def _click_queue(template: dict[str, Any], caller: Caller, action: str = "sqs:SendMessage") -> str:
    [name] = [
        n
        for n, r in template["Resources"].items()
        if r.get("Type") == "AWS::SQS::QueuePolicy"
        and {"Ref": "InteractionsQueue"} in _as_list(r["Properties"]["Queues"])
    ]
    statements = resource_policy(template, name)
    if caller.arn and caller.arn.split(":")[4] == ACCOUNT:
        statements.append(SQS_ANYWHERE)
    queue = Rendered(template).attribute("InteractionsQueue", "Arn")
    return decide(statements, Request(action, queue, caller, {}))


def test_only_the_interactions_endpoint_queues_a_click() -> None:
    template = slack_app_body()
    assert _click_queue(template, Caller(arn=_role_arn(template, "InteractionsFunction"))) == ALLOW
    for caller in (
        Caller.role("ml-engineer"),
        Caller(arn=_role_arn(template, "InteractionActionsFunction")),
        Caller(arn=_role_arn(template, "GpuIdleFunction")),
        Caller.role("costguard-dev-InteractionsFunctionRole-1A2B3C4D5E6F"),
        Caller.role("admin", account=OTHER_ACCOUNT),
    ):
        assert _click_queue(template, caller) == DENY, caller.arn
    # The worker still receives and deletes with its own role.
    worker = Caller(arn=_role_arn(template, "InteractionActionsFunction"))
    assert _click_queue(template, worker, "sqs:ReceiveMessage") == ALLOW
