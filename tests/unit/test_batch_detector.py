"""The batch_retry_loop detectors (per job, per queue) on the sample Batch events."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from costguard.detect.batch import (
    detect_batch_retry_loop,
    detect_failing_queue,
    failed_attempts,
    queue_key,
    queue_member,
)
from costguard.events.batch import BatchJobStateChange
from costguard.model import Reason, ResourceKind
from costguard.pricing import Price, bundled_price, bundled_table
from costguard.windows import MemoryWindowCounter
from tests.conftest import load_event

FAILED = "batch-job-failed-attempts.json"
NO_TYPE = "batch-job-failed-no-instance-type.json"
SINGLE = "batch-job-failed-single-attempt.json"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def _raw(name: str = FAILED) -> dict[str, Any]:
    return copy.deepcopy(load_event(name))


def _parse(raw: dict[str, Any]) -> BatchJobStateChange:
    return BatchJobStateChange.model_validate(raw)


def _price(event: BatchJobStateChange) -> Price | None:
    itype = event.detail.container.instanceType if event.detail.container else None
    return bundled_price(itype, event.region) if itype else None


def _detect(event: BatchJobStateChange, threshold: int = 2) -> list[Any]:
    return detect_batch_retry_loop(
        event.detail,
        account=event.account,
        region=event.region,
        price=_price(event),
        threshold=threshold,
        observed_at=event.time,
        event_id=event.id,
    )


def _expected_cost(raw: dict[str, Any]) -> float:
    """Failed attempts' duration (epoch millis in the event) x the bundled on-demand price."""
    price = bundled_table()["ec2"][raw["detail"]["container"]["instanceType"]]
    millis = sum(a["stoppedAt"] - a["startedAt"] for a in raw["detail"]["attempts"])
    return round(millis / 1000 / 3600 * price, 2)


def test_failed_job_with_three_failed_attempts_gives_one_finding_with_their_cost() -> None:
    raw = _raw()
    [finding] = _detect(_parse(raw))
    assert finding.reason is Reason.BATCH_RETRY_LOOP
    assert finding.resource.kind is ResourceKind.BATCH_JOB
    assert finding.resource.id == raw["detail"]["jobId"]
    assert finding.resource.tags == {"team": "ml-research", "project": "detr"}  # resourceArn is not a tag
    assert finding.cost_usd == _expected_cost(raw)
    assert finding.hourly_usd == bundled_table()["ec2"]["g5.2xlarge"]
    assert len(finding.evidence["failed_attempts"]) == 3
    assert all(
        "exit 137" in line and "OutOfMemoryError" in line for line in finding.evidence["failed_attempts"]
    )
    assert "Every attempt exited 137" in finding.summary
    assert f"${_expected_cost(raw):,.2f}" in finding.summary
    assert finding.remediable is False


def test_each_attempt_is_priced_from_its_own_duration() -> None:
    raw = _raw()
    event = _parse(raw)
    price = _price(event)
    assert price is not None
    attempts = failed_attempts(event.detail, price)
    expected = [
        round((a["stoppedAt"] - a["startedAt"]) / 1000 / 3600 * price.usd_per_hour, 2)
        for a in raw["detail"]["attempts"]
    ]
    assert [a.cost_usd for a in attempts] == expected
    assert [a.exit_code for a in attempts] == [137, 137, 137]


def test_no_instance_type_means_unknown_cost_never_zero() -> None:
    [finding] = _detect(_parse(_raw(NO_TYPE)))
    assert finding.cost_usd is None
    assert finding.hourly_usd is None
    assert "unknown amount" in finding.summary
    assert all("cost unknown" in line for line in finding.evidence["failed_attempts"])


def test_below_threshold_gives_nothing() -> None:
    assert _detect(_parse(_raw(SINGLE))) == []
    assert _detect(_parse(_raw(NO_TYPE)), threshold=3) == []


def test_a_succeeded_last_attempt_is_not_counted() -> None:
    raw = _raw()
    raw["detail"]["status"] = "SUCCEEDED"
    raw["detail"]["attempts"][-1]["container"]["exitCode"] = 0
    event = _parse(raw)
    assert len(failed_attempts(event.detail, _price(event))) == 2


def test_a_retrying_job_says_how_many_attempts_are_left() -> None:
    raw = _raw()
    raw["detail"]["status"] = "RUNNABLE"
    raw["detail"]["attempts"] = raw["detail"]["attempts"][:2]
    raw["detail"]["retryStrategy"]["attempts"] = 5
    [finding] = _detect(_parse(raw))
    assert "is being retried (status RUNNABLE, 3 attempt(s) left)" in finding.summary


def test_attempt_without_exit_code_counts_as_failed_with_its_reason() -> None:
    raw = _raw()
    for attempt in raw["detail"]["attempts"]:
        del attempt["container"]["exitCode"]
        attempt["container"]["reason"] = "Host EC2 (instance i-0abc) terminated."
    [finding] = _detect(_parse(raw))
    assert all("no exit code" in line for line in finding.evidence["failed_attempts"])
    assert "Every attempt exited" not in finding.summary


def test_missing_queue_fails_validation_naming_the_field() -> None:
    raw = _raw()
    del raw["detail"]["jobQueue"]
    with pytest.raises(ValidationError, match="jobQueue"):
        _parse(raw)


def test_queue_alerts_once_when_the_third_distinct_job_fails() -> None:
    counter = MemoryWindowCounter()
    window = timedelta(hours=6)
    found = []
    for name in (FAILED, FAILED, NO_TYPE, SINGLE):  # the first job delivered twice counts once
        event = _parse(_raw(name))
        detail = event.detail
        key = queue_key(detail, account=event.account, region=event.region)
        counted = counter.add(key, queue_member(detail), NOW, window)
        found += detect_failing_queue(
            detail,
            counted,
            account=event.account,
            region=event.region,
            threshold=3,
            window=window,
            observed_at=event.time,
        )
    [finding] = found
    assert key == "batchq#123456789012#us-east-1#gpu-training"
    assert finding.resource.kind is ResourceKind.BATCH_QUEUE
    assert finding.resource.id == "gpu-training"
    assert len(finding.evidence["failed_jobs"]) == 3
    assert "3 failed jobs" in finding.summary


def test_queue_window_expires() -> None:
    counter = MemoryWindowCounter()
    window = timedelta(hours=6)
    assert counter.add("k", "a", NOW, window).count == 1
    assert counter.add("k", "b", NOW + timedelta(hours=5), window).count == 2
    fresh = counter.add("k", "c", NOW + timedelta(hours=6), window)
    assert (fresh.count, fresh.started_at) == (1, NOW + timedelta(hours=6))
