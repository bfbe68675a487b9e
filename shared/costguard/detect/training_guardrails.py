"""Training-job guardrails. Pure: failure loops, cost ceilings, launch hygiene and the daily digest.

Every figure is billable time x instance count x on-demand price (``Price``); an unknown price gives an
unknown figure, never zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from costguard.detect.job_families import FailureLoop
from costguard.detect.training_jobs import (
    billable_seconds,
    run_cost_usd,
    runtime_seconds,
    training_job_resource,
)
from costguard.events.sagemaker import TrainingJobDetail
from costguard.model import Finding, Reason, Resource, ResourceKind
from costguard.pricing import Price

MAX_USD_TAG = "costguard:max-usd"
MAX_HOURS_TAG = "costguard:max-hours"
# An assumption, not a quote: managed spot training commonly saves 60-90% against on-demand; costguard
# estimates with the low end. The real saving shows afterwards as 1 - billable/training time.
SPOT_SAVING_ASSUMPTION = 0.6


# --- failure loops -------------------------------------------------------------------------------


def loop_finding(
    loop: FailureLoop,
    latest: TrainingJobDetail,
    *,
    account: str,
    region: str,
    window: timedelta,
    observed_at: datetime,
    event_id: str | None = None,
) -> Finding:
    """One finding per family: its key is the family, so repeats of one loop are one alert."""
    config = latest.ResourceConfig
    resource = Resource(
        kind=ResourceKind.JOB_FAMILY,
        id=loop.family,
        name=f"{loop.family} (latest: {latest.TrainingJobName})",
        arn=latest.TrainingJobArn,
        account=account,
        region=region,
        instance_type=config.InstanceType if config else None,
        instance_count=config.InstanceCount if config else 1,
        tags=latest.Tags,
    )
    total = loop.total_cost_usd
    spent = f"${total:,.2f}" if total is not None else "an unknown amount (a price is missing)"
    hours = int(window.total_seconds() // 3600)
    return Finding(
        reason=Reason.JOB_FAILURE_LOOP,
        resource=resource,
        summary=(
            f"Training job family {loop.family} failed {len(loop.failures)} times in {hours}h, "
            f"costing {spent}. Fix the cause before it is launched again."
        ),
        observed_at=observed_at,
        event_id=event_id,
        cost_usd=total,
        remediable=False,
        evidence={
            "family": loop.family,
            "failures": len(loop.failures),
            "window_hours": hours,
            "reasons": [f"{count} x {reason}" for reason, count in loop.reasons()],
            "jobs": [
                f"{f.job_name} at {f.failed_at:%Y-%m-%d %H:%M}Z ({_usd(f.cost_usd)})" for f in loop.failures
            ],
            "total_cost_usd": total,
        },
    )


def loop_stop_findings(
    loop: FailureLoop,
    running: Sequence[TrainingJobDetail],
    *,
    account: str,
    region: str,
    price_of: dict[str, Price | None],
    observed_at: datetime,
    event_id: str | None = None,
) -> list[Finding]:
    """The family's jobs still in progress: remediable, so the common path marks then stops them."""
    findings = []
    for job in running:
        resource = training_job_resource(job, account=account, region=region)
        price = price_of.get(resource.instance_type or "")
        findings.append(
            Finding(
                reason=Reason.JOB_FAILURE_LOOP,
                resource=resource,
                summary=(
                    f"Training job {job.TrainingJobName} is still running in family {loop.family}, "
                    f"which failed {len(loop.failures)} times: it is likely to fail the same way."
                ),
                observed_at=observed_at,
                event_id=event_id,
                hourly_usd=round(price.usd_per_hour * resource.instance_count, 4) if price else None,
                remediable=True,
                evidence={"family": loop.family, "family_failures": len(loop.failures)},
            )
        )
    return findings


# --- cost ceilings -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ceiling:
    max_usd: float | None
    max_hours: float | None
    source_usd: str = "setting"
    source_hours: str = "setting"
    notes: tuple[str, ...] = ()

    @property
    def any(self) -> bool:
        return self.max_usd is not None or self.max_hours is not None


def ceiling_of(tags: dict[str, str], *, default_usd: float, default_hours: float) -> Ceiling:
    """The job's ceilings: its tags win over the settings; a bad tag value is ignored with a note."""
    notes: list[str] = []

    def pick(key: str, default: float) -> tuple[float | None, str]:
        raw = tags.get(key)
        if raw is not None:
            try:
                value = float(raw.strip().lstrip("$"))
            except ValueError:
                value = math.nan
            if math.isfinite(value) and value > 0:
                return value, "tag"
            notes.append(f"tag {key}={raw!r} ignored: not a positive number")
        return (default if default > 0 else None), "setting"

    usd, source_usd = pick(MAX_USD_TAG, default_usd)
    hours, source_hours = pick(MAX_HOURS_TAG, default_hours)
    return Ceiling(usd, hours, source_usd, source_hours, tuple(notes))


