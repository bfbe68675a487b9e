"""Detectors for SageMaker training jobs."""

from __future__ import annotations

from datetime import datetime

from costguard.detect.job_families import job_family
from costguard.detect.sagemaker import hourly_usd
from costguard.events.sagemaker import TrainingJobDetail
from costguard.model import Finding, Reason, Resource, ResourceKind
from costguard.pricing import Price


def training_job_resource(detail: TrainingJobDetail, *, account: str, region: str) -> Resource:
    config = detail.ResourceConfig
    return Resource(
        kind=ResourceKind.TRAINING_JOB,
        id=detail.TrainingJobName,
        name=detail.TrainingJobName,
        arn=detail.TrainingJobArn,
        account=account,
        region=region,
        instance_type=config.InstanceType if config else None,
        instance_count=config.InstanceCount if config else 1,
        tags=detail.Tags,
        started=detail.CreationTime,
    )


def runtime_seconds(detail: TrainingJobDetail) -> int | None:
    """How long the job ran on its instances (None when the event does not say)."""
    if detail.TrainingTimeInSeconds is not None:
        return detail.TrainingTimeInSeconds
    end = detail.TrainingEndTime or detail.LastModifiedTime
    if detail.TrainingStartTime and end and end >= detail.TrainingStartTime:
        return int((end - detail.TrainingStartTime).total_seconds())
    return None


def billable_seconds(detail: TrainingJobDetail) -> int | None:
    """Billed time per instance: AWS's own figure when present (it already accounts for spot)."""
    if detail.BillableTimeInSeconds is not None:
        return detail.BillableTimeInSeconds
    return runtime_seconds(detail)


def run_cost_usd(detail: TrainingJobDetail, price: Price | None) -> float | None:
    """Billable time x instance count x price; None when either is unknown."""
    seconds = billable_seconds(detail)
    if price is None or seconds is None:
        return None
    count = detail.ResourceConfig.InstanceCount if detail.ResourceConfig else 1
    return round(seconds / 3600 * count * price.usd_per_hour, 2)


def detect_failed_training_job(
    detail: TrainingJobDetail,
    *,
    account: str,
    region: str,
    price: Price | None,
    observed_at: datetime,
    event_id: str | None = None,
    unpriced: str | None = None,
) -> list[Finding]:
    """A Failed job gives one ``training_job_failed`` finding with what the failed run cost. ``unpriced``: why
    the price book found no price (which source failed, and how), told in place of the cost."""
    if detail.TrainingJobStatus != "Failed":
        return []
    resource = training_job_resource(detail, account=account, region=region)
    cost = run_cost_usd(detail, price)
    ran = runtime_seconds(detail)
    reason = (detail.FailureReason or "no failure reason given").strip()
    spent = (
        f"${cost:,.2f}" if cost is not None else f"an unknown amount ({unpriced or 'no price for this type'})"
    )
    return [
        Finding(
            reason=Reason.TRAINING_JOB_FAILED,
            resource=resource,
            # The failures of one workload are one conversation, with its failure loop when there is one.
            thread=(
                f"{account}/{region}/{ResourceKind.JOB_FAMILY}/{job_family(detail.TrainingJobName, resource.tags).key}"
            ),
            summary=f"Training job {detail.TrainingJobName} failed after {_duration(ran)} and cost {spent}.",
            observed_at=observed_at,
            event_id=event_id,
            hourly_usd=hourly_usd(price, resource.instance_count),
            cost_usd=cost,
            remediable=False,
            evidence={
                "failure_reason": reason[:1000],
                "runtime_seconds": ran,
                "billable_seconds": billable_seconds(detail),
                "instance_type": resource.instance_type,
                "instance_count": resource.instance_count,
                "price_usd_per_hour": price.usd_per_hour if price else None,
                "price_source": price.source if price else "unknown",
                **({} if price or not unpriced else {"price_unknown": unpriced}),
                "managed_spot": detail.EnableManagedSpotTraining,
            },
        )
    ]


def _duration(seconds: int | None) -> str:
    if seconds is None:
        return "an unknown time"
    hours, rest = divmod(seconds, 3600)
    minutes = rest // 60
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {seconds % 60:02d}s"
