"""What template.yaml grants each role, read as IAM would see it after the SAM transform, and what the code declares.

SAM policy templates (``SQSSendMessagePolicy: {...}``) are expanded from samtranslator's own
policy_templates.json, shipped with the SAM CLI in .venv-sam. The managed policies SAM attaches by itself
(AWSLambdaBasicExecutionRole for the function's logs, AWSXrayWriteOnlyAccess for Tracing: Active, the SQS
poller's AWSLambdaSQSQueueExecutionRole) never appear under Policies and are not compared: they are the
documented base set every function gets.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from costguard.local.template import Template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
STATE_MACHINE_TYPE = "AWS::Serverless::StateMachine"
FUNCTION_TYPE = "AWS::Serverless::Function"
# What a Step Functions task resource calls: the state machine's code is its ASL file.
TASK_ACTIONS = {"arn:aws:states:::lambda:invoke": "lambda:InvokeFunction"}


@dataclass(frozen=True)
class Grant:
    """One Allow statement of one role, with the actions spelled out."""

    role: str
    sid: str
    actions: frozenset[str]
    statement: dict[str, Any]


@cache
def policy_templates() -> dict[str, Any]:
    found = sorted(
        (ROOT / ".venv-sam").glob("lib/python*/site-packages/samtranslator/policy_templates_data/*.json")
    )
    if not found:
        pytest.fail(
            "samtranslator's policy_templates.json not found: run `make setup` to create .venv-sam",
            pytrace=False,
        )
    templates: dict[str, Any] = json.loads(found[0].read_text(encoding="utf-8"))["Templates"]
    return templates


def body() -> dict[str, Any]:
    return Template.load(TEMPLATE).body


def deployed_with(template: dict[str, Any], **values: str) -> dict[str, Any]:
    """The template as a stack deployed with these parameter values renders it (each becomes the Default)."""
    changed = copy.deepcopy(template)
    for name, value in values.items():
        changed["Parameters"][name]["Default"] = value
    return changed


def slack_app_body() -> dict[str, Any]:
    """template.yaml deployed with a Slack app (SlackApp=on): the interactions endpoint and worker exist."""
    return deployed_with(body(), SlackApp="on")


def roles(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every function and state machine whose role SAM builds from Policies."""
    return {
        logical_id: resource
        for logical_id, resource in template.get("Resources", {}).items()
        if resource.get("Type") in (FUNCTION_TYPE, STATE_MACHINE_TYPE)
    }


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def statements(role: str, resource: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, statement) for every statement of the role's Policies, SAM policy templates expanded."""
    for index, policy in enumerate(_as_list(resource.get("Properties", {}).get("Policies") or [])):
        where = f"{role}.Policies[{index}]"
        if isinstance(policy, str):
            # A managed policy by name or ARN: its actions cannot be read here, so none is allowed.
            yield where, {"Effect": "Allow", "Action": f"<managed policy {policy}>", "Resource": "*"}
            continue
        if "Statement" in policy:
            for number, statement in enumerate(_as_list(policy["Statement"])):
                yield f"{where}.Statement[{number}]", statement
            continue
        ((name, arguments),) = policy.items()
        definition = policy_templates().get(name)
        if definition is None:
            yield where, {"Effect": "Allow", "Action": f"<unknown policy template {name}>", "Resource": "*"}
            continue
        for number, statement in enumerate(definition["Definition"]["Statement"]):
            yield f"{where}.{name}[{number}]", _bind(statement, arguments or {})


def _bind(value: Any, arguments: dict[str, Any]) -> Any:
    """A SAM policy template's statement with its parameters (``Ref: SecretArn``) given their values."""
    if isinstance(value, dict):
        if set(value) == {"Ref"} and value["Ref"] in arguments:
            return arguments[value["Ref"]]
        return {k: _bind(v, arguments) for k, v in value.items()}
    if isinstance(value, list):
        return [_bind(v, arguments) for v in value]
    return value


def grants(template: dict[str, Any]) -> list[Grant]:
    found = []
    for role, resource in roles(template).items():
        for where, statement in statements(role, resource):
            if statement.get("Effect") != "Allow":
                continue
            actions = frozenset(a for a in _as_list(statement.get("Action", [])) if isinstance(a, str))
            found.append(Grant(role, str(statement.get("Sid") or where), actions, statement))
    return found


def granted(template: dict[str, Any]) -> dict[str, set[str]]:
    """Role -> every action the template allows it."""
    by_role: dict[str, set[str]] = {role: set() for role in roles(template)}
    for grant in grants(template):
        by_role[grant.role] |= grant.actions
    return by_role


