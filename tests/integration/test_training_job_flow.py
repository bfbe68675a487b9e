"""The first alert end to end: event -> routing -> handler -> queue -> notifier -> Slack sink."""

from __future__ import annotations

import json
from pathlib import Path

from costguard.aws import clients
from costguard.local.replay import replay
from costguard.local.stack import LocalStack
from costguard.pricing import bundled_table
from tests.conftest import EVENTS, FIXTURES, load_event

FAILED = EVENTS / "sagemaker-training-job-failed.json"


def expected_cost() -> float:
    detail = load_event(FAILED.name)["detail"]
    price = bundled_table()["sagemaker"][detail["ResourceConfig"]["InstanceType"]]
    return round(
        detail["BillableTimeInSeconds"] / 3600 * detail["ResourceConfig"]["InstanceCount"] * price, 2
    )


def test_failed_job_gives_one_decision_with_the_run_cost(stack: LocalStack) -> None:
    [result] = replay(stack, [FAILED])
    assert result.ok, result.error
    assert result.function == "TrainingJobsFunction"
    [decision] = result.decisions
    assert decision["reason"] == "training_job_failed"
    assert decision["action"] == "notify"
    assert decision["dry_run"] is True
    assert decision["cost_usd"] == expected_cost()
    [message] = result.slack
    assert f"${expected_cost():,.2f}" in json.dumps(message)
    assert "CUDA out of memory" in json.dumps(message)


def test_same_event_twice_gives_one_slack_message(stack: LocalStack) -> None:
    results = replay(stack, [FAILED, FAILED])
    assert all(r.ok for r in results)
    assert len(stack.sink.messages) == 1
    assert [len(r.slack) for r in results] == [1, 0]


def test_message_goes_to_the_team_webhook(world, sink, sleeps) -> None:  # type: ignore[no-untyped-def]
    with LocalStack(world, sink=sink, routes={"ml-research": sink.url_for("ml-research")}) as stack:
        [result] = replay(stack, [FAILED])
    assert [m["channel"] for m in result.slack] == ["ml-research"]


def test_repeat_of_same_resource_and_reason_is_suppressed(stack: LocalStack, tmp_path: Path) -> None:
    event = load_event(FAILED.name)
    event["id"] = "another-delivery-id"  # a second, distinct event about the same job
    second = tmp_path / "again.json"
    second.write_text(json.dumps(event))
    results = replay(stack, [FAILED, second])
    assert [len(r.decisions) for r in results] == [1, 1]
    assert len(stack.sink.messages) == 1


def test_unmatched_event_says_so(stack: LocalStack, tmp_path: Path) -> None:
    event = load_event(FAILED.name)
    event["detail"]["TrainingJobStatus"] = "Stopping"  # InProgress, Completed, Failed and Stopped are routed
    path = tmp_path / "stopping.json"
    path.write_text(json.dumps(event))
    [result] = replay(stack, [path])
    assert not result.ok
    assert "no rule in template.yaml matches" in (result.error or "")


def test_malformed_event_is_rejected_logged_and_kept(stack: LocalStack, caplog) -> None:  # type: ignore[no-untyped-def]
    path = FIXTURES / "sagemaker-training-job-failed-bad-types.json"
    [result] = replay(stack, [path])
    assert not result.ok
    assert "InstanceCount" in (result.error or "")
    kept = clients.sqs().receive_message(QueueUrl=stack.urls["FailedEventsQueue"], MaxNumberOfMessages=10)
    [message] = kept["Messages"]
    body = json.loads(message["Body"])
    assert body["event_id"] == load_event(path.name)["id"]
    assert body["event"] == load_event(path.name)
    assert stack.sink.messages == []
    [logged] = [r for r in caplog.records if r.getMessage() == "rejected malformed event"]
    assert logged.event_id == load_event(path.name)["id"]  # type: ignore[attr-defined]


def test_bad_json_file_is_a_clear_error(stack: LocalStack) -> None:
    [result] = replay(stack, [FIXTURES / "not-json.json"])
    assert not result.ok
    assert "bad JSON at line" in (result.error or "")
