"""budget_breach and cost_anomaly end to end: SNS or EventBridge -> BudgetsFunction -> queue -> notifier -> Slack."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from costguard.aws import clients
from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.template import Template
from costguard.local.world import World
from tests.conftest import EVENTS, ROOT, load_event

P4D_IDLE, P4D_BUSY = "i-0a1f00000000000a1", "i-0a1f00000000000a2"
FORECAST = EVENTS / "budget-forecasted-ml-research.json"
ACTUAL_80 = EVENTS / "budget-actual-80-ml-research.json"
ACTUAL_100 = EVENTS / "budget-actual-100-ml-research.json"
ACTUAL_150 = EVENTS / "budget-actual-150-ml-research.json"
UNREADABLE = EVENTS / "budget-unexpected-wording.json"
FOLLOW_UP = EVENTS / "schedule-budget-follow-up-1230.json"
FOLLOW_UP_AT = datetime(2026, 11, 20, 12, 30, tzinfo=UTC)


@pytest.fixture
def stack(world: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    """The demo stack with metric series running on to the latest sample event, as `costguard replay` has it."""
    with LocalStack(world, sink=sink, until=FOLLOW_UP_AT) as running:
        yield running


def actions(decisions: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(d["action"], d["resource_kind"], d["resource_id"]) for d in decisions]


SUMMARY = ("notify", "budget")
IDLE_MARKS = [("mark", "ec2_instance", P4D_IDLE), ("mark", "notebook_instance", "dana-scratch")]
STOP_ALL = "forecast:notify,actual>=100:stop_idle,actual>=150:stop_all"


def spending(world: World, actual_usd: float) -> World:
    """The world with its ml-research-gpu budget at this ACTUAL spend, as AWS Budgets would report it."""
    budgets = [
        b.model_copy(update={"actual_usd": actual_usd}) if b.name == "ml-research-gpu" else b
        for b in world.budgets
    ]
    return world.model_copy(update={"budgets": budgets})


# docs/detectors.md's table of escalation levels, as the default BudgetEscalation and the demo world play it
# (budget ml-research-gpu, $5,000, scoped by its cost filter to team=ml-research; notify mode, so all dry
# runs). Each alert arrives with AWS Budgets reporting the spend its message names.
DOCUMENTED = [
    (FORECAST, 5120.40, "forecast:notify", []),
    (ACTUAL_80, 4080.00, "none", []),
    (ACTUAL_100, 5120.40, "actual>=100:stop_idle", IDLE_MARKS),
    (ACTUAL_150, 7652.10, "actual>=100:stop_idle", IDLE_MARKS),  # stop_all is opt-in
]


@pytest.mark.parametrize(
    ("path", "actual", "level", "stops"), DOCUMENTED, ids=lambda v: getattr(v, "name", None)
)
def test_each_level_gives_its_documented_decisions(
    world: World, sink: SlackSink, path: Any, actual: float, level: str, stops: list[tuple[str, str, str]]
) -> None:
    with LocalStack(spending(world, actual), sink=sink, until=FOLLOW_UP_AT) as stack:
        [result] = replay(stack, [path])
    assert result.ok, result.error
    assert result.function == "BudgetsFunction"
    summary, *rest = result.decisions
    assert (summary["action"], summary["resource_kind"], summary["reason"]) == (*SUMMARY, "budget_breach")
    assert result.findings[0]["evidence"]["escalation"] == level
    assert "AWS Budgets reports" in result.findings[0]["evidence"]["budget_check"]
    assert actions(rest) == stops
    assert all(d["dry_run"] for d in result.decisions)
    assert all(d["reason"] == "budget_breach" for d in rest)


def changed(directory: Path, sample: Path, old: str, new: str) -> Path:
    """A sample alert with its message text changed, written as an event file to replay."""
    event = load_event(sample.name)
    sns = event["Records"][0]["Sns"]
    sns["MessageId"] = f"changed-{new}"
    sns["Message"] = sns["Message"].replace(old, new)
    path = directory / sample.name
    path.write_text(json.dumps(event))
    return path


def test_a_forged_alert_stops_nothing_and_says_why(world: World, sink: SlackSink, tmp_path: Path) -> None:
    """The budget reports $5,120.40 of $5,000; the message claims $100,000. Even in remediate mode with
    stop_all written, nothing is marked or stopped, and the message says what AWS Budgets reports."""
    overrides = {"COSTGUARD_BUDGET_ESCALATION": STOP_ALL}
    with LocalStack(world, sink=sink, mode="remediate", overrides=overrides, until=FOLLOW_UP_AT) as stack:
        [result] = replay(stack, [changed(tmp_path, ACTUAL_150, "$7,652.10", "$100,000.00")])
        assert result.ok, result.error
        [summary] = result.decisions
        assert (summary["action"], summary["resource_kind"]) == SUMMARY
        assert result.findings[0]["evidence"]["escalation"] == "none"
        text = json.dumps(result.slack)
        assert "Not confirmed by AWS Budgets" in text
        assert "$100,000.00 is above the $5,120.40 AWS Budgets reports" in text
        [follow_up] = replay(stack, [FOLLOW_UP])
        assert follow_up.ok, follow_up.error
        assert follow_up.decisions == []  # no breach was recorded: the follow-up has nothing to stop
        ec2 = clients.ec2("us-east-1")
        for reservation in ec2.describe_instances(InstanceIds=[P4D_IDLE, P4D_BUSY])["Reservations"]:
            for instance in reservation["Instances"]:
                assert instance["State"]["Name"] == "running"
                assert "costguard:marked-at" not in {t["Key"] for t in instance.get("Tags", [])}


def test_an_alert_for_a_budget_that_cannot_be_read_is_reported_only(
    world: World, sink: SlackSink, tmp_path: Path
) -> None:
    event = changed(tmp_path, ACTUAL_100, "ml-research-gpu", "no-such-budget")
    with LocalStack(world, sink=sink, mode="remediate", until=FOLLOW_UP_AT) as stack:
        [result] = replay(stack, [event])
    assert result.ok, result.error
    assert [d["action"] for d in result.decisions] == ["notify"]
    assert "could not be read" in json.dumps(result.slack)


def test_a_message_naming_another_account_is_reported_only(
    world: World, sink: SlackSink, tmp_path: Path
) -> None:
    event = changed(tmp_path, ACTUAL_100, "AWS Account 123456789012", "AWS Account 210987654321")
    with LocalStack(world, sink=sink, mode="remediate", until=FOLLOW_UP_AT) as stack:
        [result] = replay(stack, [event])
    assert result.ok, result.error
    assert [d["action"] for d in result.decisions] == ["notify"]
    assert "names account 210987654321" in json.dumps(result.slack)


def test_breach_lists_what_runs_in_scope_costliest_first(stack: LocalStack) -> None:
    [result] = replay(stack, [ACTUAL_100])
    ranked = result.findings[0]["evidence"]["ranked"]
    assert [r["id"] for r in ranked] == [P4D_IDLE, P4D_BUSY, "dana-scratch", "li-finetune-lab"]
    hourly = [r["hourly_usd"] for r in ranked]
    assert hourly == sorted(hourly, reverse=True)
    assert [r["verdict"] for r in ranked] == ["idle", "busy", "idle", "busy"]
    # Out of scope (team=nlp, vision, platform...) is not listed.
    assert "i-0a1f00000000000a4" not in json.dumps(result.findings)
    text = json.dumps(result.slack)
    assert text.index("research-p4d-forgotten") < text.index("dana-scratch") < text.index("li-finetune-lab")


def test_remediate_marks_then_the_follow_up_stops_after_grace(world: World, sink: SlackSink) -> None:
    with LocalStack(world, sink=sink, mode="remediate", until=FOLLOW_UP_AT) as stack:
        [breach] = replay(stack, [ACTUAL_100])
        assert breach.ok, breach.error
        assert {(d["action"], d["resource_id"], d["dry_run"]) for d in breach.decisions[1:]} == {
            ("mark", P4D_IDLE, False),
            ("mark", "dana-scratch", False),
        }
        ec2 = clients.ec2("us-east-1")
        [[instance]] = [
            r["Instances"] for r in ec2.describe_instances(InstanceIds=[P4D_IDLE])["Reservations"]
        ]
        assert "costguard:marked-at" in {t["Key"] for t in instance.get("Tags", [])}

        [follow_up] = replay(stack, [FOLLOW_UP])  # 12:30, past the 15-minute grace period
        assert follow_up.ok, follow_up.error
        assert {(d["action"], d["resource_id"]) for d in follow_up.decisions} == {
            ("stop", P4D_IDLE),
            ("stop", "dana-scratch"),
        }
        [[instance]] = [
            r["Instances"] for r in ec2.describe_instances(InstanceIds=[P4D_IDLE])["Reservations"]
        ]
        assert instance["State"]["Name"] in ("stopping", "stopped")
        busy = ec2.describe_instances(InstanceIds=[P4D_BUSY])["Reservations"][0]["Instances"][0]
        assert busy["State"]["Name"] == "running"  # stop_idle leaves busy resources alone


def test_unexpected_wording_is_delivered_with_a_note_logged_and_counted(
    stack: LocalStack, caplog: pytest.LogCaptureFixture
) -> None:
    [result] = replay(stack, [UNREADABLE])
    assert result.ok, result.error
    [decision] = result.decisions
    assert (decision["action"], decision["reason"]) == ("notify", "budget_breach")
    [message] = result.slack
    text = json.dumps(message)
    assert "could not read this message" in text
    assert "went past what you planned this month" in text  # the message itself, as received
    message_id = load_event(UNREADABLE.name)["Records"][0]["Sns"]["MessageId"]
    [logged] = [r for r in caplog.records if r.getMessage() == "unreadable budget notification"]
    assert logged.event_id == message_id  # type: ignore[attr-defined]
    invocation = stack.invoke("BudgetsFunction", {**load_event(UNREADABLE.name)} | _redelivered_as("x-2"))
    assert "UnreadableBudgetNotifications" in invocation.output  # the metric, in EMF on stdout


def _redelivered_as(message_id: str) -> dict[str, Any]:
    event = load_event(UNREADABLE.name)
    event["Records"][0]["Sns"]["MessageId"] = message_id
    return event


def test_redelivered_notification_is_handled_once(stack: LocalStack) -> None:
    first, second = replay(stack, [ACTUAL_100, ACTUAL_100])
    assert first.ok and second.ok
    assert len(first.slack) == 1  # the breach is one message
    assert second.slack == []


def test_anomaly_over_sns_lists_running_ec2_of_its_root_cause(stack: LocalStack) -> None:
    [result] = replay(stack, [EVENTS / "cost-anomaly-sns.json"])
    assert result.ok, result.error
    [decision] = result.decisions
    assert (decision["reason"], decision["action"], decision["resource_kind"]) == (
        "cost_anomaly",
        "notify",
        "cost_anomaly",
    )
    ranked = result.findings[0]["evidence"]["ranked"]
    # Its root cause is BoxUsage:p4d.24xlarge: the p4d instances, each once (not the p5s, g5s...).
    assert [r["id"] for r in ranked] == [P4D_IDLE, P4D_BUSY, "i-0a1f00000000000d4", "i-0a1f00000000000d6"]
    assert {r["hourly_usd"] for r in ranked} == {21.958}
    assert result.findings[0]["cost_usd"] == 1054.39
    assert "BoxUsage:p4d.24xlarge" in json.dumps(result.slack)


def test_anomaly_over_eventbridge_lists_running_sagemaker(stack: LocalStack) -> None:
    [result] = replay(stack, [EVENTS / "cost-anomaly-detected.json"])
    assert result.ok, result.error
    ranked = result.findings[0]["evidence"]["ranked"]
    # USE1-Notebk:ml.g5.xlarge and USE1-Train:ml.p4d.24xlarge: those notebooks and that job, no endpoint.
    assert {(r["kind"], r["id"]) for r in ranked} == {
        ("training_job", "bert-pretrain-hung"),
        ("notebook_instance", "dana-scratch"),
        ("notebook_instance", "li-finetune-lab"),
    }


def test_sns_deliveries_route_by_topic() -> None:
    template = Template.load(ROOT / "template.yaml")
    event = load_event("budget-actual-100-ml-research.json")
    assert [r.function for r in template.route(event)] == ["BudgetsFunction"]
    event["Records"][0]["Sns"]["TopicArn"] = "arn:aws:sns:us-east-1:123456789012:someone-elses-topic"
    assert template.route(event) == []


def test_stop_all_keeps_its_marks_on_busy_resources_and_stops_them(world: World, sink: SlackSink) -> None:
    """stop_all, written by the user, with AWS Budgets reporting 153% of the budget."""
    overrides = {"COSTGUARD_BUDGET_ESCALATION": STOP_ALL}
    with LocalStack(
        spending(world, 7652.10), sink=sink, mode="remediate", overrides=overrides, until=FOLLOW_UP_AT
    ) as stack:
        [breach] = replay(stack, [ACTUAL_150])
        assert ("mark", P4D_BUSY, False) in {
            (d["action"], d["resource_id"], d["dry_run"]) for d in breach.decisions
        }
        # The GPU sweep sees the marked p4d busy: without the breach it would cancel the mark (gpu_active_again).
        [sweep] = replay(stack, [EVENTS / "schedule-gpu-sweep-1220.json"])
        assert sweep.ok, sweep.error
        assert not [d for d in sweep.decisions if d["resource_id"] == P4D_BUSY and d["action"] == "unmark"]
        [follow_up] = replay(stack, [FOLLOW_UP])
        stopped = {d["resource_id"] for d in follow_up.decisions if d["action"] == "stop"}
        assert stopped == {P4D_IDLE, P4D_BUSY, "dana-scratch", "li-finetune-lab"}
        state = clients.ec2("us-east-1").describe_instances(InstanceIds=[P4D_BUSY])["Reservations"][0]
        assert state["Instances"][0]["State"]["Name"] in ("stopping", "stopped")


def test_a_summary_that_escalates_says_what_follows_not_no_action(stack: LocalStack) -> None:
    [result] = replay(stack, [ACTUAL_100])
    summary = json.dumps(result.slack[0])
    assert "No action" not in summary
    assert "the idle resources in scope are marked, then stopped after the grace period" in summary


def test_an_unreadable_budget_says_its_scope_is_unknown(
    world: World, sink: SlackSink, tmp_path: Path
) -> None:
    event = changed(tmp_path, ACTUAL_100, "ml-research-gpu", "no-such-budget")
    with LocalStack(world, sink=sink, until=FOLLOW_UP_AT) as stack:
        [result] = replay(stack, [event])
    assert result.findings[0]["evidence"]["scope"].startswith("unknown (the budget could not be read)")
    text = json.dumps(result.slack[0])
    assert "Scope: unknown" in text and "No action" not in text


def test_a_breach_is_one_message_saying_what_became_of_each_resource(world: World, sink: SlackSink) -> None:
    with LocalStack(world, sink=sink, mode="remediate", until=FOLLOW_UP_AT) as stack:
        [breach] = replay(stack, [ACTUAL_100])
        assert [d["action"] for d in breach.decisions] == ["notify", "mark", "mark"]
        [message] = breach.slack
        text = json.dumps(message)
        assert "What this level did" in text
        assert (
            "research-p4d-forgotten (p4d.24xlarge): marked for stop, stop due at 2026-11-20 12:22 UTC" in text
        )
        assert "dana-scratch" in text.split("What this level did", 1)[1]
        # The follow-up's stops are news of their own: one message each.
        [follow_up] = replay(stack, [FOLLOW_UP])
        assert len(follow_up.slack) == len([d for d in follow_up.decisions if d["action"] == "stop"]) == 2
