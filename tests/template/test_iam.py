"""Least privilege, checked: each role in template.yaml is granted exactly the IAM actions its code declares,
no action is a wildcard, and every action that changes something is narrowed by resource or condition."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.template.iam import (
    FUNCTION_TYPE,
    Grant,
    body,
    declared,
    drift,
    granted,
    grants,
    roles,
)

pytestmark = pytest.mark.template

MARK_TAG = "costguard:marked-at"
PROTECT_TAG = "costguard:protect"
ALARM_PREFIX = "costguard-gpu-idle-"
# Values of the protect tag that do not protect (policy.is_protected), any case.
NOT_PROTECTING = {"false", "no", "0", "off"}

# Actions IAM authorizes on no narrower resource than "*" (no resource-level permissions): reads only.
EVERY_RESOURCE_ALLOWED = {
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeCapacityReservations",
    "cloudwatch:GetMetricData",
    "cloudwatch:ListMetrics",
    "cloudwatch:DescribeAlarms",
    "pricing:GetProducts",
    "sagemaker:ListTrainingJobs",
    "sagemaker:ListNotebookInstances",
    "sagemaker:ListEndpoints",
    # Asked of whatever the list calls return, which may be any job, notebook or endpoint of the account.
    "sagemaker:DescribeTrainingJob",
    "sagemaker:DescribeEndpoint",
    "sagemaker:DescribeEndpointConfig",
    "sagemaker:ListTags",
}

# Stops and cancels: only what costguard marked, and never what carries the protect tag.
STOPS = {
    "ec2:StopInstances": ":instance/*",
    "sagemaker:StopTrainingJob": ":training-job/*",
    "sagemaker:StopNotebookInstance": ":notebook-instance/*",
    "ec2:CancelCapacityReservation": ":capacity-reservation/*",
}
# Marking: costguard's own tag key and nothing else.
TAGGING = {"ec2:CreateTags", "ec2:DeleteTags", "sagemaker:AddTags", "sagemaker:DeleteTags"}
ALARMS = {"cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms", "cloudwatch:TagResource"}


def _grants_of(action: str, template: dict[str, Any] | None = None) -> list[Grant]:
    return [g for g in grants(template or body()) if action in g.actions]


def _resources(grant: Grant) -> list[Any]:
    value = grant.statement.get("Resource")
    return value if isinstance(value, list) else [value]


def _sub_text(resource: Any) -> str:
    """A !Sub ARN's text (first element of the two-argument form), or "" for anything else."""
    if isinstance(resource, dict) and "Fn::Sub" in resource:
        sub = resource["Fn::Sub"]
        return sub if isinstance(sub, str) else str(sub[0])
    return ""


def _refuses_protected(condition: dict[str, Any]) -> bool:
    """The protect tag must be absent, or say it does not protect."""
    if condition.get("Null", {}).get(f"aws:ResourceTag/{PROTECT_TAG}") == "true":
        return True
    allowed = condition.get("StringEqualsIgnoreCaseIfExists", {}).get(f"aws:ResourceTag/{PROTECT_TAG}")
    values = allowed if isinstance(allowed, list) else [allowed]
    return allowed is not None and {str(v).lower() for v in values} <= NOT_PROTECTING


# --- exactly what the code declares -----------------------------------------------------------------


def test_every_role_is_granted_exactly_what_its_code_declares() -> None:
    template = body()
    functions = [r for r, resource in roles(template).items() if resource["Type"] == FUNCTION_TYPE]
    assert len(functions) >= 15, f"expected every function of the stack, found {functions}"
    code = declared()
    assert all(code[f] for f in functions), "a function declares no permissions at all"
    problems = drift(template, code)
    assert not problems, "template.yaml and the code's PERMISSIONS disagree:\n" + "\n".join(problems)


def _first_inline_grant(template: dict[str, Any], role: str) -> dict[str, Any]:
    for policy in template["Resources"][role]["Properties"]["Policies"]:
        if isinstance(policy, dict) and "Statement" in policy:
            statements: list[dict[str, Any]] = policy["Statement"]
            return statements[0]
    raise AssertionError(f"{role} has no inline statement")


def test_the_check_reports_an_action_removed_from_the_template() -> None:
    template = copy.deepcopy(body())
    statement = next(
        s
        for p in template["Resources"]["GpuIdleFunction"]["Properties"]["Policies"]
        if isinstance(p, dict) and "Statement" in p
        for s in p["Statement"]
        if "ec2:StopInstances" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    )
    statement["Action"] = "ec2:StopInstances-removed"  # the stop permission is gone
    problems = drift(template, declared())
    assert any(
        p.startswith("GpuIdleFunction: the code needs") and "'ec2:StopInstances'" in p for p in problems
    ), problems