def elapsed_seconds(detail: TrainingJobDetail, now: datetime) -> int | None:
    """Billable time so far of an in-progress job: from TrainingStartTime (instances are billed from there)."""
    if detail.TrainingStartTime is None or now < detail.TrainingStartTime:
        return None
    return int((now - detail.TrainingStartTime).total_seconds())


def cost_findings(
    detail: TrainingJobDetail,
    *,
    account: str,
    region: str,
    price: Price | None,
    ceiling: Ceiling,
    warning_share: float,
    now: datetime,
    observed_at: datetime,
    event_id: str | None = None,
) -> list[Finding]:
    """``job_cost_ceiling`` (remediable) at the ceiling, ``job_cost_warning`` (notify) from the warning share.

    Spent so far = elapsed time x instance count x on-demand price: for a spot job an upper bound, since
    AWS reports the (lower) billable time only when the job ends.
    """
    if detail.TrainingJobStatus != "InProgress" or not ceiling.any:
        return []
    elapsed = elapsed_seconds(detail, now)
    if elapsed is None:
        return []
    resource = training_job_resource(detail, account=account, region=region)
    hours = elapsed / 3600
    spent = round(hours * resource.instance_count * price.usd_per_hour, 2) if price else None
    shares: list[float] = []
    if ceiling.max_usd is not None and spent is not None:
        shares.append(spent / ceiling.max_usd)
    if ceiling.max_hours is not None:
        shares.append(hours / ceiling.max_hours)
    if not shares:
        return []  # only a dollar ceiling, and no price: nothing can be said
    share = max(shares)
    if share >= 1:
        reason, remediable, verb = Reason.JOB_COST_CEILING, True, "is over"
    elif share >= warning_share:
        reason, remediable, verb = Reason.JOB_COST_WARNING, False, "is nearing"
    else:
        return []
    limits = []
    if ceiling.max_usd is not None:
        limits.append(f"${ceiling.max_usd:,.2f}")
    if ceiling.max_hours is not None:
        limits.append(f"{ceiling.max_hours:g}h")
    evidence: dict[str, Any] = {
        "spent_so_far_usd": spent,
        "elapsed_hours": round(hours, 2),
        "max_usd": ceiling.max_usd,
        "max_usd_from": ceiling.source_usd if ceiling.max_usd is not None else None,
        "max_hours": ceiling.max_hours,
        "max_hours_from": ceiling.source_hours if ceiling.max_hours is not None else None,
        "share_of_ceiling_percent": round(share * 100, 1),
        "instance_type": resource.instance_type,
        "instance_count": resource.instance_count,
        "price_usd_per_hour": price.usd_per_hour if price else None,
        "notes": list(ceiling.notes),
    }
    return [
        Finding(
            reason=reason,
            resource=resource,
            summary=(
                f"Training job {detail.TrainingJobName} {verb} its ceiling ({' / '.join(limits)}): "
                f"{_usd(spent)} spent in {hours:.1f}h ({share * 100:.0f}%)."
            ),
            observed_at=observed_at,
            event_id=event_id,
            hourly_usd=round(price.usd_per_hour * resource.instance_count, 4) if price else None,
            cost_usd=spent,
            remediable=remediable,
            evidence=evidence,
        )
    ]


# --- launch hygiene ------------------------------------------------------------------------------


def hygiene_findings(
    detail: TrainingJobDetail,
    *,
    account: str,
    region: str,
    price: Price | None,
    max_runtime_hours: float,
    spot_recommend_hours: float,
    observed_at: datetime,
    event_id: str | None = None,
) -> list[Finding]:
    """Notify-only advice on an in-progress job's launch settings."""
    if detail.TrainingJobStatus != "InProgress":
        return []
    resource = training_job_resource(detail, account=account, region=region)
    hourly = round(price.usd_per_hour * resource.instance_count, 4) if price else None
    max_runtime = detail.StoppingCondition.MaxRuntimeInSeconds if detail.StoppingCondition else None
    spot = detail.EnableManagedSpotTraining
    checkpoint = detail.CheckpointConfig.S3Uri if detail.CheckpointConfig else None
    common: dict[str, Any] = {
        "instance_type": resource.instance_type,
        "instance_count": resource.instance_count,
        "managed_spot": spot,
        "max_runtime_hours": round(max_runtime / 3600, 2) if max_runtime else None,
    }

    def finding(reason: Reason, summary: str, **evidence: Any) -> Finding:
        return Finding(
            reason=reason,
            resource=resource,
            summary=summary,
            observed_at=observed_at,
            event_id=event_id,
            hourly_usd=hourly,
            remediable=False,
            evidence=common | evidence,
        )

    findings = []
    limit = max_runtime_hours * 3600
    if not max_runtime or max_runtime > limit:
        said = (
            "no MaxRuntimeInSeconds" if not max_runtime else f"a {max_runtime / 3600:g}h MaxRuntimeInSeconds"
        )
        findings.append(
            finding(
                Reason.JOB_NO_MAX_RUNTIME,
                f"Training job {detail.TrainingJobName} was launched with {said}: a hung run is billed until "
                f"someone notices. Set StoppingCondition.MaxRuntimeInSeconds (at most {max_runtime_hours:g}h).",
                limit_hours=max_runtime_hours,
            )
        )
    if spot and not checkpoint:
        findings.append(
            finding(
                Reason.SPOT_WITHOUT_CHECKPOINT,
                f"Training job {detail.TrainingJobName} uses managed spot training without "
                "CheckpointConfig.S3Uri: every interruption restarts it from zero.",
            )
        )
    if not spot and max_runtime and max_runtime > spot_recommend_hours * 3600:
        saving = (
            round(
                SPOT_SAVING_ASSUMPTION * price.usd_per_hour * resource.instance_count * max_runtime / 3600, 2
            )
            if price
            else None
        )
        findings.append(
            finding(
                Reason.SPOT_RECOMMENDED,
                f"Training job {detail.TrainingJobName} runs on demand for up to {max_runtime / 3600:g}h: "
                f"managed spot training with checkpoints could save about {_usd(saving)} "
                f"(assuming {SPOT_SAVING_ASSUMPTION:.0%} off on-demand, an estimate).",
                estimated_saving_usd=saving,
                saving_assumption=f"{SPOT_SAVING_ASSUMPTION:.0%} off on-demand (assumed)",
            )
        )
    return findings


