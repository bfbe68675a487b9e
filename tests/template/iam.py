"""What template.yaml grants each role, read as IAM would see it after the SAM transform, and what the code declares.

SAM policy templates (``SQSSendMessagePolicy: {...}``) are expanded from samtranslator's own
policy_templates.json, shipped with the SAM CLI in .venv-sam. The managed policies SAM attaches by itself
(AWSLambdaBasicExecutionRole for the function's logs, AWSXrayWriteOnlyAccess for Tracing: Active, the SQS
poller's AWSLambdaSQSQueueExecutionRole) never appear under Policies and are not compared: they are the
documented base set every function gets.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from dataclasses import dataclass
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
        (name,) = policy
        definition = policy_templates().get(name)
        if definition is None:
            yield where, {"Effect": "Allow", "Action": f"<unknown policy template {name}>", "Resource": "*"}
            continue
        for number, statement in enumerate(definition["Definition"]["Statement"]):
            yield f"{where}.{name}[{number}]", statement


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


def _state_machine_actions(resource: dict[str, Any]) -> set[str]:
    asl = json.loads((ROOT / resource["Properties"]["DefinitionUri"]).read_text(encoding="utf-8"))
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("Type") == "Task":
                resource_arn = str(node.get("Resource"))
                found.add(TASK_ACTIONS.get(resource_arn, f"<unknown task resource {resource_arn}>"))
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
