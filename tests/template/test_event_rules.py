"""Every EventBridge rule on the default bus takes the stack's own account's events only: other accounts'
events may reach costguard only through an organization-scoped bus its owner sets up. The local routing
(`costguard replay`, the local stack) resolves the pin to the local stack's account."""

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


def test_every_rule_on_the_default_bus_pins_the_stacks_account() -> None:
    problems = []
    for where, pattern, bus in _rules(Template.load(TEMPLATE).body):
        if bus not in (None, "default"):
            continue  # an organization-scoped bus names its own accounts
        if not isinstance(pattern, dict) or pattern.get("account") != PIN:
            problems.append(
                f"{where}: account is {None if not isinstance(pattern, dict) else pattern.get('account')!r}"
            )
    assert not problems, "rules taking events of any account:\n" + "\n".join(problems)


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
    unpinned = [where for where, pattern, _ in _rules(body) if pattern.get("account") != PIN]
    assert unpinned == ["SpotInterruptionsFunction.Events.SpotInterruptionWarning"]


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
    assert template.route(event, account="210987654321") == []


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
