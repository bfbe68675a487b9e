"""Budget alerts and anomalies, pure: reading the messages, escalation levels, ranking, what may be stopped."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from costguard.detect.budgets import (
    Breach,
    BudgetMessageError,
    Running,
    Scope,
    anomaly_finding,
    anomaly_scope,
    breach_stops,
    busiest_last,
    parse_budget_message,
    ranked,
    scope_from_budget,
    unread_regions,
)
from costguard.detect.escalation import DEFAULT_ESCALATION, AlertType, Escalation, level_for, parse_levels
from costguard.events.budgets import Anomaly, AnomalyDetected, BudgetNotification, CostAnomalyNotification
from costguard.events.registry import model_for
from costguard.model import MARK_TAG_KEY, Finding, Resource, ResourceKind
from tests.conftest import load_event

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)

# The wording of a real daily-budget notification (an SNS delivery published in a public repository).
DAILY = (
    "AWS Budget Notification March 05, 2023\nAWS Account 265627204426\n\nDear AWS Customer,\n\n"
    "You requested that we alert you when the ACTUAL Cost associated with your killswitch budget is greater "
    "than $0.75 per day. Yesterday, the ACTUAL Cost associated with this budget is $1.70. You can find "
    "additional details below and by accessing the AWS Budgets dashboard [1].\n\nBudget Name: killswitch\n"
    "Budget Type: Cost\nBudgeted Amount: $5.00\nAlert Type: ACTUAL\nAlert Threshold: > $0.75\n"
    "ACTUAL Amount: $1.70\n\n[1] https://console.aws.amazon.com/billing/home#/budgets\n"
)


def message_of(name: str) -> tuple[str, str | None]:
    sns = load_event(name)["Records"][0]["Sns"]
    return sns["Message"], sns.get("Subject")


# -- reading AWS Budgets messages ------------------------------------------------------------------


def test_real_daily_wording_is_read_line_by_line() -> None:
    alert = parse_budget_message(DAILY)
    assert (alert.name, alert.alert_type, alert.budget_type) == ("killswitch", AlertType.ACTUAL, "Cost")
    assert (alert.budgeted_usd, alert.threshold_usd, alert.amount_usd) == (5.0, 0.75, 1.70)
    assert alert.account == "265627204426"
    assert alert.percent == 34.0  # $1.70 of $5.00


@pytest.mark.parametrize(
    ("name", "alert_type", "amount", "percent"),
    [
        ("budget-forecasted-ml-research.json", AlertType.FORECASTED, 6240.0, 124.8),
        ("budget-actual-80-ml-research.json", AlertType.ACTUAL, 4080.0, 81.6),
        ("budget-actual-100-ml-research.json", AlertType.ACTUAL, 5120.4, 102.4),
        ("budget-actual-150-ml-research.json", AlertType.ACTUAL, 7652.1, 153.0),
    ],
)
def test_sample_alerts_read_their_amounts(
    name: str, alert_type: AlertType, amount: float, percent: float
) -> None:
    alert = parse_budget_message(*message_of(name))
    assert (alert.name, alert.alert_type, alert.amount_usd, alert.budgeted_usd) == (
        "ml-research-gpu",
        alert_type,
        amount,
        5000.0,
    )
    assert alert.percent == percent


def test_threshold_with_a_percentage_is_read() -> None:
    alert = parse_budget_message(*message_of("budget-actual-80-ml-research.json"))
    assert (alert.threshold_usd, alert.threshold_percent) == (4000.0, 80.0)


def test_missing_lines_fall_back_to_subject_and_sentence() -> None:
    text = "\n".join(
        line for line in DAILY.splitlines() if not line.startswith(("Budget Name", "Alert Type"))
    )
    alert = parse_budget_message(text, "AWS Budgets: killswitch has exceeded your alert threshold")
    assert (alert.name, alert.alert_type) == ("killswitch", AlertType.ACTUAL)


def test_unexpected_wording_raises_naming_what_is_missing() -> None:
    with pytest.raises(BudgetMessageError, match="no Budget Name and no Alert Type"):
        parse_budget_message(*message_of("budget-unexpected-wording.json"))


def test_unknown_alert_type_is_an_error() -> None:
    with pytest.raises(BudgetMessageError, match="PREDICTED"):
        parse_budget_message(DAILY.replace("Alert Type: ACTUAL", "Alert Type: PREDICTED"))


# -- models and the registry -----------------------------------------------------------------------


def test_sns_deliveries_are_told_apart_by_their_message() -> None:
    assert model_for(load_event("budget-actual-100-ml-research.json")) is BudgetNotification
    assert model_for(load_event("budget-unexpected-wording.json")) is BudgetNotification
    assert model_for(load_event("cost-anomaly-sns.json")) is CostAnomalyNotification
    assert model_for(load_event("cost-anomaly-detected.json")) is AnomalyDetected


def test_anomaly_reads_both_spellings_of_the_dimension() -> None:
    sns = CostAnomalyNotification.model_validate(load_event("cost-anomaly-sns.json"))
    eventbridge = AnomalyDetected.model_validate(load_event("cost-anomaly-detected.json"))
    assert sns.anomaly.dimension_value == "Amazon Elastic Compute Cloud - Compute"  # dimensionalValue
    assert eventbridge.detail.dimension_value == "Amazon SageMaker"  # dimensionValue
    assert sns.anomaly.impact.total_impact == 1054.39
    assert sns.id == "2cdcea49-c94c-5ad6-85e7-b6e6afb934b1"
    assert (sns.account, sns.region) == ("123456789012", "us-east-1")


def test_anomaly_without_an_id_fails_validation() -> None:
    event = load_event("cost-anomaly-sns.json")
    body = json.loads(event["Records"][0]["Sns"]["Message"])
    body["anomalyId"] = ""
    event["Records"][0]["Sns"]["Message"] = json.dumps(body)
    with pytest.raises(ValueError, match="anomalyId"):
        CostAnomalyNotification.model_validate(event)


# -- escalation levels -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("alert_type", "percent", "expected"),
    [
        (AlertType.FORECASTED, 124.8, Escalation.NOTIFY),
        (AlertType.ACTUAL, 81.6, None),
        (AlertType.ACTUAL, 100.0, Escalation.STOP_IDLE),
        (AlertType.ACTUAL, 149.9, Escalation.STOP_IDLE),
        (AlertType.ACTUAL, 153.0, Escalation.STOP_IDLE),  # stop_all is opt-in: never in the default
        (AlertType.ACTUAL, 100_000.0, Escalation.STOP_IDLE),
        (AlertType.ACTUAL, None, None),
    ],
)
def test_the_highest_level_reached_applies(
    alert_type: AlertType, percent: float | None, expected: Escalation | None
) -> None:
    level = level_for(parse_levels(DEFAULT_ESCALATION), alert_type, percent)
    assert (level.escalation if level else None) == expected


def test_stop_all_applies_only_when_written() -> None:
    assert "stop_all" not in DEFAULT_ESCALATION
    level = level_for(parse_levels(DEFAULT_ESCALATION + ",actual>=150:stop_all"), AlertType.ACTUAL, 153.0)
    assert level is not None and level.escalation is Escalation.STOP_ALL


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("actual>=abc:notify", "is not"),
        ("actual>=100:terminate", "'terminate'"),
        ("actual:notify,actual:stop_idle", "repeats"),
        (" , ", "at least one"),
    ],
)
def test_bad_escalation_is_refused(spec: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_levels(spec)


# -- ranking and stops -----------------------------------------------------------------------------


def running(rid: str, hourly: float | None, verdict: str, **tags: str) -> Running:
    resource = Resource(
        kind=ResourceKind.EC2_INSTANCE,
        id=rid,
        account="123456789012",
        region="us-east-1",
        instance_type="p4d.24xlarge",
        tags=tags,
    )
    return Running(resource, hourly, verdict)


def test_ranking_is_costliest_first_and_unknown_prices_last() -> None:
    order = ranked([running("a", 1.2, "busy"), running("b", None, "idle"), running("c", 55.04, "idle")])
    assert [r.resource.id for r in order] == ["c", "a", "b"]


def test_stops_go_idle_first_and_busiest_last() -> None:
    order = busiest_last(
        [running("busy", 55.0, "busy"), running("idle", 1.0, "idle"), running("starved", 9.0, "starved")]
    )
    assert [r.resource.id for r in order] == ["idle", "starved", "busy"]


def breach(escalation: Escalation, resources: list[Running]) -> Breach:
    alert = parse_budget_message(DAILY)
    levels = parse_levels(f"actual:{escalation.value}")
    return Breach(alert, levels[0], Scope(), "123456789012", "us-east-1", NOW, "e1", tuple(resources))


def ids(findings: list[Finding]) -> list[str]:
    return [f.resource.id for f in findings]


def test_stop_idle_offers_only_idle_unprotected_resources() -> None:
    resources = [
        running("idle", 20.0, "idle"),
        running("busy", 30.0, "busy"),
        running("kept", 20.0, "idle", **{"costguard:protect": "true"}),
    ]
    found = breach_stops(
        breach(Escalation.STOP_IDLE, resources),
        protect_tag_key="costguard:protect",
        grace=timedelta(minutes=15),
        max_stops=5,
    )
    assert ids(found) == ["idle"]
    assert all(f.remediable for f in found)


def test_stop_all_offers_everything_unprotected_busiest_last() -> None:
    resources = [
        running("busy", 30.0, "busy"),
        running("idle", 20.0, "idle"),
        running("nodata", 5.0, "no_metrics"),
    ]
    found = breach_stops(
        breach(Escalation.STOP_ALL, resources), protect_tag_key="p", grace=timedelta(minutes=15), max_stops=5
    )
    assert ids(found) == ["idle", "nodata", "busy"]


def test_notify_level_offers_nothing() -> None:
    found = breach_stops(
        breach(Escalation.NOTIFY, [running("idle", 20.0, "idle")]),
        protect_tag_key="p",
        grace=timedelta(minutes=15),
        max_stops=5,
    )
    assert found == []


def test_the_cap_holds_the_busiest_back_among_stops_due() -> None:
    marked = {MARK_TAG_KEY: (NOW - timedelta(hours=1)).isoformat()}
    resources = [
        running("busy-dear", 55.0, "busy", **marked),
        running("idle-cheap", 1.0, "idle", **marked),
        running("starved", 9.0, "starved", **marked),
    ]
    found = breach_stops(
        breach(Escalation.STOP_ALL, resources), protect_tag_key="p", grace=timedelta(minutes=15), max_stops=2
    )
    # The policy's own cap would keep the costliest; the playbook keeps the busiest running instead.
    assert ids(found) == ["idle-cheap", "starved"]


# -- scope -----------------------------------------------------------------------------------------


def test_scope_comes_from_the_budget_tag_filters() -> None:
    legacy = scope_from_budget({"CostFilters": {"TagKeyValue": ["user:team$ml-research"], "Service": ["x"]}})
    expression = scope_from_budget({"FilterExpression": {"Tags": {"Key": "user:project", "Values": ["llm"]}}})
    assert legacy.tags == (("team", "ml-research"),)
    assert expression.tags == (("project", "llm"),)
    assert scope_from_budget({"CostFilters": {"Service": ["Amazon SageMaker"]}}) == Scope()
    assert legacy.covers(running("a", 1.0, "idle", team="ml-research").resource)
    assert not legacy.covers(running("b", 1.0, "idle", team="nlp").resource)
    assert Scope().covers(running("c", 1.0, "idle").resource)


def test_anomaly_names_the_kinds_and_regions_to_list() -> None:
    anomaly = Anomaly.model_validate(
        {
            "anomalyId": "a1",
            "rootCauses": [
                {"service": "Amazon Elastic Compute Cloud - Compute", "region": "us-west-2"},
                {"service": "Amazon SageMaker", "region": "us-east-1", "linkedAccount": "123456789012"},
                {"service": "Amazon SageMaker", "region": "eu-west-1", "linkedAccount": "999999999999"},
                {"service": "AWS CloudTrail", "region": "us-east-1"},
            ],
        }
    )
    scope = anomaly_scope(anomaly, "123456789012", "us-east-1")
    assert scope == {
        "us-west-2": {ResourceKind.EC2_INSTANCE},
        "us-east-1": {ResourceKind.TRAINING_JOB, ResourceKind.NOTEBOOK, ResourceKind.ENDPOINT},
    }


def test_an_anomaly_naming_regions_that_are_not_region_codes_lists_the_others_and_names_them() -> None:
    ec2 = "Amazon Elastic Compute Cloud - Compute"
    anomaly = Anomaly.model_validate(
        {
            "anomalyId": "a1",
            "rootCauses": [
                {"service": ec2, "region": "global"},
                {"service": "Amazon SageMaker", "region": "NoRegion", "linkedAccount": "123456789012"},
                {"service": ec2, "region": "eu-west-1 "},
                {"service": ec2, "region": " NoRegion"},
                {"service": "AWS CloudTrail", "region": "global"},  # no GPU service: nothing to list there
                {"service": ec2, "region": ""},  # no region: the alert's own
            ],
        }
    )
    assert anomaly_scope(anomaly, "123456789012", "us-east-1") == {
        "eu-west-1": {ResourceKind.EC2_INSTANCE},
        "us-east-1": {ResourceKind.EC2_INSTANCE},
    }
    unread = unread_regions(anomaly, "123456789012")
    assert unread == ["global", "NoRegion"]
    finding = anomaly_finding(
        anomaly,
        [],
        account="123456789012",
        region="us-east-1",
        now=NOW,
        event_id="e1",
        protect_tag_key="costguard:protect",
        unread=unread,
    )
    assert "Regions not read (not a region code): global, NoRegion.\n" in finding.summary
    assert f"{ec2}, eu-west-1;" in finding.summary
    assert finding.evidence["regions_not_read"] == ["global", "NoRegion"]
