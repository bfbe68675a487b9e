"""Notifications captured from real accounts: the SNS envelope's leniency, what a message is, where it goes.

Fixtures: sns-cloudwatch-alarm-lambdago.json and sns-hello-powertools.json are verbatim copies of AWS's own test
payloads (aws-lambda-go events/testdata/cloudwatch-alarm-sns-payload-single-metric.json, powertools-lambda-python
tests/events/snsEvent.json); the sns-budget-* and sns-cost-anomaly-* fixtures are events/ samples delivered
from another topic (a stack named finops, the user's own budget and anomaly topics).
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from costguard.events.budgets import BudgetNotification, CostAnomalyNotification
from costguard.events.registry import (
    BUDGETS_TEXT,
    CLOUDWATCH_ALARM,
    COST_ANOMALY,
    model_for,
    sns_content,
    sns_content_of,
)
from costguard.local.replay import (
    BY_CONTENT,
    BY_OPTION,
    BY_RULE,
    BY_SCHEDULE,
    BY_SUBSCRIPTION,
    route_event,
)
from costguard.local.stack import DEFAULT_TEMPLATE, SEED_AHEAD, seed_horizon
from costguard.local.template import Template
from costguard.local.world import load_world
from tests.conftest import DEMO_WORLD, load_event

TEMPLATE = Template.load(DEFAULT_TEMPLATE)


def _sns(event: dict[str, Any]) -> dict[str, Any]:
    sns: dict[str, Any] = event["Records"][0]["Sns"]
    return sns


# -- the envelope: lenient where costguard does not look, strict where it does ---------------------------


@pytest.mark.parametrize(
    "timestamp",
    ["2026-11-20T12:07:00 .000 Z", " 2026-11-20 T 12:07:00Z ", "yesterday", "", None, 17.5e99, {}],
)
def test_a_malformed_sns_timestamp_does_not_reject_the_alert(timestamp: Any) -> None:
    event = load_event("budget-actual-100-ml-research.json")
    _sns(event)["Timestamp"] = timestamp
    parsed = BudgetNotification.model_validate(event)
    assert parsed.sns.timestamp is None
    assert parsed.id == "6f0c1a2e-1f43-5a0e-9c8e-0b1f2d3c4a53"


def test_a_missing_sns_timestamp_or_a_subject_that_is_not_text_does_not_reject_the_alert() -> None:
    event = load_event("budget-actual-100-ml-research.json")
    del _sns(event)["Timestamp"]
    _sns(event)["Subject"] = {"not": "text"}
    parsed = BudgetNotification.model_validate(event)
    assert parsed.sns.timestamp is None and parsed.sns.subject is None


def test_a_readable_sns_timestamp_is_still_read() -> None:
    parsed = BudgetNotification.model_validate(load_event("budget-actual-100-ml-research.json"))
    assert parsed.sns.timestamp == datetime(2026, 11, 20, 12, 7, tzinfo=UTC)


@pytest.mark.parametrize(
    ("field", "value"),
    [("MessageId", ""), ("MessageId", "   "), ("MessageId", 42), ("TopicArn", ""), ("Message", None)],
)
def test_the_fields_costguard_acts_on_stay_strict(field: str, value: Any) -> None:
    event = load_event("budget-actual-100-ml-research.json")
    _sns(event)[field] = value
    with pytest.raises(ValidationError, match=field):
        BudgetNotification.model_validate(event)


def test_an_empty_sns_message_id_is_named_as_empty() -> None:
    event = load_event("sns-cost-anomaly-user-topic.json")
    _sns(event)["MessageId"] = ""
    with pytest.raises(ValidationError, match="message id is empty"):
        CostAnomalyNotification.model_validate(event)


# -- what a message is ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("budget-actual-100-ml-research.json", BUDGETS_TEXT),
        ("budget-forecasted-ml-research.json", BUDGETS_TEXT),
        ("budget-unexpected-wording.json", BUDGETS_TEXT),  # "AWS Budgets" in its subject and first line
        ("cost-anomaly-sns.json", COST_ANOMALY),
        ("sns-cloudwatch-alarm-lambdago.json", CLOUDWATCH_ALARM),
        ("sns-hello-powertools.json", None),
        ("sagemaker-training-job-failed.json", None),  # not an SNS delivery
    ],
)
def test_sns_content(name: str, content: str | None) -> None:
    assert sns_content_of(load_event(name)) == content


def test_sns_content_of_text_and_json() -> None:
    assert sns_content("Budget Name: x\nAlert Type: ACTUAL") == BUDGETS_TEXT
    assert (
        sns_content("spend went up", subject="AWS Budgets: gpu has exceeded your alert threshold")
        == BUDGETS_TEXT
    )
    assert sns_content('{"AlarmName": "a", "NewStateValue": "ALARM"}') == CLOUDWATCH_ALARM
    assert sns_content('{"anomalyId": "x"}') == COST_ANOMALY
    assert sns_content('{"hello": "world"}') is None
    assert sns_content("[1, 2]") is None


def test_the_captured_samples_still_parse_into_the_budgets_models() -> None:
    # Over the stack's own topic (routed by subscription) an unreadable message is forwarded, never dropped.
    assert model_for(load_event("sns-hello-powertools.json")) is BudgetNotification
    assert model_for(load_event("sns-cost-anomaly-user-topic.json")) is CostAnomalyNotification
    assert BudgetNotification.model_validate(load_event("sns-cloudwatch-alarm-lambdago.json")).id


# -- where it goes -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "function", "how"),
    [
        ("budget-actual-100-ml-research.json", "BudgetsFunction", BY_SUBSCRIPTION),  # the local stack's topic
        ("sns-budget-stack-finops.json", "BudgetsFunction", BY_SUBSCRIPTION),  # a stack named finops
        ("sns-budget-user-topic-bad-timestamp.json", "BudgetsFunction", f"{BY_CONTENT}: budgets text"),
        ("sns-cost-anomaly-user-topic.json", "BudgetsFunction", f"{BY_CONTENT}: cost anomaly"),
        ("sns-cloudwatch-alarm-lambdago.json", "GpuIdleFunction", f"{BY_CONTENT}: cloudwatch alarm"),
        ("sagemaker-training-job-failed.json", "TrainingJobsFunction", BY_RULE),
        ("schedule-gpu-sweep-1200.json", "GpuIdleFunction", BY_SCHEDULE),
    ],
)
def test_route_event(name: str, function: str, how: str) -> None:
    routing = route_event(TEMPLATE, load_event(name))
    assert routing is not None
    assert (routing.functions, routing.how) == ([function], how)


def test_the_routes_by_content_name_the_wording_printed() -> None:
    assert BY_SUBSCRIPTION == "routed by subscription"
    routing = route_event(TEMPLATE, load_event("sns-budget-user-topic-bad-timestamp.json"))
    assert routing is not None and routing.how == "routed by content: budgets text"


def test_an_sns_notification_of_unknown_content_from_another_topic_goes_nowhere_unless_forced() -> None:
    event = load_event("sns-hello-powertools.json")
    assert route_event(TEMPLATE, event) is None
    forced = route_event(TEMPLATE, event, "BudgetsFunction")
    assert forced is not None and (forced.functions, forced.how) == (["BudgetsFunction"], BY_OPTION)


def test_a_topic_that_only_ends_like_the_stacks_is_not_taken_for_it() -> None:
    event = copy.deepcopy(load_event("sns-budget-stack-finops.json"))
    _sns(event)["TopicArn"] = "arn:aws:sns:us-east-1:123456789012:finops-cost-alerts-archive"
    routing = route_event(TEMPLATE, event)
    assert routing is not None and routing.how == f"{BY_CONTENT}: budgets text"


# -- how far the local stack seeds ------------------------------------------------------------------------


def test_the_seeding_horizon_is_capped() -> None:
    world = load_world(DEMO_WORLD)
    assert seed_horizon(world, None) is None
    soon = world.now + SEED_AHEAD / 4
    assert seed_horizon(world, soon) == soon
    assert seed_horizon(world, datetime(2099, 1, 1, tzinfo=UTC)) == world.now + SEED_AHEAD
