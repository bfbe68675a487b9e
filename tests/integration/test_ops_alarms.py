"""costguard's own alarms: one per function and per waiting queue, reaching Slack through the notifier."""

from __future__ import annotations

import copy
import json
from typing import Any

from moto.events.models import EventPattern

from costguard.aws import clients
from costguard.local.stack import LocalStack
from costguard.local.template import Template, local_pattern
from costguard.model import Reason
from costguard.notify.notice import Notice
from costguard.notify.titles import TITLES
from tests.conftest import EVENTS, ROOT

TEMPLATE = Template.load(ROOT / "template.yaml")
RESOURCES = TEMPLATE.resources
OPS_PREFIX = "${AWS::StackName}-ops-"
ACCOUNT = "123456789012"  # the sample events' account


def _alarms() -> dict[str, dict[str, Any]]:
    return {k: r["Properties"] for k, r in RESOURCES.items() if r["Type"] == "AWS::CloudWatch::Alarm"}


def _rule() -> dict[str, Any]:
    return dict(RESOURCES["OpsAlarmRule"]["Properties"])


def _alarm_event(name: str, state: str = "ALARM") -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / "cloudwatch-alarm-gpu-idle.json").read_text())
    event = copy.deepcopy(event)
    event["id"] = "7d2c9a10-0000-4000-8000-00000000ab01"
    event["resources"] = [f"arn:aws:cloudwatch:us-east-1:123456789012:alarm:{name}"]
    event["detail"]["alarmName"] = name
    event["detail"]["state"]["value"] = state
    return event


def _transform(event: dict[str, Any]) -> str:
    """EventBridge's input transformer: each <name> replaced by the value at its JSON path."""
    transformer = _rule()["Targets"][0]["InputTransformer"]
    body: str = transformer["InputTemplate"]
    for name, path in transformer["InputPathsMap"].items():
        value: Any = event
        for step in path.removeprefix("$.").split("."):
            value = value[step]
        body = body.replace(
            f"<{name}>", json.dumps(value)[1:-1] if isinstance(value, str) else json.dumps(value)
        )
    return body


def test_every_function_has_an_alarm_on_its_errors_and_the_accounts_throttles_one() -> None:
    watched: dict[str, set[str]] = {}
    account_wide: list[str] = []
    for alarm in _alarms().values():
        queries = alarm.get("Metrics") or [{"MetricStat": {"Metric": alarm}}]
        for query in queries:
            metric = query.get("MetricStat", {}).get("Metric", {})
            if metric.get("Namespace") != "AWS/Lambda":
                continue
            if not metric.get("Dimensions"):
                account_wide.append(metric["MetricName"])
                continue
            [dimension] = metric["Dimensions"]
            watched.setdefault(dimension["Value"]["Ref"], set()).add(metric["MetricName"])
    functions = set(TEMPLATE.functions())
    reserving = {
        name
        for name, resource in RESOURCES.items()
        if resource.get("Type") == "AWS::Serverless::Function"
        and "ReservedConcurrentExecutions" in resource.get("Properties", {})
    }
    assert reserving == {"InteractionsFunction"}  # the public endpoint caps what a flood can take
    # A function with reserved concurrency is throttled on its own: its throttles are watched with its errors.
    missing = sorted(
        f for f in functions if watched.get(f) != ({"Errors", "Throttles"} if f in reserving else {"Errors"})
    )
    assert not missing, f"no ops alarm on the Errors of {missing} (template.yaml, Operating costguard)"
    # The others reserve none: they are throttled only with the whole account, watched once.
    assert account_wide == ["Throttles"]


def test_the_waiting_queues_have_depth_alarms() -> None:
    depth = {
        a["Dimensions"][0]["Value"]["Fn::GetAtt"][0]
        for a in _alarms().values()
        if a.get("MetricName") == "ApproximateNumberOfMessagesVisible"
    }
    assert depth == {
        "DecisionsDeadLetterQueue",
        "FailedEventsQueue",
        "InteractionsDeadLetterQueue",
        "SweepDeadLetterQueue",
    }


def test_ops_alarm_names_share_the_prefix_the_rule_matches() -> None:
    names = [a["AlarmName"]["Fn::Sub"] for a in _alarms().values()]
    assert names and all(name.startswith(OPS_PREFIX) for name in names)
    assert len(set(names)) == len(names)
    rule = _rule()
    assert rule["EventPattern"]["detail"]["alarmName"] == [{"prefix": {"Fn::Sub": OPS_PREFIX}}]
    [target] = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": ["DecisionsQueue", "Arn"]}
    statements = RESOURCES["DecisionsQueueOpsPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    [grant] = [s for s in statements if s["Effect"] == "Allow"]
    assert grant["Condition"]["ArnEquals"]["aws:SourceArn"] == {"Fn::GetAtt": ["OpsAlarmRule", "Arn"]}


def test_rule_matches_only_costguards_own_alarms_entering_alarm() -> None:
    pattern = EventPattern(None, local_pattern(_rule()["EventPattern"], ACCOUNT))  # type: ignore[arg-type]
    assert pattern.matches_event(_alarm_event("costguard-ops-notifier"))
    assert not pattern.matches_event(_alarm_event("costguard-ops-notifier", state="OK"))
    assert not pattern.matches_event(_alarm_event("costguard-gpu-idle-i-0a1f00000000000a1"))
    assert not pattern.matches_event(_alarm_event("someone-elses-alarm"))
    # and the GPU verdicts never see costguard's own alarms
    assert TEMPLATE.route(_alarm_event("costguard-ops-notifier")) == []


def test_an_ops_alarm_reaches_slack_once_through_the_notifier(stack: LocalStack) -> None:
    event = _alarm_event("costguard-ops-notifier")
    body = _transform(event)
    notice = Notice.model_validate_json(body)
    assert notice.decision.reason is Reason.COSTGUARD_ALARM
    assert notice.decision.finding.event_id == event["id"]

    for _ in range(2):  # EventBridge may deliver one state change twice
        clients.sqs().send_message(QueueUrl=stack.urls["DecisionsQueue"], MessageBody=body)
    stack.drain()
    [message] = stack.sink.messages
    text = json.dumps(message)
    assert TITLES[Reason.COSTGUARD_ALARM] in text
    assert "costguard-ops-notifier" in text
    assert "cloudwatch/home?region=us-east-1#alarmsV2:alarm/costguard-ops-notifier" in text
