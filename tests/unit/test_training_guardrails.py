"""Training-job guardrails, pure: families, failure loops, ceilings, launch hygiene and the digest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard.detect.job_families import Failure, failure_loop, family_of
from costguard.detect.training_guardrails import (
    SPOT_SAVING_ASSUMPTION,
    Ceiling,
    ceiling_of,
    completed_summary,
    cost_findings,
    digest_finding,
    hygiene_findings,
    loop_finding,
)
from costguard.events.sagemaker import TrainingJobStateChange
from costguard.model import Reason, ResourceKind
from costguard.pricing import Price, bundled_table
from tests.conftest import load_event

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
P3 = bundled_table()["sagemaker"]["ml.p3.2xlarge"]
G5 = bundled_table()["sagemaker"]["ml.g5.xlarge"]


def price(usd: float) -> Price:
    return Price(usd_per_hour=usd, source="bundled")


def event(name: str) -> TrainingJobStateChange:
    return TrainingJobStateChange.model_validate(load_event(name))


@pytest.mark.parametrize(
    ("name", "tags", "family"),
    [
        ("llama-ft-nightly-2026-11-20-06-30-00", {}, "llama-ft-nightly"),
        ("llama-ft-nightly-2026-11-20-06-30-00-123", {}, "llama-ft-nightly"),
        ("llama-ft-nightly-1732000000", {}, "llama-ft-nightly"),
        ("llama-ft-nightly-3", {}, "llama-ft-nightly"),
        ("llama-ft-nightly-retry-2", {}, "llama-ft-nightly"),
        ("llama-ft-nightly-20261120-063000", {}, "llama-ft-nightly"),
        ("llama-ft-nightly-2026-11-20", {}, "llama-ft-nightly"),
        ("bert-base-ablation-9f3c2a1bde", {}, "bert-base-ablation"),
        ("anything-1", {"costguard:family": "custom"}, "custom"),
        ("anything-1", {"sagemaker:pipeline-name": "nightly"}, "pipeline:nightly"),
        ("resnet", {}, "resnet"),
    ],
)
def test_family_of(name: str, tags: dict[str, str], family: str) -> None:
    assert family_of(name, tags) == family


def test_failure_loop_counts_each_job_once_inside_the_window() -> None:
    window = timedelta(hours=6)
    failures = [
        Failure("a-1", NOW - timedelta(hours=7), "OOM", 5.0),  # outside the window
        Failure("a-2", NOW - timedelta(hours=5), "CUDA out of memory\ntrace", 10.0),
        Failure("a-2", NOW - timedelta(hours=5), "CUDA out of memory\ntrace", 10.0),  # delivered twice
        Failure("a-3", NOW - timedelta(hours=2), "CUDA out of memory", 11.5),
    ]
    assert failure_loop("a", failures, NOW, threshold=3, window=window) is None
    failures.append(Failure("a-4", NOW - timedelta(hours=1), "NCCL error", 2.25))
    loop = failure_loop("a", failures, NOW, threshold=3, window=window)
    assert loop is not None
    assert [f.job_name for f in loop.failures] == ["a-2", "a-3", "a-4"]
    assert loop.total_cost_usd == round(10.0 + 11.5 + 2.25, 2)
    assert loop.reasons() == [("CUDA out of memory", 2), ("NCCL error", 1)]


def test_loop_finding_is_keyed_by_family_with_the_latest_job() -> None:
    latest = event("sagemaker-training-job-failed.json")
    failures = [Failure(f"llama-ft-nightly-{i}", NOW - timedelta(hours=i), "OOM", 1.5) for i in (1, 2, 3)]
    loop = failure_loop("llama-ft-nightly", failures, NOW, threshold=3, window=timedelta(hours=6))
    assert loop is not None
    finding = loop_finding(
        loop,
        latest.detail,
        account="123456789012",
        region="us-east-1",
        window=timedelta(hours=6),
        observed_at=NOW,
    )
    assert finding.reason is Reason.JOB_FAILURE_LOOP
    assert finding.resource.kind is ResourceKind.JOB_FAMILY
    assert finding.resource.id == "llama-ft-nightly"
    assert latest.detail.TrainingJobName in (finding.resource.name or "")
    assert finding.cost_usd == 4.5 and finding.evidence["total_cost_usd"] == 4.5
    assert finding.evidence["reasons"] == ["3 x OOM"]
    assert not finding.remediable


def test_ceiling_tags_win_and_bad_values_are_noted() -> None:
    assert ceiling_of({"costguard:max-usd": "60"}, default_usd=100, default_hours=0) == Ceiling(
        60.0, None, "tag"
    )
    bad = ceiling_of(
        {"costguard:max-usd": "lots", "costguard:max-hours": "-3"}, default_usd=100, default_hours=8
    )
    assert (bad.max_usd, bad.max_hours) == (100, 8)
    assert len(bad.notes) == 2 and "lots" in bad.notes[0]
    assert not ceiling_of({}, default_usd=0, default_hours=0).any


def over_ceiling(now: datetime, ceiling: Ceiling, warning_share: float = 0.8) -> list:  # type: ignore[type-arg]
    detail = event("sagemaker-training-job-inprogress-over-ceiling.json").detail
    return cost_findings(
        detail,
        account="123456789012",
        region="us-east-1",
        price=price(P3),
        ceiling=ceiling,
        warning_share=warning_share,
        now=now,
        observed_at=now,
    )


def test_cost_ceiling_warning_and_nothing_below_the_share() -> None:
    raw = load_event("sagemaker-training-job-inprogress-over-ceiling.json")["detail"]
    count = raw["ResourceConfig"]["InstanceCount"]
    started = datetime.fromtimestamp(int(raw["TrainingStartTime"]) / 1000, UTC)
    max_usd = float(raw["Tags"]["costguard:max-usd"])
    hourly = P3 * count
    hours_to = {share: max_usd * share / hourly for share in (0.8, 1.0)}

    at_ceiling = started + timedelta(hours=hours_to[1.0], minutes=1)
    [over] = over_ceiling(at_ceiling, Ceiling(max_usd, None, "tag"))
    elapsed = (at_ceiling - started).total_seconds() / 3600
    assert over.reason is Reason.JOB_COST_CEILING and over.remediable
    assert over.cost_usd == round(elapsed * count * P3, 2)

    warning_at = started + timedelta(hours=hours_to[0.8], minutes=1)
    [warning] = over_ceiling(warning_at, Ceiling(max_usd, None, "tag"))
    assert warning.reason is Reason.JOB_COST_WARNING and not warning.remediable

    just_under = started + timedelta(hours=hours_to[0.8]) - timedelta(minutes=1)
    assert over_ceiling(just_under, Ceiling(max_usd, None, "tag")) == []

    # A time ceiling alone: 10 hours against 12, past 80%.
    [by_time] = over_ceiling(started + timedelta(hours=10), Ceiling(None, 12.0))
    assert by_time.reason is Reason.JOB_COST_WARNING
    assert by_time.evidence["share_of_ceiling_percent"] == round(10 / 12 * 100, 1)


def test_launch_hygiene() -> None:
    spot = event("sagemaker-training-job-inprogress-spot-no-checkpoint.json").detail
    found = hygiene_findings(
        spot,
        account="1",
        region="us-east-1",
        price=price(G5),
        max_runtime_hours=72,
        spot_recommend_hours=4,
        observed_at=NOW,
    )
    assert [f.reason for f in found] == [Reason.JOB_NO_MAX_RUNTIME, Reason.SPOT_WITHOUT_CHECKPOINT]
    assert all(not f.remediable for f in found)

    ondemand = event("sagemaker-training-job-inprogress-over-ceiling.json")
    raw = load_event("sagemaker-training-job-inprogress-over-ceiling.json")["detail"]
    found = hygiene_findings(
        ondemand.detail,
        account="1",
        region="us-east-1",
        price=price(P3),
        max_runtime_hours=72,
        spot_recommend_hours=4,
        observed_at=NOW,
    )
    [advice] = found
    assert advice.reason is Reason.SPOT_RECOMMENDED
    hours = raw["StoppingCondition"]["MaxRuntimeInSeconds"] / 3600
    assert advice.evidence["estimated_saving_usd"] == round(
        SPOT_SAVING_ASSUMPTION * P3 * raw["ResourceConfig"]["InstanceCount"] * hours, 2
    )
    # Above the runtime limit: reported as having no sane max runtime too.
    found = hygiene_findings(
        ondemand.detail,
        account="1",
        region="us-east-1",
        price=price(P3),
        max_runtime_hours=hours - 1,
        spot_recommend_hours=hours,
        observed_at=NOW,
    )
    assert [f.reason for f in found] == [Reason.JOB_NO_MAX_RUNTIME]


def test_completed_summary_and_digest() -> None:
    raw = load_event("sagemaker-training-job-completed-spot.json")["detail"]
    summary = completed_summary(event("sagemaker-training-job-completed-spot.json").detail, price(G5), NOW)
    count, trained, billed = (
        raw["ResourceConfig"]["InstanceCount"],
        raw["TrainingTimeInSeconds"],
        raw["BillableTimeInSeconds"],
    )
    assert summary.cost_usd == round(billed / 3600 * count * G5, 2)
    assert summary.spot_saving_share == round(1 - billed / trained, 4)
    assert summary.spot_saving_usd == round((trained - billed) / 3600 * count * G5, 2)

    stopped_raw = load_event("sagemaker-training-job-stopped.json")["detail"]
    stopped = completed_summary(event("sagemaker-training-job-stopped.json").detail, price(G5), NOW)
    assert stopped.spot_saving_share is None
    digest = digest_finding(NOW.date(), [stopped, summary], account="1", region="us-east-1", observed_at=NOW)
    assert digest is not None and digest.reason is Reason.TRAINING_DIGEST
    stopped_cost = round(stopped_raw["BillableTimeInSeconds"] / 3600 * G5, 2)
    assert digest.cost_usd == round(summary.cost_usd + stopped_cost, 2)  # type: ignore[operator]
    assert digest.evidence["spot_saving_usd"] == summary.spot_saving_usd
    assert digest.evidence["runs"][0].startswith(summary.job)  # costliest first
    assert digest_finding(NOW.date(), [], account="1", region="us-east-1", observed_at=NOW) is None
