"""Private EKS endpoints (issue 39, case 8): a deployment that names subnets and security groups runs the EKS
function in the clusters' VPC and reaches a cluster whose API endpoint is private; without them the function runs
outside any VPC, and such a cluster is reported, with the parameters that would reach it, and never called."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.template import Template, resolve
from costguard.local.world import World, load_world
from tests.conftest import DEMO_WORLD, ROOT
from tests.integration.test_eks_broken_clusters import assert_swept, renamed
from tests.integration.test_eks_flow import NOW, by_id, sweep

PRIVATE, PUBLIC = "private-one", "public-one"
SUBNETS = "subnet-0a1b2c3d4e5f60718,subnet-0b1c2d3e4f5a60719"
GROUPS = "sg-0c1d2e3f4a5b60710"


@pytest.fixture(scope="module")
def two_clusters() -> World:
    demo = load_world(DEMO_WORLD)
    shape = next(c for c in demo.eks_clusters if c.name == "ml-platform")
    clusters = [
        renamed(shape, PUBLIC, "1"),
        renamed(shape, PRIVATE, "2").model_copy(update={"reachable": "private"}),
    ]
    return World(account=demo.account, region=demo.region, now=demo.now, eks_clusters=clusters)


def stack_of(world: World, sink: SlackSink, in_vpc: bool) -> LocalStack:
    routes = {team: sink.url_for(team) for team in ("ml-serving", "ml-research", "ml-training")}
    # The variable the template sets from EksSubnetIds (checked below), as the deployed function has it.
    overrides = {"COSTGUARD_EKS_IN_VPC": "true" if in_vpc else "false"}
    return LocalStack(world, sink=sink, routes=routes, overrides=overrides, until=NOW + timedelta(hours=1))


@pytest.fixture
def outside(two_clusters: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    with stack_of(two_clusters, sink, in_vpc=False) as running:
        yield running


@pytest.fixture
def inside(two_clusters: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    with stack_of(two_clusters, sink, in_vpc=True) as running:
        yield running


def calls_to(stack: LocalStack, cluster: str) -> list[Any]:
    return [k for k in stack.kube.calls.elements() if k[0] == cluster]


def test_outside_a_vpc_a_private_cluster_is_reported_with_the_parameters_and_never_called(
    outside: LocalStack,
) -> None:
    result = sweep(outside, NOW)
    assert_swept(result, PUBLIC)
    unreachable = by_id(result)[(PRIVATE, "eks_cluster_unreachable")]
    assert "private" in unreachable["summary"]
    assert "EksSubnetIds" in str(unreachable)
    assert calls_to(outside, PRIVATE) == []


def test_in_the_vpc_a_private_cluster_is_swept_like_any_other(inside: LocalStack) -> None:
    result = sweep(inside, NOW)
    for cluster in (PUBLIC, PRIVATE):
        assert_swept(result, cluster)
    assert calls_to(inside, PRIVATE)


def _function() -> dict[str, Any]:
    template = Template.load(ROOT / "template.yaml")
    return dict(template.resources["EksGpuFunction"]["Properties"])


@pytest.mark.parametrize(("subnets", "groups", "in_vpc"), [("", "", False), (SUBNETS, GROUPS, True)])
def test_the_template_puts_the_function_in_the_vpc_only_when_subnets_are_named(
    subnets: str, groups: str, in_vpc: bool
) -> None:
    template = Template.load(ROOT / "template.yaml")
    parameters = {"EksSubnetIds": subnets, "EksSecurityGroupIds": groups}
    conditions = template.conditions(parameters)
    assert conditions["EksInVpc"] is in_vpc
    props = _function()
    refs = template.parameter_defaults() | parameters
    assert (
        resolve(props["Environment"]["Variables"]["COSTGUARD_EKS_IN_VPC"], refs, conditions)
        == str(in_vpc).lower()
    )
    condition, config, otherwise = props["VpcConfig"]["Fn::If"]
    assert condition == "EksInVpc" and otherwise == {"Ref": "AWS::NoValue"}
    assert config == {
        "SubnetIds": {"Ref": "EksSubnetIds"},
        "SecurityGroupIds": {"Ref": "EksSecurityGroupIds"},
    }
    assert {template.body["Parameters"][p]["Type"] for p in parameters} == {"CommaDelimitedList"}
    # Only the EKS function moves into the VPC.
    others = [
        name
        for name, resource in template.resources.items()
        if resource.get("Type") == "AWS::Serverless::Function"
        and "VpcConfig" in resource.get("Properties", {})
    ]
    assert others == ["EksGpuFunction"]


def test_subnets_and_security_groups_are_given_together() -> None:
    """The template's rules refuse one without the other before anything is created."""
    template = Template.load(ROOT / "template.yaml")
    rules = template.body["Rules"]

    def holds(subnets: str, groups: str) -> bool:
        values = {"EksSubnetIds": subnets, "EksSecurityGroupIds": groups}

        def given(
            clause: dict[str, Any],
        ) -> bool:  # {"Fn::Not": [{"Fn::Equals": [{"Fn::Join": ["", ref]}, ""]}]}
            [equals] = clause["Fn::Not"]
            joined, empty = equals["Fn::Equals"]
            return values[joined["Fn::Join"][1]["Ref"]].replace(",", "") != empty

        return all(
            not given(rule["RuleCondition"]) or all(given(a["Assert"]) for a in rule["Assertions"])
            for rule in rules.values()
        )

    assert holds("", "") and holds(SUBNETS, GROUPS)
    assert not holds(SUBNETS, "") and not holds("", GROUPS)
    # CloudFormation holds each ID of a CommaDelimitedList to the pattern.
    for name, good, bad in (
        ("EksSubnetIds", SUBNETS, "subnet-xyz"),
        ("EksSecurityGroupIds", GROUPS, "sg-0c1d2e3f4a5b6071"),
    ):
        pattern = template.body["Parameters"][name]["AllowedPattern"]
        assert all(re.fullmatch(pattern, one) for one in good.split(",")) and re.fullmatch(pattern, "")
        assert not re.fullmatch(pattern, bad)
        assert not re.fullmatch(pattern, f"{good},{good}")  # one ID, not the list
