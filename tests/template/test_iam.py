"""Least privilege, checked: each role in template.yaml is granted exactly the IAM actions its code declares,
no action is a wildcard, and every action that changes something is narrowed by resource or condition."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.template.iam import (
    ACCOUNT,
    ALLOW,
    FUNCTION_TYPE,
    OTHER_REGION,
    REGION,
    Grant,
    Rendered,
    Request,
    body,
    concrete,
    decide,
    declared,
    drift,
    granted,
    grants,
    role_statements,
    roles,
)

pytestmark = pytest.mark.template

MARK_TAG = "costguard:marked-at"
PROTECT_TAG = "costguard:protect"
SNOOZE_TAG = "costguard:snooze-until"
# The one role that writes other tags: Slack's keep and protect buttons (interact/actions.py), never the mark.
INTERACTION_ROLE = "InteractionActionsFunction"
INTERACTION_TAG_KEYS = [SNOOZE_TAG, {"Ref": "ProtectTagKey"}]
ALARM_PREFIX = "costguard-gpu-idle-"
# Values of the protect tag that do not protect (policy.is_protected), any case.
NOT_PROTECTING = {"false", "no", "0", "off"}

# Actions IAM authorizes on no narrower resource than "*" (no resource-level permissions): reads only.
EVERY_RESOURCE_ALLOWED = {
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeCapacityReservations",
    "bedrock:ListProvisionedModelThroughputs",
    "cloudwatch:GetMetricData",
    "cloudwatch:ListMetrics",
    "cloudwatch:DescribeAlarms",
    "pricing:GetProducts",
    "sagemaker:ListTrainingJobs",
    "sagemaker:ListNotebookInstances",
    "sagemaker:ListEndpoints",
    "sagemaker:ListInferenceComponents",
    # Asked of whatever the list calls return, which may be any job, notebook or endpoint of the account.
    "sagemaker:DescribeTrainingJob",
    "sagemaker:DescribeEndpoint",
    "sagemaker:DescribeEndpointConfig",
    "sagemaker:ListTags",
    # An organization deployment's account list: Organizations authorizes it on no narrower resource.
    "organizations:ListAccounts",
    # The audit's unattached volumes, finished training jobs, Savings Plans coverage and Compute Optimizer.
    "ec2:DescribeVolumes",
    "sagemaker:Search",
    "ce:GetSavingsPlansCoverage",
    "compute-optimizer:GetEC2InstanceRecommendations",
    # The EKS sweep's list of clusters (DescribeCluster is granted on the account's clusters only).
    "eks:ListClusters",
    # The HyperPod sweep's list of clusters (its nodes and tags are read on the account's clusters only).
    "sagemaker:ListClusters",
}

# Stops and cancels: only what costguard marked, and never what carries the protect tag.
STOPS = {
    "ec2:StopInstances": ":instance/*",
    "sagemaker:StopTrainingJob": ":training-job/*",
    "sagemaker:StopNotebookInstance": ":notebook-instance/*",
    "ec2:CancelCapacityReservation": ":capacity-reservation/*",
    "bedrock:DeleteProvisionedModelThroughput": ":provisioned-model/*",
}
# Marking: costguard's own tag key and nothing else.
TAGGING = {
    "ec2:CreateTags",
    "ec2:DeleteTags",
    "sagemaker:AddTags",
    "sagemaker:DeleteTags",
    "bedrock:TagResource",
    "bedrock:UntagResource",
}
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
    code["NotifierFunction"] = code["NotifierFunction"] | {"sqs:DeleteQueue"}
    assert drift(body(), code) == [
        "NotifierFunction: the code needs ['sqs:DeleteQueue'], which the template does not grant"
    ]


def test_sam_policy_templates_are_expanded_before_comparing() -> None:
    # The notifier's secret read comes from AWSSecretsManagerGetSecretValuePolicy, the state machine's
    # invokes from LambdaInvokePolicy: both count as granted.
    allowed = granted(body())
    assert "secretsmanager:GetSecretValue" in allowed["NotifierFunction"]
    assert "lambda:InvokeFunction" in allowed["AuditStateMachine"]


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
        condition = grant.statement.get("Condition", {})
        keys = condition.get("ForAllValues:StringEquals", {}).get("aws:TagKeys")
        expected = INTERACTION_TAG_KEYS if grant.role == INTERACTION_ROLE else [MARK_TAG]
        assert keys == expected, f"{grant.role} {grant.sid}: {action} may write tag keys {keys!r}"
        # ForAllValues holds for a request naming no key at all: the request must name its keys.
        assert condition.get("Null", {}).get("aws:TagKeys") == "false", (
            f"{grant.role} {grant.sid}: {action} without Null aws:TagKeys false allows a request naming no key"
        )


# --- the conditions, evaluated: what an attacker holding a role's credentials could ask --------------


def _tagging_targets(template: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(role, action, concrete resource ARN) for every tagging grant and every resource type it names."""
    rendered = Rendered(template)
    found = []
    for grant in grants(template):
        for action in sorted(grant.actions & TAGGING):
            for arn in _resources(grant):
                found.append((grant.role, action, concrete(str(rendered.value(arn)), "costguard-target")))
    return found


