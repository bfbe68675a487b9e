"""Reads template.yaml the way the deployed stack behaves: functions, their event sources and environment.

**Conditions.** The template's conditions (``IsOrganization``, ``CreateSlackSecret``, ...) are resolved from a
map the caller passes (``conditions=``); a name it leaves out takes its local default, ``LOCAL_CONDITIONS``: a
single-account deployment with the stack's own Slack secret. A local organization world passes
``{"IsOrganization": True}`` (or ``Template.conditions({"OrganizationId": "o-..."})``, which evaluates the
template's Conditions section with those parameter values): its rules then take every account's events and its
functions get ``COSTGUARD_MEMBER_ROLE_NAME``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.events.models import EventPattern

# libyaml's parser where PyYAML was built with it (the same documents, several times faster), else PyYAML's own.
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _CfnLoader(_SafeLoader):  # type: ignore[misc]
    """YAML with CloudFormation's short-form intrinsic functions kept as {"Fn": value} maps."""


def _intrinsic(loader: _CfnLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
        if suffix == "GetAtt" and isinstance(value, str):
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


_CfnLoader.add_multi_constructor("!", _intrinsic)


@lru_cache(maxsize=8)
def _parsed(path: Path, _mtime_ns: int, _size: int) -> dict[str, Any]:
    body: dict[str, Any] = yaml.load(path.read_text(encoding="utf-8"), Loader=_CfnLoader)  # noqa: S506
    return body


@dataclass(frozen=True)
class Route:
    """One event source of one function, as the template declares it."""

    function: str
    source_type: str  # EventBridgeRule, SQS, SNS, Schedule, ScheduleV2
    name: str
    pattern: dict[str, Any] | None = None
    target: Any = None
    schedule_name: str | None = None
    topic_name: str | None = None  # an SNS source: the topic's name as the local stack has it

    def matches(
        self, event: dict[str, Any], account: str | None = None, conditions: Mapping[str, bool] | None = None
    ) -> bool:
        """Whether the rule would deliver this event, in ``account`` (default: the local stack's account), under
        ``conditions`` (default: ``LOCAL_CONDITIONS``, a single-account deployment)."""
        if self.source_type == "SNS":
            # SNS delivers to its subscribers whatever is published: the topic is the whole route.
            return self.topic_name is not None and sns_topic_name(event) == self.topic_name
        pattern = self.event_pattern(account, conditions)
        return pattern is not None and pattern_matches(pattern, event)

    def event_pattern(
        self, account: str | None = None, conditions: Mapping[str, bool] | None = None
    ) -> dict[str, Any] | None:
        """The EventBridge pattern the deployed rule has in ``account`` under ``conditions`` (None: not an
        EventBridge rule or schedule)."""
        if self.source_type in ("Schedule", "ScheduleV2") and self.schedule_name:
            # What a scheduled rule sends: a Scheduled Event naming the rule in its resources.
            return {
                "source": ["aws.events", "aws.scheduler"],
                "detail-type": ["Scheduled Event"],
                "resources": [{"suffix": f"/{self.schedule_name}"}],
            }
        if self.source_type in ("EventBridgeRule", "CloudWatchEvent") and self.pattern is not None:
            resolved: dict[str, Any] = local_pattern(self.pattern, account or local_account(), conditions)
            return resolved
        return None


def pattern_matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """Whether an EventBridge pattern takes the event: moto's implementation of the matching, not a hand-written
    one."""
    return bool(EventPattern(None, pattern).matches_event(event))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Function:
    logical_id: str
    code_uri: Path
    handler: str
    routes: list[Route] = field(default_factory=list)

    @property
    def module_path(self) -> Path:
        return self.code_uri / (self.handler.rsplit(".", 1)[0] + ".py")

    @property
    def handler_name(self) -> str:
        return self.handler.rsplit(".", 1)[1]


@dataclass(frozen=True)
class Template:
    path: Path
    body: dict[str, Any]

    @classmethod
    def load(cls, path: str | Path) -> Template:
        """The template at ``path``: parsed once per version of the file (every local stack, replay and test
        loads it), and a copy of its own for each caller."""
        path = Path(path)
        stat = path.stat()
        return cls(path, copy.deepcopy(_parsed(path.resolve(), stat.st_mtime_ns, stat.st_size)))

    @property
    def resources(self) -> dict[str, Any]:
        resources: dict[str, Any] = self.body.get("Resources", {})
        return resources

    def parameter_defaults(self) -> dict[str, str]:
        return {k: str(v.get("Default", "")) for k, v in self.body.get("Parameters", {}).items()}

    def conditions(self, parameters: Mapping[str, str] | None = None) -> dict[str, bool]:
        """Every condition of the template, evaluated with these parameter values over the defaults (e.g.
        ``{"OrganizationId": "o-a1b2c3d4e5"}`` makes ``IsOrganization`` true)."""
        refs = self.parameter_defaults() | dict(parameters or {})
        definitions: dict[str, Any] = self.body.get("Conditions", {})
        found: dict[str, bool] = {}

        def evaluate(value: Any) -> Any:
            if isinstance(value, dict) and len(value) == 1:
                ((key, arg),) = value.items()
                if key == "Condition":
                    if arg not in found:
                        found[arg] = bool(evaluate(definitions[arg]))
                    return found[arg]
                if key == "Fn::Equals":
                    left, right = (str(evaluate(a)) for a in arg)
                    return left == right
                if key == "Fn::Not":
                    return not evaluate(arg[0])
                if key == "Fn::And":
                    return all(evaluate(a) for a in arg)
                if key == "Fn::Or":
                    return any(evaluate(a) for a in arg)
                if key == "Ref":
                    return refs[arg] if arg in refs else _pseudo(arg)
                if key == "Fn::Join":  # a CommaDelimitedList parameter is a string here: its list joined
                    separator, parts = arg
                    items = parts if isinstance(parts, list) else [parts]
                    return separator.join(str(evaluate(p)).replace(",", separator) for p in items)
            if isinstance(value, dict | list):
                raise ValueError(f"cannot evaluate {value!r} in a condition locally")
            return value

        for name in definitions:
            evaluate({"Condition": name})
        return found

    def functions(self) -> dict[str, Function]:
        found = {}
        for logical_id, resource in self.resources.items():
            if resource.get("Type") != "AWS::Serverless::Function":
                continue
            props = resource["Properties"]
            routes = [
                Route(
                    function=logical_id,
                    source_type=event["Type"],
                    name=name,
                    pattern=event.get("Properties", {}).get("Pattern"),
                    target=event.get("Properties", {}).get("Queue")
                    or event.get("Properties", {}).get("Topic"),
                    schedule_name=_stack_sub(event.get("Properties", {}).get("Name")),
                    topic_name=self.topic_name(event.get("Properties", {}).get("Topic"))
                    if event["Type"] == "SNS"
                    else None,
                )
                for name, event in (props.get("Events") or {}).items()
            ]
            found[logical_id] = Function(
                logical_id,
                self.path.parent / props["CodeUri"],
                props.get("Handler", "app.lambda_handler"),
                routes,
            )
        return found

    def topic_name(self, topic: Any) -> str | None:
        """The name of a topic the template creates (``!Ref Topic``) or names by ARN."""
        if isinstance(topic, dict) and "Ref" in topic:
            props = self.resources.get(topic["Ref"], {}).get("Properties", {})
            return _stack_sub(props.get("TopicName")) or f"{LOCAL_STACK_NAME}-{topic['Ref']}"
        named = _stack_sub(topic)
        return named.rsplit(":", 1)[-1] if named else None

    def global_environment(self) -> dict[str, Any]:
        env: dict[str, Any] = self.body["Globals"]["Function"]["Environment"]["Variables"]
        return env

    def function_environment(self, logical_id: str) -> dict[str, Any]:
        """A function's own Environment Variables, unresolved (``{}`` when it has none): what Lambda sets over
        the Globals' (e.g. a sweep function's ``COSTGUARD_SWEEP_QUEUE_URL: {"Ref": "GpuIdleSweepQueue"}``)."""
        props = self.resources[logical_id].get("Properties", {})
        env: dict[str, Any] = (props.get("Environment") or {}).get("Variables") or {}
        return dict(env)

    def route(
        self, event: dict[str, Any], account: str | None = None, conditions: Mapping[str, bool] | None = None
    ) -> list[Route]:
        """The routes that deliver this event when the stack runs in ``account`` (default: the local one), under
        ``conditions`` (default: a single-account deployment; ``{"IsOrganization": True}`` for a hub, whose
        rules take any account's events)."""
        return [
            r for f in self.functions().values() for r in f.routes if r.matches(event, account, conditions)
        ]

    def _sqs_source(self, function_logical_id: str, queue_logical_id: str) -> dict[str, Any]:
        """The Properties of a function's SQS event source on a queue ({} when it has none)."""
        events = self.body["Resources"][function_logical_id].get("Properties", {}).get("Events", {})
        for event in events.values():
            properties: dict[str, Any] = event.get("Properties", {})
            queue = properties.get("Queue")
            if event.get("Type") == "SQS" and isinstance(queue, dict):
                ref = queue.get("Fn::GetAtt", [None])[0] if "Fn::GetAtt" in queue else queue.get("Ref")
                if ref == queue_logical_id:
                    return properties
        return {}

    def batch_size(self, function_logical_id: str, queue_logical_id: str) -> int:
        """The BatchSize of a function's SQS event source on a queue (Lambda's default, 10, when unset)."""
        return int(self._sqs_source(function_logical_id, queue_logical_id).get("BatchSize", 10))

    def batch_window(self, function_logical_id: str, queue_logical_id: str) -> int:
        """The MaximumBatchingWindowInSeconds of a function's SQS event source (a parameter's default)."""
        window = self._sqs_source(function_logical_id, queue_logical_id).get(
            "MaximumBatchingWindowInSeconds", 0
        )
        if isinstance(window, dict) and "Ref" in window:
            window = self.parameter_defaults().get(window["Ref"], 0)
        return int(window)

    def queue_consumer(self, queue_logical_id: str) -> Function | None:
        for function in self.functions().values():
            for route in function.routes:
                target = route.target
                if route.source_type == "SQS" and isinstance(target, dict):
                    ref = target.get("Fn::GetAtt", [None])[0] if "Fn::GetAtt" in target else target.get("Ref")
                    if ref == queue_logical_id:
                        return function
        return None


LOCAL_STACK_NAME = "costguard"
# The conditions of a local run that names none: one account, the stack's own (created) Slack secret, a webhook
# (no Slack app: no interactions endpoint).
LOCAL_CONDITIONS: dict[str, bool] = {
    "IsOrganization": False,
    "CreateSlackSecret": True,
    "CreateGpuBudget": False,
    "SlackAppOn": False,
    "EksInVpc": False,  # the EKS function outside any VPC (no EksSubnetIds)
}


class _NoValue:
    """``!Ref AWS::NoValue``: the property it stands for is left out."""

    def __repr__(self) -> str:
        return "AWS::NoValue"


NO_VALUE = _NoValue()


def _condition(name: str, conditions: Mapping[str, bool] | None) -> bool:
    if conditions is not None and name in conditions:
        return bool(conditions[name])
    if name in LOCAL_CONDITIONS:
        return LOCAL_CONDITIONS[name]
    raise ValueError(f"no local value for condition {name}")


def _pseudo(name: str) -> str:
    """A pseudo parameter as the local stack has it."""
    if name == "AWS::AccountId":
        return local_account()
    if name == "AWS::Region":
        return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    if name == "AWS::Partition":
        return "aws"
    if name == "AWS::StackName":
        return LOCAL_STACK_NAME
    raise ValueError(f"no local value for {name}")


def local_account() -> str:
    """The account the local stack runs in: moto's, which LocalStack sets to its world's (MOTO_ACCOUNT_ID),
    else moto's default, the account of the sample events and of a world file that names none."""
    return os.environ.get("MOTO_ACCOUNT_ID") or DEFAULT_ACCOUNT_ID


def local_pattern(value: Any, account: str, conditions: Mapping[str, bool] | None = None) -> Any:
    """An event pattern as the deployed rule has it: ``!Ref AWS::AccountId`` is the stack's account, ``!Sub``
    names the local stack, ``!If`` takes the branch of its condition (``conditions``, else
    ``LOCAL_CONDITIONS``: ``IsOrganization`` false) and ``!Ref AWS::NoValue`` leaves its key out; any other
    intrinsic is refused rather than matched as a literal."""
    resolved = _pattern(value, account, conditions)
    if resolved is NO_VALUE:
        raise ValueError(f"{value!r} resolves to no pattern at all")
    return resolved


def _pattern(value: Any, account: str, conditions: Mapping[str, bool] | None) -> Any:
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            if value["Ref"] == "AWS::AccountId":
                return account
            if value["Ref"] == "AWS::Partition":
                return "aws"
            if value["Ref"] == "AWS::NoValue":
                return NO_VALUE
            raise ValueError(f"cannot resolve {value!r} in an event pattern locally")
        if set(value) == {"Fn::If"} and isinstance(value["Fn::If"], list) and len(value["Fn::If"]) == 3:
            name, yes, no = value["Fn::If"]
            return _pattern(yes if _condition(str(name), conditions) else no, account, conditions)
        if set(value) == {"Fn::Sub"} and isinstance(value["Fn::Sub"], str):
            text = value["Fn::Sub"].replace("${AWS::AccountId}", account).replace("${AWS::Partition}", "aws")
            resolved = _stack_sub(text)
            if resolved is None or "${" in resolved:
                raise ValueError(f"cannot resolve {value!r} in an event pattern locally")
            return resolved
        if any(key == "Ref" or key.startswith("Fn::") for key in value):
            raise ValueError(f"cannot resolve {value!r} in an event pattern locally")
        children = {key: _pattern(child, account, conditions) for key, child in value.items()}
        return {key: child for key, child in children.items() if child is not NO_VALUE}
    if isinstance(value, list):
        items = [_pattern(child, account, conditions) for child in value]
        return [item for item in items if item is not NO_VALUE]
    return value


def sns_topic_name(event: dict[str, Any]) -> str | None:
    """The topic an SNS delivery (``Records[].Sns``) came from."""
    records = event.get("Records")
    if not isinstance(records, list) or not records or not isinstance(records[0], dict):
        return None
    sns = records[0].get("Sns")
    arn = sns.get("TopicArn") if isinstance(sns, dict) else None
    return arn.rsplit(":", 1)[-1] if isinstance(arn, str) else None


def _stack_sub(value: Any) -> str | None:
    """A name written as !Sub "${AWS::StackName}-..." as the local stack (named costguard) has it."""
    if isinstance(value, dict) and "Fn::Sub" in value:
        value = value["Fn::Sub"]
    return value.replace("${AWS::StackName}", LOCAL_STACK_NAME) if isinstance(value, str) else None


def resolve(value: Any, refs: Mapping[str, str], conditions: Mapping[str, bool]) -> Any:
    """Evaluate the few intrinsics the Globals use (Ref, Fn::If, Fn::GetAtt) against local values. A pseudo
    parameter not in ``refs`` is the local stack's (``AWS::AccountId``: ``local_account()``); a condition not in
    ``conditions`` takes its ``LOCAL_CONDITIONS`` value (``IsOrganization`` false)."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Ref":
            if arg not in refs and str(arg).startswith("AWS::"):
                return _pseudo(str(arg))
            return refs[arg]
        if key == "Fn::If":
            name, yes, no = arg
            return resolve(yes if _condition(str(name), conditions) else no, refs, conditions)
        if key == "Fn::GetAtt":
            return refs[".".join(arg)]
    if isinstance(value, str | int | float):
        return str(value)
    raise ValueError(f"cannot resolve {value!r} locally")
