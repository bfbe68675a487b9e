"""The training_job_failed detector on the sample SageMaker event."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from costguard.detect.training_jobs import detect_failed_training_job, runtime_seconds
from costguard.events.sagemaker import TrainingJobStateChange
from costguard.model import Finding, Reason, ResourceKind
from costguard.pricing import Price, bundled_price, bundled_table
from tests.conftest import load_event

EVENT_FILE = "sagemaker-training-job-failed.json"
OBSERVED = datetime(2026, 11, 20, 11, 42, 8, tzinfo=UTC)


def _raw() -> dict[str, Any]:
    return copy.deepcopy(load_event(EVENT_FILE))


def _parse(raw: dict[str, Any]) -> TrainingJobStateChange:
    return TrainingJobStateChange.model_validate(raw)


def _detect(event: TrainingJobStateChange, price: Price | None) -> list[Finding]:
    return detect_failed_training_job(
        event.detail,
        account=event.account,
        region=event.region,
        price=price,
        observed_at=OBSERVED,
        event_id=event.id,
    )


def _table_price(instance_type: str) -> float:
    return float(bundled_table()["sagemaker"][instance_type])


def test_failed_job_gives_one_finding_with_the_run_cost() -> None:
    raw = _raw()
    event = _parse(raw)
    detail = raw["detail"]
    instance_type = detail["ResourceConfig"]["InstanceType"]
    price = bundled_price(instance_type, event.region)
    assert price is not None

    findings = _detect(event, price)

    assert len(findings) == 1
    [finding] = findings
    expected = round(
        detail["BillableTimeInSeconds"]
        / 3600
        * detail["ResourceConfig"]["InstanceCount"]
        * _table_price(instance_type),
        2,
    )
    assert finding.reason is Reason.TRAINING_JOB_FAILED
    assert finding.reason.value == "training_job_failed"
    assert finding.cost_usd == expected
    assert finding.remediable is False
    assert finding.event_id == raw["id"]
    assert finding.hourly_usd == round(
        _table_price(instance_type) * detail["ResourceConfig"]["InstanceCount"], 4
    )
    assert f"${expected:,.2f}" in finding.summary
    assert finding.evidence["price_source"] == price.source


def test_failed_job_resource_carries_the_event_fields() -> None:
    raw = _raw()
    [finding] = _detect(_parse(raw), bundled_price("ml.p3.2xlarge", "us-east-1"))
    resource = finding.resource
    assert resource.kind is ResourceKind.TRAINING_JOB
    assert resource.id == raw["detail"]["TrainingJobName"]
    assert resource.arn == raw["detail"]["TrainingJobArn"]
    assert resource.account == raw["account"]
    assert resource.region == raw["region"]
    assert resource.instance_type == raw["detail"]["ResourceConfig"]["InstanceType"]
    assert resource.instance_count == raw["detail"]["ResourceConfig"]["InstanceCount"]
    assert resource.tags == raw["detail"]["Tags"]
    assert finding.evidence["failure_reason"] == raw["detail"]["FailureReason"]


@pytest.mark.parametrize("status", ["Completed", "InProgress", "Stopped", "Stopping"])
def test_a_job_that_did_not_fail_gives_no_finding(status: str) -> None:
    raw = _raw()
    raw["detail"]["TrainingJobStatus"] = status
    assert _detect(_parse(raw), bundled_price("ml.p3.2xlarge", "us-east-1")) == []


def test_unknown_price_gives_unknown_cost() -> None:
    [finding] = _detect(_parse(_raw()), None)
    assert finding.cost_usd is None
    assert finding.hourly_usd is None
    assert "unknown" in finding.summary
    assert "$" not in finding.summary
    assert finding.evidence["price_source"] == "unknown"


def test_runtime_falls_back_to_end_minus_start() -> None:
    raw = _raw()
    del raw["detail"]["BillableTimeInSeconds"]
    del raw["detail"]["TrainingTimeInSeconds"]
    raw["detail"]["TrainingEndTime"] = "2026-11-20T08:02:30Z"  # not the 18000 s the event reports
    event = _parse(raw)
    start = event.detail.TrainingStartTime
    end = event.detail.TrainingEndTime
    assert start is not None
    assert end is not None
    expected_seconds = int((end - start).total_seconds())
    assert expected_seconds == 5430

    assert runtime_seconds(event.detail) == expected_seconds
    price = bundled_price("ml.p3.2xlarge", "us-east-1")
    [finding] = _detect(event, price)
    count = raw["detail"]["ResourceConfig"]["InstanceCount"]
    assert finding.evidence["runtime_seconds"] == expected_seconds
    assert finding.evidence["billable_seconds"] == expected_seconds
    assert finding.cost_usd == round(expected_seconds / 3600 * count * _table_price("ml.p3.2xlarge"), 2)
    assert "1h 30m" in finding.summary


def test_runtime_uses_last_modified_when_the_end_is_missing() -> None:
    raw = _raw()
    for key in ("BillableTimeInSeconds", "TrainingTimeInSeconds", "TrainingEndTime"):
        del raw["detail"][key]
    event = _parse(raw)
    assert event.detail.LastModifiedTime is not None
    assert event.detail.TrainingStartTime is not None
    expected = int((event.detail.LastModifiedTime - event.detail.TrainingStartTime).total_seconds())
    assert runtime_seconds(event.detail) == expected


def test_no_times_at_all_gives_unknown_runtime_and_cost() -> None:
    raw = _raw()
    for key in ("BillableTimeInSeconds", "TrainingTimeInSeconds", "TrainingStartTime"):
        del raw["detail"][key]
    [finding] = _detect(_parse(raw), bundled_price("ml.p3.2xlarge", "us-east-1"))
    assert finding.cost_usd is None
    assert finding.evidence["runtime_seconds"] is None
    assert "an unknown time" in finding.summary


def test_missing_training_job_name_fails_validation() -> None:
    raw = _raw()
    del raw["detail"]["TrainingJobName"]
    with pytest.raises(ValidationError) as caught:
        _parse(raw)
    assert any(error["loc"][-1] == "TrainingJobName" for error in caught.value.errors())


def test_missing_name_fixture_fails_validation() -> None:
    with pytest.raises(ValidationError):
        _parse(load_event("sagemaker-training-job-failed-missing-name.json"))


def test_wrong_instance_count_type_fails_validation() -> None:
    raw = _raw()
    raw["detail"]["ResourceConfig"]["InstanceCount"] = "two"
    with pytest.raises(ValidationError) as caught:
        _parse(raw)
    assert any(error["loc"][-1] == "InstanceCount" for error in caught.value.errors())


def test_bad_types_fixture_fails_validation() -> None:
    with pytest.raises(ValidationError):
        _parse(load_event("sagemaker-training-job-failed-bad-types.json"))