def _tag_request(action: str, resource: str, keys: tuple[str, ...] | None) -> Request:
    """A tagging request; keys None is ec2:DeleteTags without Tags (IAM then sees no aws:TagKeys)."""
    return Request(action, resource, context={} if keys is None else {"aws:TagKeys": keys})


TAGGING_TARGETS = _tagging_targets(body())


def test_every_tagging_grant_is_evaluated() -> None:
    actions = {action for _, action, _ in TAGGING_TARGETS}
    assert actions == TAGGING, f"tagging grants evaluated: {sorted(actions)}"


@pytest.mark.parametrize(
    ("role", "action", "resource"), TAGGING_TARGETS, ids=lambda v: str(v).rsplit(":", 1)[-1]
)
def test_a_tagging_request_naming_no_key_is_refused(role: str, action: str, resource: str) -> None:
    """ec2:DeleteTags without Tags deletes every user tag, the protect tag included."""
    statements = role_statements(body(), role)
    assert decide(statements, _tag_request(action, resource, None)) != ALLOW
    assert decide(statements, _tag_request(action, resource, ())) != ALLOW


@pytest.mark.parametrize(
    ("role", "action", "resource"), TAGGING_TARGETS, ids=lambda v: str(v).rsplit(":", 1)[-1]
)
def test_tagging_names_the_mark_key_and_nothing_else(role: str, action: str, resource: str) -> None:
    statements = role_statements(body(), role)
    if role == INTERACTION_ROLE:
        for keys in ((SNOOZE_TAG,), (PROTECT_TAG,), (SNOOZE_TAG, PROTECT_TAG)):
            assert decide(statements, _tag_request(action, resource, keys)) == ALLOW, keys
        for keys in ((MARK_TAG,), (SNOOZE_TAG, MARK_TAG), ("team",)):
            assert decide(statements, _tag_request(action, resource, keys)) != ALLOW, keys
        return
    assert decide(statements, _tag_request(action, resource, (MARK_TAG,))) == ALLOW
    for keys in ((PROTECT_TAG,), (MARK_TAG, PROTECT_TAG), ("team",)):
        assert decide(statements, _tag_request(action, resource, keys)) != ALLOW, keys
    elsewhere = resource.replace(f":{REGION}:", f":{OTHER_REGION}:")
    assert decide(statements, _tag_request(action, elsewhere, (MARK_TAG,))) != ALLOW


def test_without_the_null_check_a_request_naming_no_key_would_be_allowed() -> None:
    """The evaluator sees the hole this guards against: the statement as it was, ForAllValues alone."""
    template = copy.deepcopy(body())
    [statement] = [
        s
        for p in template["Resources"]["GpuIdleFunction"]["Properties"]["Policies"]
        if isinstance(p, dict) and "Statement" in p
        for s in p["Statement"]
        if "ec2:DeleteTags" in s["Action"]
    ]
    statement["Condition"].pop("Null", None)
    instance = f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-0a1f00000000000a1"
    statements = role_statements(template, "GpuIdleFunction")
    assert decide(statements, _tag_request("ec2:DeleteTags", instance, None)) == ALLOW


def _stop_targets(template: dict[str, Any]) -> list[tuple[str, str, str]]:
    rendered = Rendered(template)
    found = []
    for grant in grants(template):
        for action in sorted(grant.actions & set(STOPS)):
            for arn in _resources(grant):
                text = str(rendered.value(arn))
                if text.endswith(STOPS[action]):
                    found.append((grant.role, action, concrete(text, "costguard-target")))
    return found


@pytest.mark.parametrize(
    ("role", "action", "resource"), _stop_targets(body()), ids=lambda v: str(v).rsplit(":", 1)[-1]
)
def test_a_stop_needs_the_mark_and_no_protect_tag_in_the_stacks_region(
    role: str, action: str, resource: str
) -> None:
    statements = role_statements(body(), role)
    marked = {f"aws:ResourceTag/{MARK_TAG}": "2026-11-20T12:00:00+00:00"}
    if action == "ec2:CancelCapacityReservation":
        marked["aws:ResourceTag/costguard:auto-cancel"] = "true"
    if action == "bedrock:DeleteProvisionedModelThroughput":
        marked["aws:ResourceTag/costguard:auto-delete"] = "true"
    assert decide(statements, Request(action, resource, context=marked)) == ALLOW
    assert (
        decide(
            statements,
            Request(action, resource, context=marked | {f"aws:ResourceTag/{PROTECT_TAG}": "False"}),
        )
        == ALLOW
    )
    for protect in ("true", "", "yes", "team-a"):
        protected = marked | {f"aws:ResourceTag/{PROTECT_TAG}": protect}
        assert decide(statements, Request(action, resource, context=protected)) != ALLOW, protect
    unmarked = {k: v for k, v in marked.items() if k != f"aws:ResourceTag/{MARK_TAG}"}
    assert decide(statements, Request(action, resource, context=unmarked)) != ALLOW
    elsewhere = resource.replace(f":{REGION}:", f":{OTHER_REGION}:")
    assert decide(statements, Request(action, elsewhere, context=marked)) != ALLOW


