"""Every EventBridge rule on the default bus takes the stack's own account's events only, except in an
organization deployment (IsOrganization), where the detectors' rules take any account's events: those reach the
default bus only from principals of the organization (OrganizationEventsPolicy, member.yaml's forwarding rules).
costguard's own alarms stay pinned to the hub's account. The local routing (`costguard replay`, the local stack)
resolves the pin to the local stack's account, and the condition from what the caller passes (single-account
by default)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from costguard.local.template import Template, local_account, local_pattern
from tests.conftest import EVENTS, ROOT

pytestmark = pytest.mark.template

TEMPLATE = ROOT / "template.yaml"
PIN = [{"Ref": "AWS::AccountId"}]
# A hub takes every account's events (the bus policy admits the organization's only); else the pin.
ORGANIZATION_PIN = {"Fn::If": ["IsOrganization", {"Ref": "AWS::NoValue"}, PIN]}
# Rules that stay pinned in a hub too: costguard's own alarms are the hub's alone.
HUB_ONLY = {"OpsAlarmRule"}
ORGANIZATION = {"IsOrganization": True}
OTHER = "210987654321"
EVENT_RULE_SOURCES = ("EventBridgeRule", "CloudWatchEvent")


def _rules(body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """(where, pattern, event bus) of every rule with a pattern: SAM events and AWS::Events::Rule."""
    for name, resource in body["Resources"].items():
        props = resource.get("Properties", {})
        if resource.get("Type") == "AWS::Events::Rule" and "EventPattern" in props:
            yield name, props["EventPattern"], props.get("EventBusName")
        for event_name, event in (props.get("Events") or {}).items() if isinstance(props, dict) else []:
            if event.get("Type") in EVENT_RULE_SOURCES:
                event_props = event.get("Properties", {})
                yield (
                    f"{name}.Events.{event_name}",
                    event_props.get("Pattern"),
                    event_props.get("EventBusName"),
                )


def test_there_are_rules_and_samples_to_check() -> None:
    assert len(SAMPLES) >= 15, [p.name for p in SAMPLES]
    found = list(_rules(Template.load(TEMPLATE).body))
    assert len(found) >= 10, [where for where, _, _ in found]
    assert any(where == "OpsAlarmRule" for where, _, _ in found)


def _unpinned(body: dict[str, Any]) -> list[str]:
    """Rules on the default bus that take other accounts' events beyond what an organization allows."""
    problems = []
    for where, pattern, bus in _rules(body):
        if bus not in (None, "default"):
            continue  # an organization-scoped bus names its own accounts
        account = pattern.get("account") if isinstance(pattern, dict) else None
        allowed = [PIN] if where in HUB_ONLY else [PIN, ORGANIZATION_PIN]
        if account not in allowed:
            problems.append(f"{where}: account is {account!r}")
    return problems


def test_every_rule_on_the_default_bus_pins_the_stacks_account_unless_a_hub() -> None:
    problems = _unpinned(Template.load(TEMPLATE).body)
    assert not problems, "rules taking events of any account:\n" + "\n".join(problems)


def test_costguards_own_alarms_stay_the_hubs_and_the_detectors_open_only_in_a_hub() -> None:
    body = Template.load(TEMPLATE).body
    found = {where: pattern.get("account") for where, pattern, _ in _rules(body)}
    assert found["OpsAlarmRule"] == PIN
    detectors = [where for where in found if where not in HUB_ONLY]
    assert detectors and all(found[where] == ORGANIZATION_PIN for where in detectors), found
    assert body["Conditions"]["IsOrganization"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "OrganizationId"}, ""]}]
    }


def test_only_the_organization_may_put_events_on_a_hubs_bus() -> None:
    body = Template.load(TEMPLATE).body
    [(name, policy)] = [
        (n, r) for n, r in body["Resources"].items() if r.get("Type") == "AWS::Events::EventBusPolicy"
    ]
    assert policy.get("Condition") == "IsOrganization", f"{name} must exist in a hub only"
    statement = policy["Properties"]["Statement"]
    assert policy["Properties"]["EventBusName"] == "default"
    assert statement["Action"] == "events:PutEvents"
    assert statement["Condition"] == {"StringEquals": {"aws:PrincipalOrgID": {"Ref": "OrganizationId"}}}