def test_the_check_reports_an_action_added_to_the_template() -> None:
    template = copy.deepcopy(body())
    statement = _first_inline_grant(template, "BatchJobsFunction")
    actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
    statement["Action"] = [*actions, "ec2:TerminateInstances"]
    problems = drift(template, declared())
    assert problems == [
        "BatchJobsFunction: the template grants ['ec2:TerminateInstances'], which no code declares"
    ]


def test_the_check_reports_code_that_needs_more_than_the_template_grants() -> None:
    code = dict(declared())
    code["NotifierFunction"] = code["NotifierFunction"] | {"sqs:SendMessage"}
    assert drift(body(), code) == [
        "NotifierFunction: the code needs ['sqs:SendMessage'], which the template does not grant"
    ]


def test_sam_policy_templates_are_expanded_before_comparing() -> None:
    # The notifier's secret read comes from AWSSecretsManagerGetSecretValuePolicy, the state machine's
    # invokes from LambdaInvokePolicy: both count as granted.
    allowed = granted(body())
    assert "secretsmanager:GetSecretValue" in allowed["NotifierFunction"]
    assert allowed["AuditStateMachine"] == {"lambda:InvokeFunction"}


# --- no wildcard, and narrowed where IAM allows -----------------------------------------------------


def test_no_wildcard_action_even_inside_sam_policy_templates() -> None:
    wildcards = [
        f"{g.role} {g.sid}: {sorted(g.actions)}" for g in grants(body()) if any("*" in a for a in g.actions)
    ]
    assert not wildcards, (
        "wildcard actions (SAM's SQSSendMessagePolicy grants sqs:SendMessage*):\n" + "\n".join(wildcards)
    )


def test_only_actions_without_resource_level_permissions_apply_to_every_resource() -> None:
    problems = [
        f"{g.role} {g.sid}: {sorted(g.actions - EVERY_RESOURCE_ALLOWED)} on every resource"
        for g in grants(body())
        if "*" in _resources(g) and g.actions - EVERY_RESOURCE_ALLOWED
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("action", sorted(STOPS))
def test_stops_and_cancels_only_what_costguard_marked_and_never_a_protected_resource(action: str) -> None:
    found = _grants_of(action)
    assert found, f"no role is granted {action}: update this test if the code no longer needs it"
    for grant in found:
        where = f"{grant.role} {grant.sid}"
        texts = [_sub_text(r) for r in _resources(grant)]
        assert any(t.endswith(STOPS[action]) for t in texts), (
            f"{where}: {action} is not limited to {STOPS[action]}"
        )
        assert all(t for t in texts), f"{where}: {action} has a resource that is not a !Sub ARN"
        condition = grant.statement.get("Condition", {})
        assert condition.get("Null", {}).get(f"aws:ResourceTag/{MARK_TAG}") == "false", (
            f"{where}: {action} does not require costguard's mark"
        )
        assert _refuses_protected(condition), f"{where}: {action} does not refuse the protect tag"


@pytest.mark.parametrize("action", sorted(TAGGING))
def test_marks_touch_costguards_own_tag_key_only(action: str) -> None:
    found = _grants_of(action)
    assert found, f"no role is granted {action}"
    for grant in found:
        assert "*" not in _resources(grant), f"{grant.role} {grant.sid}: {action} on every resource"
        keys = grant.statement.get("Condition", {}).get("ForAllValues:StringEquals", {}).get("aws:TagKeys")
        assert keys == [MARK_TAG], f"{grant.role} {grant.sid}: {action} may write tag keys {keys!r}"


@pytest.mark.parametrize("action", sorted(ALARMS))
def test_alarms_are_created_and_deleted_under_costguards_prefix_only(action: str) -> None:
    found = _grants_of(action)
    assert found, f"no role is granted {action}"
    for grant in found:
        texts = [_sub_text(r) for r in _resources(grant)]
        assert texts and all(t.endswith(f":alarm:{ALARM_PREFIX}*") for t in texts), (
            f"{grant.role} {grant.sid}: {action} on {_resources(grant)}"
        )


def test_state_queue_and_bucket_access_is_limited_to_the_stacks_own_resources() -> None:
    problems = []
    for grant in grants(body()):
        services = {a.split(":", 1)[0] for a in grant.actions}
        resources = _resources(grant)
        if services & {"dynamodb", "sqs", "s3"} and any(not isinstance(r, dict) for r in resources):
            problems.append(f"{grant.role} {grant.sid}: literal resource {resources}")
        if "s3" in services:
            texts = [_sub_text(r) for r in resources]
            objects = [t for t in texts if t]
            if grant.actions & {"s3:PutObject", "s3:GetObject"} and not all(
                t.endswith(("/runs/*", "/reports/*", "/config/*")) for t in objects
            ):
                problems.append(
                    f"{grant.role} {grant.sid}: objects outside runs/, reports/, config/: {objects}"
                )
    assert not problems, "\n".join(problems)
