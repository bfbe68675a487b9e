"""Where the replayed stack is deployed for an event, why no rule takes one (the field, named), and an SNS alert's
account when its topic ARN was redacted."""

from __future__ import annotations

import json
from typing import Any

import pytest

from costguard.events.budgets import BudgetNotification, CostAnomalyNotification
from costguard.local.rules import MISSING, deployed_in, refusal
from costguard.local.template import Template
from costguard.local.world import World, load_world
from tests.conftest import DEMO_WORLD, ROOT, load_event

TEMPLATE = Template.load(ROOT / "template.yaml")
OTHER = "999988887777"
SINGLE = {"IsOrganization": False}


@pytest.fixture(scope="module")
def demo() -> World:
    return load_world(DEMO_WORLD)


def test_a_single_account_world_plays_the_stack_in_the_events_account(demo: World) -> None:
    event = load_event("sagemaker-training-job-failed.json") | {"account": OTHER}
    assert deployed_in(demo, event) == (OTHER, SINGLE)
    assert deployed_in(demo, event | {"account": " 1234567890"}) == (demo.account, SINGLE)
    assert deployed_in(demo, {"Records": []}) == (demo.account, SINGLE)  # an SNS delivery names no account


def test_an_organization_world_plays_its_hub(demo: World) -> None:
    org = World.model_validate(demo.model_dump() | {"organization": {"accounts": [{"id": demo.account}]}})
    event = load_event("sagemaker-training-job-failed.json") | {"account": OTHER}
    assert deployed_in(org, event) == (demo.account, {"IsOrganization": True})
    assert TEMPLATE.route(event, demo.account, {"IsOrganization": True})


def _refused(event: dict[str, Any], account: str = OTHER) -> tuple[str, Any, Any, str | None]:
    found = refusal(TEMPLATE, event, account, SINGLE)
    assert found is not None
    return found.field, found.value, found.wanted, found.function


def test_the_field_that_fails_is_named() -> None:
    event = load_event("sagemaker-training-job-failed.json") | {"account": OTHER}
    assert refusal(TEMPLATE, event, OTHER, SINGLE) is None  # taken as it is
    field, value, wanted, function = _refused(event | {"source": "aws.sagemakr"})
    assert (field, value, function) == ("source", "aws.sagemakr", None)
    assert "aws.sagemaker" in wanted
    field, value, wanted, _ = _refused(event | {"detail-type": "SageMaker Training Job Status"})
    assert (field, value) == ("detail-type", "SageMaker Training Job Status")
    assert "SageMaker Training Job State Change" in wanted
    stopping = json.loads(json.dumps(event))
    stopping["detail"]["TrainingJobStatus"] = "Stopping"
    assert _refused(stopping)[:2] == ("detail.TrainingJobStatus", "Stopping")
    assert _refused(stopping)[3] == "TrainingJobsFunction"
    del stopping["detail"]["TrainingJobStatus"]
    assert _refused(stopping)[:2] == ("detail.TrainingJobStatus", MISSING)


def test_an_event_of_another_account_than_the_stacks_names_the_account_field() -> None:
    event = load_event("sagemaker-training-job-failed.json") | {"account": OTHER}
    field, value, wanted, _ = _refused(event, account="123456789012")
    assert (field, value, wanted) == ("account", OTHER, ["123456789012"])
    found = refusal(TEMPLATE, event, "123456789012", SINGLE)
    assert found is not None
    assert found.sentence() == (
        f"the field that fails is account: the event has '{OTHER}', TrainingJobsFunction's rule takes "
        '["123456789012"]'
    )


def _redacted(name: str, topic_account: str) -> dict[str, Any]:
    event = load_event(name)
    sns = event["Records"][0]["Sns"]
    sns["TopicArn"] = sns["TopicArn"].replace(":123456789012:", f":{topic_account}:")
    return event


@pytest.mark.parametrize(
    ("model", "name"),
    [
        (BudgetNotification, "budget-actual-100-ml-research.json"),
        (CostAnomalyNotification, "cost-anomaly-sns.json"),
    ],
)
def test_a_redacted_topic_account_is_read_from_the_message(model: Any, name: str) -> None:
    assert model.model_validate(_redacted(name, " 1234567890")).account == "123456789012"
    assert model.model_validate(_redacted(name, "")).account == "123456789012"
    # The topic's own account stands when it is one: the message is not trusted over it.
    assert model.model_validate(_redacted(name, OTHER)).account == OTHER


def test_a_message_naming_no_account_leaves_the_topics_field() -> None:
    event = _redacted("budget-actual-100-ml-research.json", " 1234567890")
    sns = event["Records"][0]["Sns"]
    sns["Message"] = sns["Message"].replace("AWS Account 123456789012", "AWS Account")
    assert BudgetNotification.model_validate(event).account == " 1234567890"