def _load_app(logical_id: str, code_uri: str, handler: str) -> Any:
    path = ROOT / code_uri / (handler.rsplit(".", 1)[0] + ".py")
    spec = importlib.util.spec_from_file_location(f"iam_check_{logical_id}", path)
    assert spec and spec.loader, f"cannot load {path}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# A Distributed Map runs its items as child executions of the same state machine (AWS: "IAM policies for using
# Distributed Map states").
DISTRIBUTED_MAP_ACTIONS = frozenset(
    {"states:StartExecution", "states:DescribeExecution", "states:StopExecution"}
)


# A Distributed Map's ItemReader and ResultWriter call S3 with the state machine's role (AWS: "IAM policies for
# ItemReader", "IAM policies for ResultWriter").
MAP_S3_ACTIONS = {
    "arn:aws:states:::s3:getObject": frozenset({"s3:GetObject"}),
    "arn:aws:states:::s3:putObject": frozenset(
        {"s3:PutObject", "s3:GetObject", "s3:ListMultipartUploadParts", "s3:AbortMultipartUpload"}
    ),
}


def _state_machine_actions(resource: dict[str, Any]) -> set[str]:
    asl = json.loads((ROOT / resource["Properties"]["DefinitionUri"]).read_text(encoding="utf-8"))
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("Type") == "Task":
                resource_arn = str(node.get("Resource"))
                found.add(TASK_ACTIONS.get(resource_arn, f"<unknown task resource {resource_arn}>"))
            processor = node.get("ItemProcessor", {}).get("ProcessorConfig", {})
            if node.get("Type") == "Map" and processor.get("Mode") == "DISTRIBUTED":
                found.update(DISTRIBUTED_MAP_ACTIONS)  # its child executions, started and followed
            for field in ("ItemReader", "ResultWriter"):
                if node.get("Type") == "Map" and field in node:
                    reader_writer = str(node[field].get("Resource"))
                    found.update(
                        MAP_S3_ACTIONS.get(reader_writer, {f"<unknown {field} resource {reader_writer}>"})
                    )
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(asl)
    return found


@cache
def declared() -> dict[str, frozenset[str]]:
    """Role -> the actions its code declares: PERMISSIONS of each function's app module, the ASL's tasks."""
    found: dict[str, frozenset[str]] = {}
    for logical_id, resource in roles(body()).items():
        props = resource.get("Properties", {})
        if resource["Type"] == STATE_MACHINE_TYPE:
            found[logical_id] = frozenset(_state_machine_actions(resource))
            continue
        module = _load_app(logical_id, props["CodeUri"], props.get("Handler", "app.lambda_handler"))
        permissions = getattr(module, "PERMISSIONS", None)
        assert isinstance(permissions, frozenset), (
            f"{props['CodeUri']}app.py exposes no PERMISSIONS frozenset"
        )
        found[logical_id] = permissions
    return found


def drift(template: dict[str, Any], code: dict[str, frozenset[str]]) -> list[str]:
    """Each difference between what the template grants and what the code declares, one line each."""
    problems = []
    allowed = granted(template)
    for role in sorted(allowed.keys() | code.keys()):
        missing = code.get(role, frozenset()) - allowed.get(role, set())
        extra = allowed.get(role, set()) - code.get(role, frozenset())
        if role not in code:
            problems.append(f"{role}: in the template, but no code declares its permissions")
        if missing:
            problems.append(f"{role}: the code needs {sorted(missing)}, which the template does not grant")
        if extra:
            problems.append(f"{role}: the template grants {sorted(extra)}, which no code declares")
    return problems


# --- evaluating statements as IAM does -------------------------------------------------------------
#
# Enough of IAM's policy evaluation to show an attack failing: statements are rendered with the values a
# deployed stack would have (account ACCOUNT, region REGION, stack STACK), then a request (action, resource,
# caller, request context) is decided: an applicable Deny wins, else an applicable Allow, else the implicit
# deny. Condition operators follow the IAM reference: several values of one key are OR'ed (NOR'ed for a
# negated operator), a missing key makes a condition false except for negated operators (true), ...IfExists
# (true) and the ForAllValues qualifier (true); ForAnyValue with a missing key is false; Null "false" needs
# the key present and not empty. An operator not listed here fails the test rather than guessing.

