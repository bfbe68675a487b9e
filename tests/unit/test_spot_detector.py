"""The spot_interruption detector: the job, its checkpoints, the lost work and the repeat recommendation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from costguard.detect.spot import checkpoint_of, detect_spot_interruption, is_watched, job_of, workload_of
from costguard.events.ec2 import SpotInterruptionWarning
from costguard.model import Accelerators, Ec2Instance, Finding, Reason
from costguard.pricing import bundled_price, bundled_table
from tests.conftest import load_event

EVENT = "ec2-spot-interruption-warning.json"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
LAUNCHED = datetime(2026, 11, 20, 7, 30, tzinfo=UTC)
GPU = Accelerators(kind="nvidia_gpu", count=4, model="A10G")
JOB = "vision-detr-train-2026-11-20-07-30-00"


def _instance(tags: dict[str, str] | None = None, **changes: Any) -> Ec2Instance:
    values: dict[str, Any] = {
        "id": "i-0a1f00000000000b1",
        "type": "g5.12xlarge",
        "state": "running",
        "account": "123456789012",
        "region": "us-east-1",
        "launch_time": LAUNCHED,
        "tags": {"Name": "vision-g5-spot-train", "team": "vision", "costguard:job": JOB}
        if tags is None
        else tags,
        "lifecycle": "spot",
        "accelerators": GPU,
    }
    return Ec2Instance(**(values | changes))


def _detect(instance: Ec2Instance | None, interruptions: int = 1, threshold: int = 3) -> Finding:
    event = SpotInterruptionWarning.model_validate(load_event(EVENT))
    [finding] = detect_spot_interruption(
        instance_id=event.detail.instance_id,
        action=event.detail.instance_action,
        instance=instance,
        account=event.account,
        region=event.region,
        price=bundled_price(instance.type, event.region) if instance else None,
        interruptions=interruptions,
        threshold=threshold,
        window=timedelta(hours=24),
        observed_at=event.time,
        now=NOW,
        event_id=event.id,
    )
    return finding


def test_names_the_job_and_prices_the_work_since_launch() -> None:
    finding = _detect(_instance())
    price = bundled_table()["ec2"]["g5.12xlarge"]
    expected = round((NOW - LAUNCHED).total_seconds() / 3600 * price, 2)
    assert finding.reason is Reason.SPOT_INTERRUPTION
    assert finding.cost_usd == expected
    assert finding.hourly_usd == price
    assert JOB in finding.summary
    assert "does not checkpoint" in finding.summary
    assert "terminated" in finding.summary
    assert finding.evidence["checkpoint"] == "unknown"
    assert finding.evidence["workload"] == "vision-detr-train"
    assert finding.evidence["recommendation"] is None
    assert finding.remediable is False


def test_past_the_threshold_it_recommends_on_demand_or_a_capacity_block() -> None:
    finding = _detect(_instance(), interruptions=3)
    assert "on-demand" in finding.summary and "Capacity Block" in finding.summary
    assert "interrupted 3 times in 24h" in finding.summary
    assert finding.evidence["recommendation"]


def test_checkpoint_with_a_time_prices_only_the_work_since_it() -> None:
    at = NOW - timedelta(minutes=20)
    tags = {
        "costguard:job": JOB,
        "costguard:checkpoint": "s3://ckpt/detr/",
        "costguard:checkpoint-at": at.isoformat(),
    }
    finding = _detect(_instance(tags))
    price = bundled_table()["ec2"]["g5.12xlarge"]
    assert finding.cost_usd == round(20 / 60 * price, 2)
    assert finding.evidence["checkpoint"] == "yes"
    assert finding.evidence["checkpoint_uri"] == "s3://ckpt/detr/"


def test_checkpoint_without_a_time_leaves_the_lost_work_unknown() -> None:
    finding = _detect(_instance({"costguard:job": JOB, "costguard:checkpoint": "true"}))
    assert finding.cost_usd is None
    assert finding.evidence["lost_work_seconds"] is None
    assert "when it last did is unknown" in finding.summary


def test_a_gone_instance_is_reported_with_unknowns() -> None:
    finding = _detect(None)
    assert finding.cost_usd is None and finding.hourly_usd is None
    assert "gone already" in finding.summary
    assert finding.evidence["workload"] == "i-0a1f00000000000b1"


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        ({"costguard:checkpoint": "s3://b/k"}, "yes"),
        ({"costguard:checkpoint": "TRUE"}, "yes"),
        ({"costguard:checkpoint": "false"}, "no"),
        ({}, "unknown"),
    ],
)
def test_checkpoint_states(tags: dict[str, str], expected: str) -> None:
    assert checkpoint_of(tags).state == expected


def test_job_and_workload_tags() -> None:
    assert job_of({"Name": "n", "sagemaker:training-job-name": "llama-ft-3"}) == (
        "sagemaker:training-job-name",
        "llama-ft-3",
    )
    assert workload_of("i-1", {"aws:batch:job-id": "x", "costguard:family": "fam"}) == "fam"
    assert workload_of("i-1", {"Name": "llama-ft-nightly-2026-11-20-06-30-00"}) == "llama-ft-nightly"
    assert workload_of("i-1", {}) == "i-1"


def test_cpu_instance_without_a_job_is_not_watched() -> None:
    assert not is_watched(_instance({}, accelerators=None))
    assert is_watched(_instance({"Name": "etl"}, accelerators=None))
    assert is_watched(None)


def test_placeholder_action_fails_validation() -> None:
    event = load_event(EVENT)
    event["detail"]["instance-action"] = "action"  # the AWS docs sample's placeholder
    with pytest.raises(ValidationError, match="instance-action"):
        SpotInterruptionWarning.model_validate(event)
