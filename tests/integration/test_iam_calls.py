"""The permission declarations are honest: replaying every shipped event and running the audit once on the local
stack, each function's AWS calls (every botocore call, costguard's client factory or powertools' own) stay
within the IAM actions its app module declares."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import pytest
from botocore.client import BaseClient

from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from tests.conftest import EVENTS
from tests.template.iam import declared

# IAM's service prefix where botocore names the service otherwise.
_PREFIXES = {"stepfunctions": "states"}
# Operations IAM authorizes under another action's name.
_ACTIONS = {
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "budgets:DescribeBudget": "budgets:ViewBudget",
    "s3:HeadObject": "s3:GetObject",
    "s3:ListObjectsV2": "s3:ListBucket",
}

Calls = dict[str, set[str]]


def iam_actions(service: str, operation: str, params: dict[str, Any]) -> set[str]:
    """The IAM actions one API call needs."""
    name = f"{_PREFIXES.get(service, service)}:{operation}"
    actions = {_ACTIONS.get(name, name)}
    if name == "cloudwatch:PutMetricAlarm" and params.get("Tags"):
        actions.add("cloudwatch:TagResource")  # tagging on create is authorized separately
    return actions


def undeclared(calls: Calls, declared_actions: dict[str, frozenset[str]]) -> list[str]:
    return [
        f"{function}: called {sorted(actions - declared_actions.get(function, frozenset()))} without declaring them"
        for function, actions in sorted(calls.items())
        if actions - declared_actions.get(function, frozenset())
    ]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Calls]:
    """Every API call made while a function's handler runs, as IAM actions, by the function's logical id."""
    recorded: Calls = defaultdict(set)
    running: ContextVar[str | None] = ContextVar("running", default=None)  # the audit's tasks run in threads
    make_api_call = BaseClient._make_api_call  # type: ignore[attr-defined]
    invoke = LocalStack.invoke

    def recording_call(self: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
        function = running.get()
        if function is not None:
            recorded[function] |= iam_actions(
                self.meta.service_model.service_name, operation_name, api_params
            )
        return make_api_call(self, operation_name, api_params)

    def recording_invoke(self: LocalStack, logical_id: str, event: Any) -> Any:
        token = running.set(logical_id)
        try:
            return invoke(self, logical_id, event)
        finally:
            running.reset(token)

    monkeypatch.setattr(BaseClient, "_make_api_call", recording_call)
    monkeypatch.setattr(LocalStack, "invoke", recording_invoke)
    yield recorded


def test_every_function_calls_only_what_it_declares(
    calls: Calls, world: World, sink: SlackSink, sleeps: list[float]
) -> None:
    # Remediate with no grace period, every event twice: marks, then stops, are made for real.
    # The audit's task functions are held to their declarations by tests/template/test_iam.py only: run under
    # this recording, moto's state machine threads slow to a crawl.
    events = sorted(EVENTS.glob("*.json"))
    # stop_all written, and AWS Budgets reporting what the 150% alert says: budget alerts mark and stop too.
    overrides = {
        "COSTGUARD_GRACE_MINUTES": "0",
        "COSTGUARD_BUDGET_ESCALATION": "forecast:notify,actual>=100:stop_idle,actual>=150:stop_all",
    }
    budgets = [
        b.model_copy(update={"actual_usd": 7652.10}) if b.name == "ml-research-gpu" else b
        for b in world.budgets
    ]
    world = world.model_copy(update={"budgets": budgets})
    with LocalStack(world, sink=sink, mode="remediate", overrides=overrides) as stack:
        replay(stack, [*events, *events])

    problems = undeclared(calls, declared())
    assert not problems, "calls outside the declared PERMISSIONS:\n" + "\n".join(problems)

    # The check means something only if the handlers ran and acted.
    every_call = set().union(*calls.values())
    assert len(calls) >= 10, sorted(calls)
    assert {"ec2:StopInstances", "ec2:CreateTags", "sqs:SendMessage", "dynamodb:PutItem"} <= every_call, (
        sorted(every_call)
    )
    assert "secretsmanager:GetSecretValue" in calls["NotifierFunction"]


def test_a_call_outside_the_declarations_is_reported() -> None:
    code = {"SpotInterruptionsFunction": frozenset({"ec2:DescribeInstances"})}
    seen: Calls = {"SpotInterruptionsFunction": {"ec2:DescribeInstances", "ec2:StopInstances"}}
    assert undeclared(seen, code) == [
        "SpotInterruptionsFunction: called ['ec2:StopInstances'] without declaring them"
    ]


def test_operations_map_to_the_iam_actions_that_authorize_them() -> None:
    assert iam_actions("sqs", "SendMessageBatch", {}) == {"sqs:SendMessage"}
    assert iam_actions("budgets", "DescribeBudget", {}) == {"budgets:ViewBudget"}
    assert iam_actions("cloudwatch", "PutMetricAlarm", {"Tags": [{"Key": "k", "Value": "v"}]}) == {
        "cloudwatch:PutMetricAlarm",
        "cloudwatch:TagResource",
    }
    assert iam_actions("ec2", "StopInstances", {}) == {"ec2:StopInstances"}