def test_schedules_have_no_pattern_and_are_exempt() -> None:
    body = Template.load(TEMPLATE).body
    schedules = [
        (name, e)
        for name, r in body["Resources"].items()
        for e in ((r.get("Properties") or {}).get("Events") or {}).values()
        if e.get("Type") in ("Schedule", "ScheduleV2")
    ]
    assert schedules
    assert all("Pattern" not in e.get("Properties", {}) for _, e in schedules)


def test_the_check_finds_a_rule_without_the_pin() -> None:
    body = copy.deepcopy(Template.load(TEMPLATE).body)
    del body["Resources"]["SpotInterruptionsFunction"]["Properties"]["Events"]["SpotInterruptionWarning"][
        "Properties"
    ]["Pattern"]["account"]
    assert _unpinned(body) == ["SpotInterruptionsFunction.Events.SpotInterruptionWarning: account is None"]
    body = copy.deepcopy(Template.load(TEMPLATE).body)
    body["Resources"]["OpsAlarmRule"]["Properties"]["EventPattern"]["account"] = ORGANIZATION_PIN
    assert [p.split(":")[0] for p in _unpinned(body)] == ["OpsAlarmRule"]


# --- the local routing -----------------------------------------------------------------------------

# EventBridge events of the samples: not SNS deliveries (no account), not schedules (no pattern).
SAMPLES = [
    path
    for path in sorted(EVENTS.glob("*.json"))
    if "account" in (sample := json.loads(path.read_text()))
    and sample.get("source") not in ("aws.events", "aws.scheduler")
]


def _event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return event


def test_local_routing_resolves_the_pin_to_the_local_account(monkeypatch: pytest.MonkeyPatch) -> None:
    template = Template.load(TEMPLATE)
    event = _event("ec2-instance-running.json")
    monkeypatch.delenv("MOTO_ACCOUNT_ID", raising=False)
    assert local_account() == event["account"] == "123456789012"  # moto's default, the samples' account
    assert [r.function for r in template.route(event)] == ["GpuAlarmsFunction"]
    # the local stack runs as its world's account (MOTO_ACCOUNT_ID): another account's event is not routed
    monkeypatch.setenv("MOTO_ACCOUNT_ID", "210987654321")
    assert template.route(event) == []
    assert [r.function for r in template.route(event, account="123456789012")] == ["GpuAlarmsFunction"]
    event["account"] = "210987654321"
    assert [r.function for r in template.route(event)] == ["GpuAlarmsFunction"]


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_an_event_of_another_account_reaches_no_rule(path: Path) -> None:
    event = json.loads(path.read_text())
    template = Template.load(TEMPLATE)
    assert template.route(event, account=event["account"]), f"{path.name} reaches no rule in its own account"
    assert template.route(event, account=OTHER) == []


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_a_hub_routes_a_member_accounts_event_as_its_own(path: Path) -> None:
    """In an organization deployment the detectors take a forwarded event of another account."""
    event = json.loads(path.read_text())
    template = Template.load(TEMPLATE)
    own = [(r.function, r.name) for r in template.route(event, account=event["account"])]
    forwarded = [(r.function, r.name) for r in template.route(event, account=OTHER, conditions=ORGANIZATION)]
    assert forwarded == own
    hub = template.conditions({"OrganizationId": "o-a1b2c3d4e5"})
    assert hub["IsOrganization"] is True
    assert [(r.function, r.name) for r in template.route(event, account=OTHER, conditions=hub)] == own


def test_a_hub_still_takes_only_its_own_ops_alarms() -> None:
    template = Template.load(TEMPLATE)
    pattern = template.resources["OpsAlarmRule"]["Properties"]["EventPattern"]
    assert local_pattern(pattern, OTHER, ORGANIZATION)["account"] == [OTHER]