ACCOUNT = "123456789012"
OTHER_ACCOUNT = "210987654321"
REGION = "us-east-1"
OTHER_REGION = "eu-west-1"
PARTITION = "aws"
STACK = "costguard"
STACK_ID = (
    f"arn:{PARTITION}:cloudformation:{REGION}:{ACCOUNT}:stack/{STACK}/5f1c7a20-0000-4000-8000-000000000001"
)
PSEUDO = {
    "AWS::AccountId": ACCOUNT,
    "AWS::Region": REGION,
    "AWS::Partition": PARTITION,
    "AWS::StackName": STACK,
    "AWS::StackId": STACK_ID,
    "AWS::URLSuffix": "amazonaws.com",
}

ALLOW = "Allow"
DENY = "Deny"
IMPLICIT_DENY = "ImplicitDeny"

_NEGATED = {
    "StringNotEquals": "StringEquals",
    "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
    "StringNotLike": "StringLike",
    "ArnNotEquals": "ArnEquals",
    "ArnNotLike": "ArnLike",
}
_POSITIVE = {"StringEquals", "StringEqualsIgnoreCase", "StringLike", "ArnEquals", "ArnLike", "Bool"}


NO_VALUE = object()  # ``!Ref AWS::NoValue``: the list item or property it stands for is left out


class Rendered:
    """A template's intrinsics replaced by what the deployed stack would have (names as CloudFormation and
    SAM make them; a SAM function's role is ``<Function>Role``). ``!Ref AWS::NoValue`` (an ``!If`` branch) leaves
    its list item or map key out, as CloudFormation does."""

    def __init__(self, template: dict[str, Any]) -> None:
        self.template = template
        self.resources: dict[str, Any] = template.get("Resources", {})
        self.parameters: dict[str, Any] = template.get("Parameters", {})

    def condition(self, name: str) -> bool:
        return bool(self._condition(self.template.get("Conditions", {})[name]))

    def _condition(self, value: Any) -> Any:
        if isinstance(value, dict) and len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Condition":
                return self.condition(arg)
            if key == "Fn::Equals":
                left, right = (str(self.value(a)) for a in arg)
                return left == right
            if key == "Fn::Not":
                return not self._condition(arg[0])
            if key == "Fn::And":
                return all(self._condition(a) for a in arg)
            if key == "Fn::Or":
                return any(self._condition(a) for a in arg)
        return self.value(value)

    def _name(self, logical_id: str) -> str:
        return f"{STACK}-{logical_id}-1A2B3C4D5E6F"

    def ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return NO_VALUE
        if name in PSEUDO:
            return PSEUDO[name]
        if name in self.parameters:
            return str(self.parameters[name].get("Default", ""))
        kind = self._type(name)
        props = self.resources.get(name, {}).get("Properties", {})
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{self._name(name)}"
        if kind == "AWS::SNS::Topic":
            return self.attribute(name, "TopicArn")
        if kind == "AWS::S3::Bucket":
            return self._name(name).lower()
        if kind in ("AWS::DynamoDB::Table", "AWS::Serverless::Function", "AWS::Events::Rule"):
            return str(self.value(props.get("Name") or props.get("FunctionName") or self._name(name)))
        if kind == "AWS::SecretsManager::Secret":
            return f"arn:{PARTITION}:secretsmanager:{REGION}:{ACCOUNT}:secret:{self._name(name)}-AbCdEf"
        if kind == "AWS::Serverless::StateMachine":
            return f"arn:{PARTITION}:states:{REGION}:{ACCOUNT}:stateMachine:{self._name(name)}"
        raise ValueError(f"no local value for Ref {name} ({kind})")

    def attribute(self, name: str, attribute: str) -> str:
        kind = self._type(name)
        props = self.resources.get(name, {}).get("Properties", {})
        if kind == "AWS::SQS::Queue" and attribute == "Arn":
            return f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:{self._name(name)}"
        if kind == "AWS::SQS::Queue" and attribute == "QueueName":
            return self._name(name)
        if kind == "AWS::SNS::Topic" and attribute == "TopicArn":
            topic = self.value(props["TopicName"]) if "TopicName" in props else self._name(name)
            return f"arn:{PARTITION}:sns:{REGION}:{ACCOUNT}:{topic}"
        if kind == "AWS::S3::Bucket" and attribute == "Arn":
            return f"arn:{PARTITION}:s3:::{self.ref(name)}"
        if kind == "AWS::DynamoDB::Table" and attribute == "Arn":
            return f"arn:{PARTITION}:dynamodb:{REGION}:{ACCOUNT}:table/{self.ref(name)}"
        if kind == "AWS::Events::Rule" and attribute == "Arn":
            return f"arn:{PARTITION}:events:{REGION}:{ACCOUNT}:rule/{self.ref(name)}"
        if kind == "AWS::IAM::Role" and attribute == "Arn":
            return f"arn:{PARTITION}:iam::{ACCOUNT}:role/{self._name(name)}"
        if kind == "AWS::Serverless::Function" and attribute == "Arn":
            return f"arn:{PARTITION}:lambda:{REGION}:{ACCOUNT}:function:{self.ref(name)}"
        raise ValueError(f"no local value for GetAtt {name}.{attribute} ({kind})")

    def _type(self, name: str) -> str:
        if name in self.resources:
            return str(self.resources[name].get("Type"))
        function = name.removesuffix("Role")
        if name.endswith("Role") and self.resources.get(function, {}).get("Type") in (
            FUNCTION_TYPE,
            STATE_MACHINE_TYPE,
        ):
            return "AWS::IAM::Role"  # the role SAM generates for a function or state machine
        raise ValueError(f"{name} is not a resource, generated role or parameter of the template")

    def _sub(self, text: str, variables: dict[str, Any]) -> str:
        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return str(self.value(variables[name]))
            if "." in name and name not in PSEUDO:
                resource, attribute = name.split(".", 1)
                return self.attribute(resource, attribute)
            return self.ref(name)

        return re.sub(r"\$\{([^}]+)\}", one, text)

    def value(self, value: Any) -> Any:
        """The value with every intrinsic evaluated (strings, lists and maps of them)."""
        if isinstance(value, dict):
            if len(value) == 1:
                ((key, arg),) = value.items()
                if key == "Ref":
                    return self.ref(arg)
                if key == "Fn::GetAtt":
                    resource, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
                    return self.attribute(resource, attribute)
                if key == "Fn::Sub":
                    text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
                    return self._sub(text, variables)
                if key == "Fn::Join":
                    return str(arg[0]).join(str(self.value(v)) for v in self.value(arg[1]))
                if key == "Fn::Split":
                    return str(self.value(arg[1])).split(str(arg[0]))
                if key == "Fn::Select":
                    return self.value(arg[1])[int(self.value(arg[0]))]
                if key == "Fn::If":
                    name, yes, no = arg
                    return self.value(yes if self.condition(name) else no)
                if key.startswith("Fn::"):
                    raise ValueError(f"no local value for {key}")
            pairs = ((k, self.value(v)) for k, v in value.items())
            return {k: v for k, v in pairs if v is not NO_VALUE}
        if isinstance(value, list):
            return [v for v in (self.value(item) for item in value) if v is not NO_VALUE]
        return value


