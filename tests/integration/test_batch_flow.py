"""batch_retry_loop end to end: Batch events -> BatchJobsFunction -> queue -> notifier -> Slack sink."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from costguard.aws import clients
from costguard.local.replay import replay
from costguard.local.stack import TABLE, LocalStack
from costguard.pricing import bundled_table
from tests.conftest import EVENTS, FIXTURES, load_event

FAILED = EVENTS / "batch-job-failed-attempts.json"
NO_TYPE = EVENTS / "batch-job-failed-no-instance-type.json"
SINGLE = EVENTS / "batch-job-failed-single-attempt.json"
BURST = [FAILED, NO_TYPE, SINGLE]


def attempts_cost(name: str) -> float:
    detail = load_event(name)["detail"]
    price = bundled_table()["ec2"][detail["container"]["instanceType"]]
    millis = sum(a["stoppedAt"] - a["startedAt"] for a in detail["attempts"])
    return round(millis / 1000 / 3600 * price, 2)


def another_job(tmp_path: Path, source: Path, suffix: str) -> Path:
    event: dict[str, Any] = load_event(source.name)
    event["id"] = f"{event['id'][:-4]}{suffix}"
    event["detail"]["jobId"] = f"{event['detail']['jobId'][:-4]}{suffix}"
    event["detail"]["jobName"] += f"-{suffix}"
    path = tmp_path / f"{suffix}.json"
    path.write_text(json.dumps(event))
    return path


def test_failing_job_gives_one_alert_with_the_attempt_cost(stack: LocalStack) -> None:
    [result] = replay(stack, [FAILED])
    assert result.ok, result.error
    assert result.function == "BatchJobsFunction"
    [decision] = result.decisions
    assert (decision["reason"], decision["action"], decision["dry_run"]) == (
        "batch_retry_loop",
        "notify",
        True,
    )
    assert decision["resource_kind"] == "batch_job"
    assert decision["cost_usd"] == attempts_cost(FAILED.name)
    [message] = result.slack
    text = json.dumps(message)
    assert f"${attempts_cost(FAILED.name):,.2f}" in text
    assert text.count("exit 137") == 3
    assert "Batch job failing in a retry loop" in text


def test_burst_gives_one_alert_per_failing_job_and_one_for_the_queue(stack: LocalStack) -> None:
    results = replay(stack, BURST)
    assert all(r.ok for r in results), [r.error for r in results]
    decisions = [d for r in results for d in r.decisions]
    jobs = [d for d in decisions if d["resource_kind"] == "batch_job"]
    queues = [d for d in decisions if d["resource_kind"] == "batch_queue"]
    assert [d["resource_id"] for d in jobs] == [
        load_event(FAILED.name)["detail"]["jobId"],
        load_event(NO_TYPE.name)["detail"]["jobId"],
    ]
    assert [d["cost_usd"] for d in jobs] == [attempts_cost(FAILED.name), None]  # no instance type: unknown
    [queue] = queues
    assert queue["resource_id"] == "gpu-training"
    assert queue["reason"] == "batch_retry_loop"
    assert len(stack.sink.messages) == 3
    assert "3 failed jobs" in json.dumps(stack.sink.messages[-1])
    item = clients.client("dynamodb").get_item(
        TableName=TABLE, Key={"id": {"S": "batchq#123456789012#us-east-1#gpu-training"}}
    )["Item"]
    assert len(item["members"]["SS"]) == 3
    assert int(item["expiration"]["N"]) - int(item["started"]["N"]) == 6 * 3600


def test_more_failures_in_the_window_do_not_alert_the_queue_again(stack: LocalStack, tmp_path: Path) -> None:
    fourth = another_job(tmp_path, SINGLE, "f004")
    fifth = another_job(tmp_path, SINGLE, "f005")
    results = replay(stack, [*BURST, fourth, fifth])
    queues = [d for r in results for d in r.decisions if d["resource_kind"] == "batch_queue"]
    assert len(queues) == 1


def test_redelivered_event_is_one_message_and_counts_its_job_once(stack: LocalStack) -> None:
    results = replay(stack, [FAILED, FAILED, NO_TYPE])
    assert all(r.ok for r in results)
    assert [len(r.slack) for r in results] == [1, 0, 1]  # two jobs: the queue is not at 3 yet
    assert not any(d["resource_kind"] == "batch_queue" for r in results for d in r.decisions)


def test_message_goes_to_the_job_team_webhook(world, sink, sleeps) -> None:  # type: ignore[no-untyped-def]
    with LocalStack(world, sink=sink, routes={"ml-research": sink.url_for("ml-research")}) as stack:
        [result] = replay(stack, [FAILED])
    assert [m["channel"] for m in result.slack] == ["ml-research"]


def test_malformed_event_is_rejected_logged_and_kept(stack: LocalStack, caplog) -> None:  # type: ignore[no-untyped-def]
    path = FIXTURES / "batch-job-failed-bad-attempt-time.json"
    [result] = replay(stack, [path])
    assert not result.ok
    assert "startedAt" in (result.error or "")
    kept = clients.sqs().receive_message(QueueUrl=stack.urls["FailedEventsQueue"], MaxNumberOfMessages=10)
    [message] = kept["Messages"]
    body = json.loads(message["Body"])
    assert body["function"] == "batch_jobs"
    assert body["event"] == load_event(path.name)
    assert stack.sink.messages == []
    [logged] = [r for r in caplog.records if r.getMessage() == "rejected malformed event"]
    assert logged.event_id == load_event(path.name)["id"]  # type: ignore[attr-defined]