# --- the daily digest ----------------------------------------------------------------------------


@dataclass(frozen=True)
class JobSummary:
    """What one finished job cost; kept in the state table until the day's digest."""

    job: str
    status: str
    ended_at: datetime
    instance_type: str | None
    instance_count: int
    training_seconds: int | None
    billable_seconds: int | None
    cost_usd: float | None
    spot: bool
    spot_saving_share: float | None  # 1 - billable/training time
    spot_saving_usd: float | None

    def as_item(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "status": self.status,
            "ended_at": self.ended_at.isoformat(),
            "instance_type": self.instance_type,
            "instance_count": self.instance_count,
            "training_seconds": self.training_seconds,
            "billable_seconds": self.billable_seconds,
            "cost_usd": self.cost_usd,
            "spot": self.spot,
            "spot_saving_share": self.spot_saving_share,
            "spot_saving_usd": self.spot_saving_usd,
        }

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> JobSummary:
        return cls(**(item | {"ended_at": datetime.fromisoformat(item["ended_at"])}))


def completed_summary(detail: TrainingJobDetail, price: Price | None, observed_at: datetime) -> JobSummary:
    trained = runtime_seconds(detail)
    billed = billable_seconds(detail)
    count = detail.ResourceConfig.InstanceCount if detail.ResourceConfig else 1
    share = saving = None
    if detail.EnableManagedSpotTraining and trained and billed is not None:
        share = round(1 - billed / trained, 4)
        if price:
            saving = round((trained - billed) / 3600 * count * price.usd_per_hour, 2)
    return JobSummary(
        job=detail.TrainingJobName,
        status=detail.TrainingJobStatus,
        ended_at=detail.TrainingEndTime or detail.LastModifiedTime or observed_at,
        instance_type=detail.ResourceConfig.InstanceType if detail.ResourceConfig else None,
        instance_count=count,
        training_seconds=trained,
        billable_seconds=billed,
        cost_usd=run_cost_usd(detail, price),
        spot=detail.EnableManagedSpotTraining,
        spot_saving_share=share,
        spot_saving_usd=saving,
    )


def digest_finding(
    day: date,
    summaries: Sequence[JobSummary],
    *,
    account: str,
    region: str,
    observed_at: datetime,
    event_id: str | None = None,
) -> Finding | None:
    if not summaries:
        return None
    ordered = sorted(summaries, key=lambda s: (s.cost_usd or 0.0, s.job), reverse=True)
    costs = [s.cost_usd for s in ordered]
    total = None if any(c is None for c in costs) else round(sum(c for c in costs if c is not None), 2)
    saved = round(sum(s.spot_saving_usd or 0.0 for s in ordered), 2)
    lines = []
    for s in ordered[:25]:
        line = f"{s.job} ({s.status}, {s.instance_type} x {s.instance_count}): {_usd(s.cost_usd)}"
        if s.spot_saving_share is not None:
            line += f", spot saved {s.spot_saving_share:.0%} ({_usd(s.spot_saving_usd)})"
        lines.append(line)
    return Finding(
        reason=Reason.TRAINING_DIGEST,
        resource=Resource(
            kind=ResourceKind.TRAINING_DIGEST,
            id=f"training-digest-{day.isoformat()}",
            name=f"Training jobs finished on {day.isoformat()}",
            account=account,
            region=region,
        ),
        summary=(
            f"{len(ordered)} training jobs finished on {day.isoformat()} and cost {_usd(total)}; "
            f"managed spot saved {_usd(saved)}."
        ),
        observed_at=observed_at,
        event_id=event_id,
        cost_usd=total,
        remediable=False,
        evidence={
            "jobs": len(ordered),
            "total_cost_usd": total,
            "spot_saving_usd": saved,
            "runs": lines if len(ordered) <= 25 else [*lines, f"... and {len(ordered) - 25} more"],
        },
    )


def _usd(value: float | None) -> str:
    return "an unknown amount" if value is None else f"${value:,.2f}"