@dataclass(frozen=True)
class Caller:
    """Who makes a request: an IAM role or user (by ARN), or an AWS service principal."""

    arn: str | None = None
    service: str | None = None

    @classmethod
    def role(cls, name: str, account: str = ACCOUNT) -> Caller:
        return cls(arn=f"arn:{PARTITION}:iam::{account}:role/{name}")

    def context(self) -> dict[str, str]:
        if self.service:
            return {"aws:PrincipalIsAWSService": "true", "aws:PrincipalServiceName": self.service}
        assert self.arn, "a caller is a role or user ARN, or a service"
        return {
            "aws:PrincipalArn": self.arn,
            "aws:PrincipalAccount": self.arn.split(":")[4],
            "aws:PrincipalIsAWSService": "false",
        }


SOMEONE = Caller.role("someone-else-in-the-account")


@dataclass(frozen=True)
class Request:
    """One API request as IAM sees it. ``context`` holds the request's own keys (aws:TagKeys as a tuple,
    aws:ResourceTag/<key>, aws:SecureTransport, aws:SourceArn, ...); the caller adds its principal keys."""

    action: str
    resource: str
    caller: Caller = SOMEONE
    context: Mapping[str, str | tuple[str, ...]] = field(default_factory=dict)

    def keys(self) -> dict[str, str | tuple[str, ...]]:
        return {**self.caller.context(), **self.context}


def _wildcard(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, flags=re.IGNORECASE if ignore_case else 0) is not None


def _arn_like(pattern: str, value: str) -> bool:
    """ARN operators: each of the six colon-separated parts matched separately, wildcards allowed."""
    want, got = pattern.split(":", 5), value.split(":", 5)
    return len(want) == len(got) == 6 and all(_wildcard(w, g) for w, g in zip(want, got, strict=True))


def _compare(operator: str, request_value: str, policy_value: str) -> bool:
    if operator == "StringEquals":
        return request_value == policy_value
    if operator == "StringEqualsIgnoreCase":
        return request_value.lower() == policy_value.lower()
    if operator == "StringLike":
        return _wildcard(policy_value, request_value)
    if operator in ("ArnEquals", "ArnLike"):
        return _arn_like(policy_value, request_value)
    if operator == "Bool":
        return request_value.lower() == policy_value.lower()
    raise ValueError(f"condition operator {operator} is not modelled here")