def test_stop_protection_is_read_by_every_role_that_stops_instances_and_of_marked_instances_only() -> None:
    template = body()
    stoppers = {g.role for g in _grants_of("ec2:StopInstances", template)}
    readers = {g.role for g in _grants_of("ec2:DescribeInstanceAttribute", template)}
    assert stoppers and readers == stoppers, (
        f"stop EC2: {sorted(stoppers)}; read disableApiStop: {sorted(readers)}"
    )
    instance = f"arn:aws:ec2:{REGION}:{ACCOUNT}:instance/i-0a1f00000000000a1"
    marked = {f"aws:ResourceTag/{MARK_TAG}": "2026-11-20T12:00:00+00:00"}
    for role in sorted(readers):
        statements = role_statements(template, role)
        assert decide(statements, Request("ec2:DescribeInstanceAttribute", instance, context=marked)) == ALLOW
        # user data is an attribute too: an instance costguard has not marked stays unreadable
        assert decide(statements, Request("ec2:DescribeInstanceAttribute", instance)) != ALLOW
        elsewhere = instance.replace(f":{REGION}:", f":{OTHER_REGION}:")
        assert (
            decide(statements, Request("ec2:DescribeInstanceAttribute", elsewhere, context=marked)) != ALLOW
        )


# --- the stack's own region ---------------------------------------------------------------------------

# Services whose ARNs carry no region.
GLOBAL_ARNS = {"iam", "s3", "budgets", "cloudfront", "route53", "organizations"}


def test_resource_arns_name_the_stacks_region_only() -> None:
    template = body()
    rendered = Rendered(template)
    problems = []
    checked = 0
    for grant in grants(template):
        for resource in _resources(grant):
            text = str(rendered.value(resource))
            if not text.startswith("arn:"):
                continue
            checked += 1
            _, _, service, region, _ = text.split(":", 4)
            if service not in GLOBAL_ARNS and region != REGION:
                problems.append(f"{grant.role} {grant.sid}: {resource} is not limited to the stack's region")
    assert checked > 20
    assert not problems, "\n".join(problems)


def test_functions_that_act_see_only_the_stacks_region() -> None:
    """They act where they run: given COSTGUARD_REGIONS they would act elsewhere too, and their ARNs (in the
    stack's region only) would have to cover those regions."""
    template = body()
    acting = {g.role for g in grants(template) if g.actions & (set(STOPS) | TAGGING | ALARMS)}
    assert acting
    assert "COSTGUARD_REGIONS" not in template["Globals"]["Function"]["Environment"]["Variables"]
    # An organization deployment's sweeps cover MemberRegions, and only then: every region but the stack's own
    # (in the hub's account too) is reached through member.yaml's role of that region, never the function's own.
    organization_only = {"Fn::If": ["IsOrganization", {"Ref": "MemberRegions"}, ""]}
    widened = [
        role
        for role in sorted(acting)
        if (template["Resources"][role]["Properties"].get("Environment") or {})
        .get("Variables", {})
        .get("COSTGUARD_REGIONS", organization_only)
        != organization_only
    ]
    assert not widened, f"{widened} act in COSTGUARD_REGIONS, beyond their ARNs' ${{AWS::Region}}"


def test_in_another_region_even_the_hubs_own_account_is_reached_through_the_member_role(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What makes MemberRegions safe for the acting functions: their own role is never used outside the stack's
    region in an organization deployment."""
    from costguard.aws import clients

    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("COSTGUARD_HOME_ACCOUNT", "111111111111")
    monkeypatch.setenv("COSTGUARD_MEMBER_ROLE_NAME", "costguard-member")
    assert clients.is_member("111111111111", "us-west-2")
    assert not clients.is_member("111111111111", "us-east-1")


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
                t.endswith(("/runs/*", "/runs/map-results/*", "/reports/*", "/config/*")) for t in objects
            ):
                problems.append(
                    f"{grant.role} {grant.sid}: objects outside runs/, reports/, config/: {objects}"
                )
    assert not problems, "\n".join(problems)