def test_conditions_default_to_a_single_account_deployment() -> None:
    template = Template.load(TEMPLATE)
    assert template.conditions()["IsOrganization"] is False
    assert template.conditions({"OrganizationId": "o-a1b2c3d4e5"})["IsOrganization"] is True
    assert template.conditions()["CreateSlackSecret"] is True


def test_local_pattern_refuses_what_it_cannot_resolve() -> None:
    assert local_pattern(
        {"account": PIN, "detail": {"alarmName": [{"prefix": {"Fn::Sub": "${AWS::StackName}-ops-"}}]}},
        "111122223333",
    ) == {
        "account": ["111122223333"],
        "detail": {"alarmName": [{"prefix": "costguard-ops-"}]},
    }
    with pytest.raises(ValueError, match="cannot resolve"):
        local_pattern({"source": [{"Ref": "SomeParameter"}]}, "111122223333")
    with pytest.raises(ValueError, match="cannot resolve"):
        local_pattern({"source": [{"Fn::GetAtt": ["X", "Arn"]}]}, "111122223333")
    with pytest.raises(ValueError, match="condition"):
        local_pattern({"account": {"Fn::If": ["NoSuchCondition", [], PIN]}}, "111122223333")


def test_local_pattern_takes_the_branch_of_its_condition() -> None:
    pattern = {"source": ["aws.ec2"], "account": ORGANIZATION_PIN}
    assert local_pattern(pattern, "111122223333") == {"source": ["aws.ec2"], "account": ["111122223333"]}
    assert local_pattern(pattern, "111122223333", {"IsOrganization": False}) == {
        "source": ["aws.ec2"],
        "account": ["111122223333"],
    }
    # AWS::NoValue leaves the key out: any account
    assert local_pattern(pattern, "111122223333", ORGANIZATION) == {"source": ["aws.ec2"]}


# --- the per-instance GPU-idle alarms are an option (GpuAlarms, off by default) ------------------------------

ALARMS_ON_ONLY = {"Fn::If": ["GpuAlarmsOn", "ENABLED", "DISABLED"]}


def _events(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        f"{name}.{event_name}": event
        for name, resource in body["Resources"].items()
        for event_name, event in ((resource.get("Properties") or {}).get("Events") or {}).items()
    }


def test_the_alarm_path_runs_only_with_the_alarms_on() -> None:
    """The rule taking a GPU-idle alarm to GpuIdleFunction and the hourly reconcile exist disabled unless
    GpuAlarms is on (SAM takes no Condition on one event); every other rule is always enabled."""
    template = Template.load(TEMPLATE)
    alarm = json.loads((EVENTS / "cloudwatch-alarm-gpu-idle.json").read_text())
    alarm_routes = {f"{r.function}.{r.name}" for r in template.route(alarm)}
    assert alarm_routes == {"GpuIdleFunction.GpuIdleAlarm"}
    gated = alarm_routes | {"GpuAlarmsFunction.Reconcile"}
    states = {
        name: event.get("Properties", {}).get("State") for name, event in _events(template.body).items()
    }
    assert {name for name, state in states.items() if state is not None} == gated
    assert all(states[name] == ALARMS_ON_ONLY for name in gated)
    # The state changes still reach GpuAlarmsFunction: a stopped instance's leftover alarm is deleted.
    assert "GpuAlarmsFunction.InstanceStateChange" in states
    assert template.parameter_defaults()["GpuAlarms"] == "off"
    assert template.conditions()["GpuAlarmsOn"] is False
    assert template.conditions({"GpuAlarms": "on"})["GpuAlarmsOn"] is True


def test_the_alarm_function_learns_the_option_from_its_environment() -> None:
    props = Template.load(TEMPLATE).resources["GpuAlarmsFunction"]["Properties"]
    assert props["Environment"]["Variables"]["COSTGUARD_GPU_ALARMS"] == {"Ref": "GpuAlarms"}
    spec = Template.load(TEMPLATE).body["Parameters"]["GpuAlarms"]
    assert spec["AllowedValues"] == ["off", "on"]