def condition_holds(operator: str, key: str, policy: Any, keys: Mapping[str, str | tuple[str, ...]]) -> bool:
    """One operator on one key, as IAM evaluates it."""
    qualifier, _, base = operator.rpartition(":")
    if qualifier not in ("", "ForAllValues", "ForAnyValue"):
        raise ValueError(f"condition qualifier {qualifier} is not modelled here")
    if_exists = base.endswith("IfExists")
    base = base.removesuffix("IfExists")
    policy_values = [str(v) for v in _as_list(policy)]
    raw = keys.get(key)
    request_values = list(raw) if isinstance(raw, tuple | list) else ([] if raw is None else [raw])
    present = bool(request_values)
    if base == "Null":
        (wanted,) = policy_values
        return (not present) == (wanted.lower() == "true")
    if base not in _POSITIVE and base not in _NEGATED:
        raise ValueError(f"condition operator {base} is not modelled here")
    if not present:
        if if_exists or qualifier == "ForAllValues":
            return True
        if qualifier == "ForAnyValue":
            return False
        return base in _NEGATED

    def one(value: str) -> bool:
        if base in _NEGATED:
            return not any(_compare(_NEGATED[base], value, p) for p in policy_values)
        return any(_compare(base, value, p) for p in policy_values)

    if qualifier == "ForAllValues":
        return all(one(v) for v in request_values)
    return any(one(v) for v in request_values)


def _principal_matches(principal: Any, caller: Caller) -> bool:
    if principal == "*":
        return True
    if not isinstance(principal, dict):
        raise ValueError(f"principal {principal!r} is not modelled here")
    for kind, values in principal.items():
        for value in _as_list(values):
            if kind == "Service" and caller.service == value:
                return True
            if kind == "AWS" and caller.arn:
                account = caller.arn.split(":")[4]
                if value == "*" or value == caller.arn:
                    return True
                if value in (account, f"arn:{PARTITION}:iam::{account}:root"):
                    return True
    return False


def applies(statement: dict[str, Any], request: Request) -> bool:
    """Whether a rendered statement covers the request: action, resource, principal and every condition."""
    if "NotPrincipal" in statement or "NotResource" in statement:
        raise ValueError("NotPrincipal and NotResource are not modelled here")
    if "Action" in statement:
        acts = any(_wildcard(a, request.action, ignore_case=True) for a in _as_list(statement["Action"]))
    else:
        acts = not any(
            _wildcard(a, request.action, ignore_case=True) for a in _as_list(statement["NotAction"])
        )
    if not acts or not any(_wildcard(r, request.resource) for r in _as_list(statement.get("Resource"))):
        return False
    if "Principal" in statement and not _principal_matches(statement["Principal"], request.caller):
        return False
    keys = request.keys()
    return all(
        condition_holds(operator, key, policy, keys)
        for operator, by_key in (statement.get("Condition") or {}).items()
        for key, policy in by_key.items()
    )


def decide(statements: list[dict[str, Any]], request: Request) -> str:
    """ALLOW, DENY (an explicit Deny applies) or IMPLICIT_DENY, over rendered statements."""
    applicable = [s for s in statements if applies(s, request)]
    if any(s.get("Effect") == "Deny" for s in applicable):
        return DENY
    return ALLOW if any(s.get("Effect") == "Allow" for s in applicable) else IMPLICIT_DENY


def role_statements(template: dict[str, Any], role: str) -> list[dict[str, Any]]:
    """Every statement of a function's or state machine's role, rendered."""
    rendered = Rendered(template)
    return [rendered.value(s) for _, s in statements(role, roles(template)[role])]


def resource_policy(template: dict[str, Any], logical_id: str) -> list[dict[str, Any]]:
    """The rendered statements of a queue, topic or bucket policy resource (or an IAM role's policies)."""
    props = template["Resources"][logical_id]["Properties"]
    documents = [props["PolicyDocument"]] if "PolicyDocument" in props else []
    documents += [p["PolicyDocument"] for p in props.get("Policies", [])]
    rendered = Rendered(template)
    return [rendered.value(s) for d in documents for s in _as_list(d["Statement"])]


def concrete(arn_pattern: str, name: str) -> str:
    """A resource ARN the pattern covers: its trailing wildcard replaced by a name."""
    assert arn_pattern.endswith("*"), arn_pattern
    return arn_pattern[:-1] + name
