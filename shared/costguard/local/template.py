"""Reads template.yaml the way the deployed stack behaves: functions, their event sources and environment."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.events.models import EventPattern


class _CfnLoader(yaml.SafeLoader):
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
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {name: value}


_CfnLoader.add_multi_constructor("!", _intrinsic)


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

    def matches(self, event: dict[str, Any], account: str | None = None) -> bool:
        """Whether the rule would deliver this event, in ``account`` (default: the local stack's account)."""
        if self.source_type == "SNS":
            # SNS delivers to its subscribers whatever is published: the topic is the whole route.
            return self.topic_name is not None and sns_topic_name(event) == self.topic_name
        if self.source_type in ("Schedule", "ScheduleV2") and self.schedule_name:
            # What a scheduled rule sends: a Scheduled Event naming the rule in its resources.
            pattern = {
                "source": ["aws.events", "aws.scheduler"],
                "detail-type": ["Scheduled Event"],
                "resources": [{"suffix": f"/{self.schedule_name}"}],
            }
        elif self.source_type in ("EventBridgeRule", "CloudWatchEvent") and self.pattern is not None:
            pattern = local_pattern(self.pattern, account or local_account())
        else:
            return False
        # moto's implementation of EventBridge pattern matching, not a hand-written one.
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
        path = Path(path)
        return cls(path, yaml.load(path.read_text(encoding="utf-8"), Loader=_CfnLoader))  # noqa: S506

    @property
    def resources(self) -> dict[str, Any]:
        resources: dict[str, Any] = self.body.get("Resources", {})
        return resources

    def parameter_defaults(self) -> dict[str, str]:
        return {k: str(v.get("Default", "")) for k, v in self.body.get("Parameters", {}).items()}

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

    def route(self, event: dict[str, Any], account: str | None = None) -> list[Route]:
        """The routes that deliver this event when the stack runs in ``account`` (default: the local one)."""
        return [r for f in self.functions().values() for r in f.routes if r.matches(event, account)]

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


def local_account() -> str:
    """The account the local stack runs in: moto's, which LocalStack sets to its world's (MOTO_ACCOUNT_ID),
    else moto's default, the account of the sample events and of a world file that names none."""
    return os.environ.get("MOTO_ACCOUNT_ID") or DEFAULT_ACCOUNT_ID


def local_pattern(value: Any, account: str) -> Any:
    """An event pattern as the deployed rule has it: ``!Ref AWS::AccountId`` is the stack's account and
    ``!Sub`` names the local stack; any other intrinsic is refused rather than matched as a literal."""
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            if value["Ref"] == "AWS::AccountId":
                return account
            if value["Ref"] == "AWS::Partition":
                return "aws"
            raise ValueError(f"cannot resolve {value!r} in an event pattern locally")
        if set(value) == {"Fn::Sub"} and isinstance(value["Fn::Sub"], str):
            text = value["Fn::Sub"].replace("${AWS::AccountId}", account).replace("${AWS::Partition}", "aws")
            resolved = _stack_sub(text)
            if resolved is None or "${" in resolved:
                raise ValueError(f"cannot resolve {value!r} in an event pattern locally")
            return resolved
        if any(key == "Ref" or key.startswith("Fn::") for key in value):
            raise ValueError(f"cannot resolve {value!r} in an event pattern locally")
        return {key: local_pattern(child, account) for key, child in value.items()}
    if isinstance(value, list):
        return [local_pattern(child, account) for child in value]
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


def resolve(value: Any, refs: dict[str, str], conditions: dict[str, bool]) -> Any:
    """Evaluate the few intrinsics the Globals use (Ref, Fn::If, Fn::GetAtt) against local values."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, arg),) = value.items()
        if key == "Ref":
            return refs[arg]
        if key == "Fn::If":
            name, yes, no = arg
            return resolve(yes if conditions[name] else no, refs, conditions)
        if key == "Fn::GetAtt":
            return refs[".".join(arg)]
    if isinstance(value, str | int | float):
        return str(value)
    raise ValueError(f"cannot resolve {value!r} locally")
