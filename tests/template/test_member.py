"""member.yaml, the organization's member stack, held to the hub's template.yaml: the role grants exactly the
EC2, CloudWatch and SageMaker actions the hub's functions may ask of a member account, narrowed as the hub's own
grants are; the forwarding rules forward exactly what the hub's rules take; and the member role and the hub's
bus admit the hub stack's roles and the organization's principals only (evaluated, allow and deny)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from moto.events.models import EventPattern

from costguard.aws.clients import MEMBER_SERVICES
from costguard.local.template import Template, local_pattern
from tests.conftest import EVENTS
from tests.template.iam import (
    ACCOUNT,
    ALLOW,
    OTHER_REGION,
    PARTITION,
    REGION,
    STACK,
    Caller,
    Rendered,
    Request,
    body,
    decide,
    declared,
    grants,
    role_statements,
)
from tests.template.test_sam import _output, _run_sam

pytestmark = pytest.mark.template

ROOT = Path(__file__).resolve().parents[2]
MEMBER_TEMPLATE = ROOT / "member.yaml"
HUB = ACCOUNT  # the hub stack's account: tests.template.iam renders template.yaml there
MEMBER = "210987654321"  # a member account of the organization
STRANGER = "444455556666"  # an account outside it
ORG = "o-a1b2c3d4e5"
OTHER_ORG = "o-z9y8x7w6v5"
MARK_TAG = "costguard:marked-at"
PROTECT_TAG = "costguard:protect"
SNOOZE_TAG = "costguard:snooze-until"
MEMBER_ROLE = f"arn:{PARTITION}:iam::{MEMBER}:role/costguard-member-{REGION}"
HUB_BUS = f"arn:{PARTITION}:events:{REGION}:{HUB}:event-bus/default"


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def member_body(hub_account: str = HUB, hub_region: str = REGION) -> dict[str, Any]:
    """member.yaml with its StackSet parameters given (the hub's output MemberStackParameters)."""
    template = copy.deepcopy(Template.load(MEMBER_TEMPLATE).body)
    values = {
        "HubAccountId": hub_account,
        "HubRegion": hub_region,
        "HubRoleArns": member_stack_parameters()["HubRoleArns"],
        "OrganizationId": ORG,
    }
    for name, value in values.items():
        template["Parameters"][name]["Default"] = value
    return template


def hub_body(organization: str = ORG) -> dict[str, Any]:
    """template.yaml deployed as an organization's hub (OrganizationId given), with a Slack app: every hub role
    that may act in a member account exists (the Slack buttons' worker only with SlackApp=on)."""
    template = copy.deepcopy(body())
    template["Parameters"]["OrganizationId"]["Default"] = organization
    template["Parameters"]["SlackApp"]["Default"] = "on"
    return template


class HubRendered(Rendered):
    """template.yaml's intrinsics, a list's ``!If [cond, x, !Ref AWS::NoValue]`` left out when cond is false (as
    CloudFormation does)."""

    def value(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.value(v) for v in value if not self._no_value(v)]
        return super().value(value)

    def _no_value(self, value: Any) -> bool:
        if isinstance(value, dict) and set(value) == {"Fn::If"}:
            name, yes, no = value["Fn::If"]
            return self._no_value(yes if self.condition(name) else no)
        return bool(value == {"Ref": "AWS::NoValue"})


def member_stack_parameters(hub: dict[str, Any] | None = None) -> dict[str, str]:
    """The hub's output MemberStackParameters as the AWS CLI's shorthand reads it: ``Key=..,Value=..`` items
    apart by spaces, an escaped comma (``\\,``) one inside a value."""
    hub = hub or hub_body()
    output = HubRendered(hub).value(hub["Outputs"]["MemberStackParameters"]["Value"])
    items = (item.removeprefix("ParameterKey=").split(",ParameterValue=") for item in output.split())
    return {key: value.replace("\\,", ",") for key, value in items}


class MemberRendered(Rendered):
    """member.yaml's intrinsics as a stack instance in the member account would have them."""

    def __init__(self, template: dict[str, Any], account: str = MEMBER) -> None:
        super().__init__(template)
        self.account = account

    def ref(self, name: str) -> str:
        return self.account if name == "AWS::AccountId" else super().ref(name)

    def value(self, value: Any) -> Any:
        """A CommaDelimitedList parameter's Ref is the list of its values."""
        if isinstance(value, dict) and set(value) == {"Ref"}:
            parameter = self.parameters.get(value["Ref"], {})
            if parameter.get("Type") == "CommaDelimitedList":
                return str(parameter.get("Default", "")).split(",")
        return super().value(value)


def member_role_statements(template: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    template = template or member_body()
    props = template["Resources"]["MemberRole"]["Properties"]
    rendered = MemberRendered(template)
    return [rendered.value(s) for p in props["Policies"] for s in _as_list(p["PolicyDocument"]["Statement"])]


def trust_statements(template: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The member role's trust policy, rendered; a trust policy applies to its own role (no Resource)."""
    template = template or member_body()
    document = template["Resources"]["MemberRole"]["Properties"]["AssumeRolePolicyDocument"]
    return [
        {**MemberRendered(template).value(s), "Resource": MEMBER_ROLE}
        for s in _as_list(document["Statement"])
    ]


def _service(action: str) -> str:
    return action.split(":", 1)[0]


def assuming_functions() -> dict[str, frozenset[str]]:
    """The hub roles whose code may call the watched services in a member account (they declare sts:AssumeRole)."""
    return {role: actions for role, actions in declared().items() if "sts:AssumeRole" in actions}


def member_actions_declared() -> set[str]:
    return {a for actions in assuming_functions().values() for a in actions if _service(a) in MEMBER_SERVICES}


# --- (a) exactly the hub functions' member-service actions, narrowed as the hub narrows them ------------------


def test_the_member_role_grants_exactly_the_member_service_actions_the_hub_functions_declare() -> None:
    """Only a function declaring sts:AssumeRole reaches a member account; its EC2, CloudWatch and SageMaker
    actions are what it may ask there. (The audit's Evaluate step reads types and offerings in the hub only.)"""
    statements = member_role_statements()
    assert all(s["Effect"] == "Allow" for s in statements)
    granted = {a for s in statements for a in _as_list(s["Action"])}
    expected = member_actions_declared()
    assert len(expected) > 20, sorted(expected)
    assert granted == expected, (
        f"member.yaml lacks {sorted(expected - granted)}; grants undeclared {sorted(granted - expected)}"
    )
    assert not [a for a in granted if "*" in a], "no wildcard action"
    assert {_service(a) for a in granted} <= MEMBER_SERVICES


def _triples(statement: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(action, resource, condition) of a statement as written (intrinsics unevaluated)."""
    condition = json.dumps(statement.get("Condition") or {}, sort_keys=True)
    for action in _as_list(statement["Action"]):
        for resource in _as_list(statement["Resource"]):
            yield action, json.dumps(resource, sort_keys=True), condition


def test_each_member_grant_is_the_hubs_own_grant_of_that_action() -> None:
    """The same resource ARNs (the member's own account and region) and the same conditions as the hub grants
    the same action in its account, both ways: never wider than the hub, never narrower than its functions need."""
    member = {
        t
        for s in Template.load(MEMBER_TEMPLATE).body["Resources"]["MemberRole"]["Properties"]["Policies"]
        for statement in _as_list(s["PolicyDocument"]["Statement"])
        for t in _triples(statement)
    }
    assuming = set(assuming_functions())
    hub = {
        t
        for g in grants(body())
        if g.role in assuming
        for t in _triples(g.statement)
        if _service(t[0]) in MEMBER_SERVICES
    }
    assert member - hub == set(), "member.yaml grants what no hub grant does:\n" + "\n".join(
        map(str, sorted(member - hub))
    )
    assert hub - member == set(), "hub grants member.yaml lacks:\n" + "\n".join(
        map(str, sorted(hub - member))
    )


STOPS = {
    "ec2:StopInstances": f"arn:aws:ec2:{REGION}:{MEMBER}:instance/i-0a1f00000000000a1",
    "sagemaker:StopTrainingJob": f"arn:aws:sagemaker:{REGION}:{MEMBER}:training-job/llm-finetune",
    "sagemaker:StopNotebookInstance": f"arn:aws:sagemaker:{REGION}:{MEMBER}:notebook-instance/research",
    "ec2:CancelCapacityReservation": f"arn:aws:ec2:{REGION}:{MEMBER}:capacity-reservation/cr-0a1f0000000000001",
}


@pytest.mark.parametrize(
    ("action", "resource"), sorted(STOPS.items()), ids=lambda v: str(v).rsplit(":", 1)[-1]
)
def test_a_stop_in_a_member_needs_the_mark_and_no_protect_tag_in_its_own_region(
    action: str, resource: str
) -> None:
    statements = member_role_statements()
    marked = {f"aws:ResourceTag/{MARK_TAG}": "2026-11-20T12:00:00+00:00"}
    if action == "ec2:CancelCapacityReservation":
        marked["aws:ResourceTag/costguard:auto-cancel"] = "true"
    if action == "bedrock:DeleteProvisionedModelThroughput":
        marked["aws:ResourceTag/costguard:auto-delete"] = "true"
    assert decide(statements, Request(action, resource, context=marked)) == ALLOW
    for protect in ("true", "", "team-a"):
        protected = marked | {f"aws:ResourceTag/{PROTECT_TAG}": protect}
        assert decide(statements, Request(action, resource, context=protected)) != ALLOW, protect
    unmarked = {k: v for k, v in marked.items() if k != f"aws:ResourceTag/{MARK_TAG}"}
    assert decide(statements, Request(action, resource, context=unmarked)) != ALLOW
    for elsewhere in (
        resource.replace(f":{REGION}:", f":{OTHER_REGION}:"),
        resource.replace(MEMBER, STRANGER),
    ):
        assert decide(statements, Request(action, elsewhere, context=marked)) != ALLOW, elsewhere


TAG_TARGETS = [
    ("ec2:CreateTags", STOPS["ec2:StopInstances"]),
    ("ec2:DeleteTags", STOPS["ec2:StopInstances"]),
    ("ec2:CreateTags", STOPS["ec2:CancelCapacityReservation"]),
    ("ec2:DeleteTags", STOPS["ec2:CancelCapacityReservation"]),
    ("sagemaker:AddTags", STOPS["sagemaker:StopTrainingJob"]),
    ("sagemaker:DeleteTags", STOPS["sagemaker:StopTrainingJob"]),
    ("sagemaker:AddTags", STOPS["sagemaker:StopNotebookInstance"]),
    ("sagemaker:DeleteTags", STOPS["sagemaker:StopNotebookInstance"]),
]
# Slack's keep and protect buttons (the hub's InteractionActionsFunction) add these on instances, jobs, notebooks.
KEEP_OR_PROTECT = {
    ("ec2:CreateTags", STOPS["ec2:StopInstances"]),
    ("sagemaker:AddTags", STOPS["sagemaker:StopTrainingJob"]),
    ("sagemaker:AddTags", STOPS["sagemaker:StopNotebookInstance"]),
}


@pytest.mark.parametrize(("action", "resource"), TAG_TARGETS, ids=lambda v: str(v).rsplit(":", 1)[-1])
def test_tagging_in_a_member_writes_costguards_keys_only_and_names_them(action: str, resource: str) -> None:
    statements = member_role_statements()

    def tag(keys: tuple[str, ...] | None, target: str = resource) -> str:
        return decide(
            statements, Request(action, target, context={} if keys is None else {"aws:TagKeys": keys})
        )

    assert tag((MARK_TAG,)) == ALLOW
    assert tag(None) != ALLOW, "a request naming no key deletes every tag"
    assert tag(()) != ALLOW
    for keys in (("team",), (MARK_TAG, PROTECT_TAG), (MARK_TAG, SNOOZE_TAG), (MARK_TAG, "team")):
        assert tag(keys) != ALLOW, keys
    for keys in ((PROTECT_TAG,), (SNOOZE_TAG,), (SNOOZE_TAG, PROTECT_TAG)):
        assert (tag(keys) == ALLOW) == ((action, resource) in KEEP_OR_PROTECT), keys
    assert tag((MARK_TAG,), resource.replace(f":{REGION}:", f":{OTHER_REGION}:")) != ALLOW
    assert tag((MARK_TAG,), resource.replace(MEMBER, STRANGER)) != ALLOW


def test_alarms_in_a_member_are_costguards_own_only() -> None:
    statements = member_role_statements()
    own = f"arn:aws:cloudwatch:{REGION}:{MEMBER}:alarm:costguard-gpu-idle-i-0a1f00000000000a1"
    for action in ("cloudwatch:PutMetricAlarm", "cloudwatch:DeleteAlarms", "cloudwatch:TagResource"):
        assert decide(statements, Request(action, own)) == ALLOW
        assert decide(statements, Request(action, own.replace("costguard-gpu-idle-", "billing-"))) != ALLOW
        assert decide(statements, Request(action, own.replace(MEMBER, STRANGER))) != ALLOW


# --- (b) the forwarding rules forward exactly what the hub's rules take -------------------------------------


def hub_patterns() -> dict[str, dict[str, Any]]:
    """The patterns of the hub functions' EventBridge rules (not schedules, not SNS), the account left out."""
    found = {}
    for logical_id, resource in body()["Resources"].items():
        for name, event in ((resource.get("Properties") or {}).get("Events") or {}).items():
            if event.get("Type") == "EventBridgeRule":
                pattern = dict(event["Properties"]["Pattern"])
                pattern.pop("account", None)
                found[f"{logical_id}.{name}"] = pattern
    return found


def forward_rules(template: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    template = template or Template.load(MEMBER_TEMPLATE).body
    return {n: r for n, r in template["Resources"].items() if r.get("Type") == "AWS::Events::Rule"}


def _pairs(pattern: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (str(source), json.dumps(kind, sort_keys=True))
        for source in pattern["source"]
        for kind in pattern.get("detail-type", ["<any>"])
    }


def test_the_forwarding_rules_are_the_hub_rules_less_the_account() -> None:
    hub = hub_patterns()
    member = {name: rule["Properties"]["EventPattern"] for name, rule in forward_rules().items()}
    assert len(hub) >= 9, sorted(hub)
    assert not [name for name, p in member.items() if "account" in p], "a forwarding rule pins an account"

    def key(pattern: dict[str, Any]) -> str:
        return json.dumps(pattern, sort_keys=True)

    assert sorted(map(key, member.values())) == sorted(map(key, hub.values())), (
        f"hub rules: {json.dumps(hub, indent=1, sort_keys=True)}"
    )
    hub_pairs = set().union(*map(_pairs, hub.values()))
    assert set().union(*map(_pairs, member.values())) == hub_pairs
    assert ("aws.cloudwatch", json.dumps("CloudWatch Alarm State Change")) in hub_pairs
    assert not any(source in ("aws.events", "aws.scheduler") for source, _ in hub_pairs), (
        "schedules stay home"
    )


# EventBridge events of the samples (SNS deliveries and schedules have no rule pattern).
SAMPLES = [
    path
    for path in sorted(EVENTS.glob("*.json"))
    if "account" in (sample := json.loads(path.read_text()))
    and sample.get("source") not in ("aws.events", "aws.scheduler")
]


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_a_member_forwards_a_sample_exactly_when_the_hub_would_take_it(path: Path) -> None:
    event = json.loads(path.read_text())
    event["account"] = MEMBER
    forwarded = [
        name
        for name, rule in forward_rules().items()
        if EventPattern(None, local_pattern(rule["Properties"]["EventPattern"], MEMBER)).matches_event(event)
    ]
    routed = Template.load(ROOT / "template.yaml").route(
        event, account=HUB, conditions={"IsOrganization": True}
    )
    assert bool(forwarded) == bool(routed), (forwarded, [r.name for r in routed])
    assert len(forwarded) <= 1, f"{path.name} forwarded twice: {forwarded}"


def test_forwarded_events_go_to_the_hubs_default_bus_only() -> None:
    template = member_body()
    rendered = MemberRendered(template)
    for name, rule in forward_rules(template).items():
        expected = "ForwardsGpuAlarms" if name == "ForwardGpuIdleAlarm" else "ForwardsToTheHub"
        assert rule.get("Condition") == expected, name
        [target] = rule["Properties"]["Targets"]
        assert rendered.value(target["Arn"]) == HUB_BUS, name
        assert target["RoleArn"] == {"Fn::GetAtt": ["EventsToHubRole", "Arn"]}, name
    role = template["Resources"]["EventsToHubRole"]["Properties"]
    statements = [
        rendered.value(s) for p in role["Policies"] for s in _as_list(p["PolicyDocument"]["Statement"])
    ]
    assert decide(statements, Request("events:PutEvents", HUB_BUS)) == ALLOW
    assert decide(statements, Request("events:PutEvents", HUB_BUS.replace(HUB, STRANGER))) != ALLOW
    assert decide(statements, Request("events:PutEvents", HUB_BUS.replace(REGION, OTHER_REGION))) != ALLOW
    assert {a for s in statements for a in _as_list(s["Action"])} == {"events:PutEvents"}
    [trust] = rendered.value(role["AssumeRolePolicyDocument"]["Statement"])
    assert trust["Principal"] == {"Service": "events.amazonaws.com"}


def test_the_hubs_own_account_and_region_forward_nothing() -> None:
    """A rule forwarding a bus's events to that same bus would send each event round again."""
    same = MemberRendered(member_body(hub_account=MEMBER))
    assert same.condition("ForwardsToTheHub") is False
    assert MemberRendered(member_body(hub_account=MEMBER, hub_region=OTHER_REGION)).condition(
        "ForwardsToTheHub"
    )
    assert MemberRendered(member_body()).condition("ForwardsToTheHub")
    assert "Condition" not in Template.load(MEMBER_TEMPLATE).body["Resources"]["MemberRole"]


def test_the_gpu_alarms_state_changes_are_forwarded_only_with_the_hubs_alarms_on() -> None:
    """The hub's GpuAlarms is an option, off by default: with it off there is no alarm here to forward."""
    on = member_body()
    on["Parameters"]["GpuAlarms"]["Default"] = "on"
    assert MemberRendered(on).condition("ForwardsGpuAlarms")
    assert not MemberRendered(member_body()).condition("ForwardsGpuAlarms")
    same = member_body(hub_account=MEMBER)
    same["Parameters"]["GpuAlarms"]["Default"] = "on"
    assert not MemberRendered(same).condition("ForwardsGpuAlarms")
    assert (
        Template.load(MEMBER_TEMPLATE).body["Parameters"]["GpuAlarms"]["Default"]
        == (body()["Parameters"]["GpuAlarms"]["Default"])
    )


# --- (c) who may come in: the member role's trust and the hub's bus, evaluated ------------------------------


def _hub_role(function: str, account: str = HUB, stack: str = STACK) -> Caller:
    return Caller.role(f"{stack}-{function}Role-1A2B3C4D5E6F", account=account)


def _assume(caller: Caller, principal_org: str | None, resource_org: str | None, hub: dict[str, Any]) -> bool:
    """A cross-account sts:AssumeRole of the member role: the caller's identity policy (the hub's grant, for a
    hub function's role) and the member role's trust policy must both allow it."""
    identity = Request(
        "sts:AssumeRole", MEMBER_ROLE, caller, {"aws:ResourceOrgID": resource_org} if resource_org else {}
    )
    function = (caller.arn or "").split("/")[-1].removeprefix(f"{STACK}-").split("Role-")[0]
    hub_roles = {r for r in declared() if r == function}
    identity_allows = bool(hub_roles) and decide(role_statements(hub, function), identity) == ALLOW
    trust = Request(
        "sts:AssumeRole", MEMBER_ROLE, caller, {"aws:PrincipalOrgID": principal_org} if principal_org else {}
    )
    return identity_allows and decide(trust_statements(), trust) == ALLOW


@pytest.mark.parametrize("function", sorted(assuming_functions()))
def test_the_hubs_functions_assume_the_member_role_inside_the_organization(function: str) -> None:
    assert _assume(_hub_role(function), ORG, ORG, hub_body())


def test_the_member_role_trusts_the_hub_stacks_roles_of_the_organization_only() -> None:
    trust = trust_statements()
    inside = {"aws:PrincipalOrgID": ORG}
    gpu = _hub_role("GpuIdleFunction")
    assert decide(trust, Request("sts:AssumeRole", MEMBER_ROLE, gpu, inside)) == ALLOW
    refused = [
        (gpu, {"aws:PrincipalOrgID": OTHER_ORG}),  # the hub's account moved out of the organization
        (gpu, {}),  # no organization at all
        (_hub_role("GpuIdleFunction", stack="ml-platform"), inside),  # another stack of the hub's account
        (Caller.role("admin", account=HUB), inside),  # a person's role in the hub's account
        (Caller(arn=f"arn:aws:iam::{HUB}:user/{STACK}-intern"), inside),  # a user, whatever its name
        (_hub_role("GpuIdleFunction", account=MEMBER), inside),  # the same name in another account of the org
        (_hub_role("GpuIdleFunction", account=STRANGER), {"aws:PrincipalOrgID": OTHER_ORG}),  # outside
        (Caller(service="ec2.amazonaws.com"), {}),
    ]
    for caller, context in refused:
        assert decide(trust, Request("sts:AssumeRole", MEMBER_ROLE, caller, context)) != ALLOW, (
            caller,
            context,
        )


def hub_assuming_roles(hub: dict[str, Any] | None = None) -> set[str]:
    """The ARNs of the hub's roles granted sts:AssumeRole (on member.yaml's role), as the hub stack names them:
    of the functions the hub deploys (a function under a false condition has no role)."""
    hub = hub or hub_body()
    granted = {g.role for g in grants(hub) if "sts:AssumeRole" in g.actions}
    assert granted == set(assuming_functions()), "the template's grants and the code's declarations differ"
    rendered = HubRendered(hub)
    deployed = {
        role
        for role in granted
        if "Condition" not in hub["Resources"][role]
        or rendered.condition(hub["Resources"][role]["Condition"])
    }
    return {rendered.attribute(f"{role}Role", "Arn") for role in deployed}


def test_the_member_role_trusts_exactly_the_hub_roles_that_assume_it_by_their_arns() -> None:
    [trust] = trust_statements()
    conditions = trust["Condition"]
    assert not [op for op in conditions if "Like" in op], "no name pattern"
    assert "*" not in json.dumps(trust) and "?" not in json.dumps(trust), trust
    assert set(conditions["StringEquals"]["aws:PrincipalArn"]) == hub_assuming_roles()
    assert len(hub_assuming_roles()) >= 10
    assert Template.load(MEMBER_TEMPLATE).body["Parameters"]["HubRoleArns"]["Type"] == "CommaDelimitedList"
    inside = {"aws:PrincipalOrgID": ORG}
    for arn in hub_assuming_roles():
        assert decide([trust], Request("sts:AssumeRole", MEMBER_ROLE, Caller(arn=arn), inside)) == ALLOW
    refused = [
        _hub_role("GpuIdleFunction", stack="costguard-dev"),  # a second stack whose name starts the same
        Caller.role("costguard-x", account=HUB),  # a role someone named with the hub stack's prefix
        Caller.role(f"{STACK}-GpuIdleFunctionRole-OTHERSUFFIX0", account=HUB),  # the same name, another role
        _hub_role("NotifierFunction"),  # a hub role that has no business in a member
    ]
    for caller in refused:
        assert decide([trust], Request("sts:AssumeRole", MEMBER_ROLE, caller, inside)) != ALLOW, caller


def test_the_member_parameter_takes_exact_role_arns_only() -> None:
    pattern = re.compile(Template.load(MEMBER_TEMPLATE).body["Parameters"]["HubRoleArns"]["AllowedPattern"])
    for arn in hub_assuming_roles():
        assert pattern.fullmatch(arn), arn
    for wild in (
        f"arn:aws:iam::{HUB}:role/{STACK}-*",
        f"arn:aws:iam::{HUB}:role/?",
        "*",
        f"arn:aws:iam::{HUB}:root",
    ):
        assert not pattern.fullmatch(wild), wild


def test_the_hubs_grant_reaches_member_roles_of_the_organization_only() -> None:
    hub = hub_body()
    gpu = _hub_role("GpuIdleFunction")
    assert _assume(gpu, ORG, ORG, hub)
    # the member role's account is not in the hub's organization
    assert not _assume(gpu, ORG, OTHER_ORG, hub)
    assert not _assume(gpu, ORG, None, hub)
    # another role of a member account: not <MemberRoleName>-*
    statements = role_statements(hub, "GpuIdleFunction")
    admin = MEMBER_ROLE.replace("costguard-member-", "OrganizationAccountAccessRole")
    context = {"aws:ResourceOrgID": ORG}
    assert decide(statements, Request("sts:AssumeRole", admin, gpu, context)) != ALLOW
    # a single-account deployment (no OrganizationId) assumes nothing, even inside an organization
    assert not _assume(gpu, ORG, ORG, body())
    assert (
        decide(
            role_statements(body(), "GpuIdleFunction"), Request("sts:AssumeRole", MEMBER_ROLE, gpu, context)
        )
        != ALLOW
    )
    # a function that never calls the watched services is granted nothing of the kind
    assert not _assume(_hub_role("NotifierFunction"), ORG, ORG, hub)


def _bus_policy(template: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    [policy] = [r for r in template["Resources"].values() if r.get("Type") == "AWS::Events::EventBusPolicy"]
    statement = Rendered(template).value(policy["Properties"]["Statement"])
    return policy, _as_list(statement)


def test_the_hubs_bus_takes_events_from_the_organization_only() -> None:
    hub = hub_body()
    policy, statements = _bus_policy(hub)
    assert Rendered(hub).condition(policy["Condition"]) is True
    forwarder = Caller.role(f"costguard-member-forward-{REGION}", account=MEMBER)

    def put(caller: Caller, context: dict[str, str], bus: str = HUB_BUS) -> str:
        return decide(statements, Request("events:PutEvents", bus, caller, context))

    assert put(forwarder, {"aws:PrincipalOrgID": ORG}) == ALLOW
    assert put(forwarder, {"aws:PrincipalOrgID": OTHER_ORG}) != ALLOW
    assert put(forwarder, {}) != ALLOW
    assert put(Caller.role("attacker", account=STRANGER), {"aws:PrincipalOrgID": OTHER_ORG}) != ALLOW
    assert put(Caller(service="events.amazonaws.com"), {}) != ALLOW
    assert put(forwarder, {"aws:PrincipalOrgID": ORG}, HUB_BUS.replace("/default", "/other")) != ALLOW
    for statement in statements:
        assert _as_list(statement["Action"]) == ["events:PutEvents"]


def test_a_single_account_deployment_opens_no_bus() -> None:
    policy, _ = _bus_policy(body())
    assert Rendered(body()).condition(policy["Condition"]) is False
    assert (
        Rendered(body()).value(body()["Globals"]["Function"]["Environment"]["Variables"])[
            "COSTGUARD_MEMBER_ROLE_NAME"
        ]
        == ""
    )
    assert (
        Rendered(hub_body()).value(hub_body()["Globals"]["Function"]["Environment"]["Variables"])[
            "COSTGUARD_MEMBER_ROLE_NAME"
        ]
        == "costguard-member"
    )


# --- the hub and the member agree on names -----------------------------------------------------------------


def test_the_hubs_member_stack_parameters_are_member_yamls() -> None:
    given = member_stack_parameters()
    assert set(given) == set(Template.load(MEMBER_TEMPLATE).body["Parameters"])
    roles = given.pop("HubRoleArns").split(",")
    assert sorted(roles) == sorted(hub_assuming_roles()), "each role once, all of them"
    # With a Slack app, its actions worker (protect, keep, stop now in a member) is trusted too; without, not.
    trusted: dict[str, list[str]] = {}
    for slack_app in ("off", "on"):
        hub = hub_body()
        hub["Parameters"]["SlackApp"]["Default"] = slack_app
        trusted[slack_app] = member_stack_parameters(hub)["HubRoleArns"].split(",")
        assert sorted(trusted[slack_app]) == sorted(hub_assuming_roles(hub)), slack_app
    worker = HubRendered(hub_body()).attribute("InteractionActionsFunctionRole", "Arn")
    assert set(trusted["on"]) - set(trusted["off"]) == {worker}
    assert given == {
        "HubAccountId": HUB,
        "HubRegion": REGION,
        "OrganizationId": ORG,
        "MemberRoleName": "costguard-member",
        "ProtectTagKey": PROTECT_TAG,
        "GpuAlarms": "off",
    }
    member = Template.load(MEMBER_TEMPLATE).body["Parameters"]
    for name in ("MemberRoleName", "ProtectTagKey"):
        assert member[name]["Default"] == body()["Parameters"][name]["Default"], name
    assert (
        member["MemberRoleName"]["AllowedPattern"] == body()["Parameters"]["MemberRoleName"]["AllowedPattern"]
    )
    rendered = MemberRendered(member_body())
    role = rendered.value(
        Template.load(MEMBER_TEMPLATE).body["Resources"]["MemberRole"]["Properties"]["RoleName"]
    )
    assert f"arn:aws:iam::{MEMBER}:role/{role}" == MEMBER_ROLE


# --- (d) the SAM CLI's lint and checkov ---------------------------------------------------------------------


def test_member_yaml_validates_with_lint(tmp_path: Path) -> None:
    result = _run_sam("validate", "--lint", "--template", str(MEMBER_TEMPLATE), cwd=tmp_path)
    assert result.returncode == 0, _output(result)
