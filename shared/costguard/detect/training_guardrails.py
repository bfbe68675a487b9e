"""Training-job guardrails. Pure: failure loops, cost ceilings, launch hygiene and the daily digest.

Every figure is billable time x instance count x on-demand price (``Price``); an unknown price gives an
unknown figure, never zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from typing import Any, Literal, Protocol

from costguard.detect.job_families import FAMILY_TAG, FailureLoop, Family
from costguard.detect.sagemaker import hourly_usd
from costguard.detect.training_jobs import (
    billable_seconds,
    run_cost_usd,
    runtime_seconds,
    training_job_resource,
)
from costguard.events.sagemaker import TrainingJobDetail
from costguard.model import Finding, Reason, Resource, ResourceKind
from costguard.pricing import Price
from costguard.windows import FINGERPRINT_CHARS, fingerprint, has_fingerprint

MAX_USD_TAG = "costguard:max-usd"
MAX_HOURS_TAG = "costguard:max-hours"
# An assumption, not a quote: managed spot training commonly saves 60-90% against on-demand; costguard
# estimates with the low end. The real saving shows afterwards as 1 - billable/training time.
SPOT_SAVING_ASSUMPTION = 0.6


# --- failure loops -------------------------------------------------------------------------------

LOOP_JOBS_SHOWN = 20  # failures listed one by one in a loop alert


def loop_finding(
    loop: FailureLoop,
    latest: TrainingJobDetail,
    *,
    account: str,
    region: str,
    window: timedelta,
    observed_at: datetime,
    event_id: str | None = None,
    remediation: str | None = None,
) -> Finding:
    """One finding per family: its key is the family, so repeats of one loop are one alert.

    ``remediation`` says what happens to the family's running jobs (or why nothing does)."""
    config = latest.ResourceConfig
    family = loop.family
    resource = Resource(
        kind=ResourceKind.JOB_FAMILY,
        id=family.key,
        name=f"{family.name} (latest: {latest.TrainingJobName})",
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
    latest_first = list(reversed(loop.failures))
    jobs = [f"{f.job_name} at {f.failed_at:%Y-%m-%d %H:%M}Z ({usd_text(f.cost_usd)})" for f in latest_first]
    hidden = loop.count - min(len(jobs), LOOP_JOBS_SHOWN)
    jobs = jobs[:LOOP_JOBS_SHOWN] + ([f"... and {hidden} earlier failures"] if hidden else [])
    summary = (
        f"Training job family {family.name} failed {loop.count} times in {hours}h, "
        f"costing {spent}. Fix the cause before it is launched again."
    )
    return Finding(
        reason=Reason.JOB_FAILURE_LOOP,
        resource=resource,
        summary=f"{summary} {remediation}" if remediation else summary,
        observed_at=observed_at,
        event_id=event_id,
        cost_usd=total,
        remediable=False,
        evidence={
            "family": family.name,
            "family_from": family.source,
            "failures": loop.count,
            "first_failure": loop.first_at.isoformat() if loop.first_at else None,
            "window_hours": hours,
            "reasons": [f"{count} x {reason}" for reason, count in loop.reasons()]
            + ([f"(reasons of the latest {len(loop.failures)} failures)"] if loop.earlier_count else []),
            "jobs": jobs,
            "total_cost_usd": total,
        },
    )


def name_family_note(family: Family, *, acting: bool) -> str:
    """Why the running jobs of a family guessed from names are left alone."""
    verb = "Nothing is stopped" if acting else "Even in remediate mode nothing would be stopped"
    return (
        f"{verb}: the family {family.name} is only guessed from job names (a counter suffix and a model size "
        f"look alike, so it may take in other teams' jobs). Tag the jobs {FAMILY_TAG} (or run them in a "
        "SageMaker pipeline) to let costguard stop the family's idle jobs."
    )


GpuState = Literal["idle", "busy", "unknown"]


@dataclass(frozen=True)
class GpuUse:
    """What a running job's GPUs did over the idle window, from its hosts' GPUUtilization (Maximum per
    period). SageMaker sums a host's GPUUtilization over its GPUs, so a host at or under the threshold has
    every GPU under it, and one above it may have one busy GPU: the reading errs on the side of busy."""

    state: GpuState
    peak_percent: float | None = None  # the highest host value in the window
    peak_host: int | None = None
    silent_hosts: tuple[int, ...] = ()
    hosts: int = 0

    def blocker(self, threshold: float, window: timedelta) -> str | None:
        """Why the job must not be stopped; None when it is known to be idle."""
        minutes = int(window.total_seconds() // 60)
        if self.state == "busy":
            return (
                f"busy on its GPUs (GPUUtilization up to {self.peak_percent:g}% on algo-{self.peak_host} "
                f"in the last {minutes} min, above the {threshold:g}% idle threshold)"
            )
        if self.state == "unknown":
            if not self.hosts:
                missing = "its hosts are unknown"
            elif len(self.silent_hosts) == self.hosts:
                missing = "no GPUUtilization datapoint from any of its hosts"
            else:
                missing = "no GPUUtilization datapoint from " + ", ".join(
                    f"algo-{h}" for h in self.silent_hosts
                )
            return (
                f"its GPU use is unknown ({missing} in the last {minutes} min): not known to be idle, "
                "so costguard leaves it running"
            )
        return None


def gpu_use(
    hosts: Mapping[int, Sequence[tuple[datetime, float]]], host_count: int, threshold: float
) -> GpuUse:
    """Busy when any host is above the threshold; idle only when every host reported and none was above it;
    unknown otherwise (no hosts, or a host without data: the silent one might be the one working)."""
    peak: tuple[float, int] | None = None
    for host in range(1, host_count + 1):
        for _, percent in hosts.get(host, ()):
            if peak is None or percent > peak[0]:
                peak = (percent, host)
    silent = tuple(h for h in range(1, host_count + 1) if not hosts.get(h))
    top = peak[0] if peak is not None else None
    where = peak[1] if peak is not None else None
    if top is not None and top > threshold:
        return GpuUse("busy", top, where, silent, host_count)
    if host_count == 0 or silent:
        return GpuUse("unknown", top, where, silent, host_count)
    return GpuUse("idle", top, where, silent, host_count)


def host_count(detail: TrainingJobDetail) -> int:
    """How many hosts (algo-1..N) the job runs on; a heterogeneous cluster counts every group's instances."""
    config = detail.ResourceConfig
    if config is None:
        return 0
    groups = (config.model_extra or {}).get("InstanceGroups") or []
    if groups:
        return sum(int(g.get("InstanceCount", 0) or 0) for g in groups if isinstance(g, dict))
    return config.InstanceCount


def loop_stop_findings(
    loop: FailureLoop,
    running: Sequence[TrainingJobDetail],
    *,
    account: str,
    region: str,
    price_of: dict[str, Price | None],
    gpu_of: Mapping[str, GpuUse],
    idle_threshold: float,
    idle_window: timedelta,
    observed_at: datetime,
    event_id: str | None = None,
) -> list[Finding]:
    """The declared family's jobs still in progress. One known to be idle on its GPUs is remediable, so the
    common path marks then stops it; a busy one, or one whose GPU use is unknown, is only reported."""
    if not loop.family.declared:
        return []  # a family guessed from names is never acted on
    findings = []
    for job in running:
        use = gpu_of.get(job.TrainingJobName, GpuUse("unknown"))
        blocker = use.blocker(idle_threshold, idle_window)
        resource = training_job_resource(job, account=account, region=region)
        if blocker:
            resource = resource.model_copy(update={"stop_blocker": blocker})
        price = price_of.get(resource.instance_type or "")
        findings.append(
            Finding(
                reason=Reason.JOB_FAILURE_LOOP,
                resource=resource,
                summary=(
                    f"Training job {job.TrainingJobName} is still running in family {loop.family.describe()}, "
                    f"which failed {loop.count} times: it is likely to fail the same way."
                    + (f" Not stopped: {blocker}." if blocker else " Its GPUs are idle.")
                ),
                observed_at=observed_at,
                event_id=event_id,
                hourly_usd=hourly_usd(price, resource.instance_count),
                remediable=True,
                evidence={
                    "family": loop.family.name,
                    "family_from": loop.family.source,
                    "family_failures": loop.count,
                    "gpu": use.state,
                    "gpu_peak_percent": use.peak_percent,
                    "gpu_silent_hosts": [f"algo-{h}" for h in use.silent_hosts],
                    "idle_threshold_percent": idle_threshold,
                },
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
    armed_by: dict[str, str] = {}
    if share >= 1:
        reason, remediable, verb = Reason.JOB_COST_CEILING, True, "is over"
        armed_by = _armed_by(detail.Tags, ceiling, spent, hours)
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
                f"{usd_text(spent)} spent in {hours:.1f}h ({share * 100:.0f}%)."
            ),
            observed_at=observed_at,
            event_id=event_id,
            hourly_usd=hourly_usd(price, resource.instance_count),
            cost_usd=spent,
            remediable=remediable,
            armed_by=armed_by,
            evidence=evidence,
        )
    ]


def _armed_by(tags: dict[str, str], ceiling: Ceiling, spent: float | None, hours: float) -> dict[str, str]:
    """The job's own ceiling tags it is over (act/arming.py checks them against the tags as first seen); none
    when a ceiling from the settings is over too: the deployment's own setting arms the stop."""
    over_usd = ceiling.max_usd is not None and spent is not None and spent >= ceiling.max_usd
    over_hours = ceiling.max_hours is not None and hours >= ceiling.max_hours
    if (over_usd and ceiling.source_usd == "setting") or (over_hours and ceiling.source_hours == "setting"):
        return {}
    armed = {}
    if over_usd:
        armed[MAX_USD_TAG] = tags[MAX_USD_TAG]
    if over_hours:
        armed[MAX_HOURS_TAG] = tags[MAX_HOURS_TAG]
    return armed


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
    hourly = hourly_usd(price, resource.instance_count)
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
                f"managed spot training with checkpoints could save about {usd_text(saving)} "
                f"(assuming {SPOT_SAVING_ASSUMPTION:.0%} off on-demand, an estimate).",
                estimated_saving_usd=saving,
                saving_assumption=f"{SPOT_SAVING_ASSUMPTION:.0%} off on-demand (assumed)",
            )
        )
    return findings


# --- the daily digest ----------------------------------------------------------------------------


class GuardrailSettings(Protocol):
    """What the guardrails read of the settings (costguard.settings.Settings is one: the settings sit above
    detect/)."""

    @property
    def default_job_max_usd(self) -> float: ...
    @property
    def default_job_max_hours(self) -> float: ...
    @property
    def cost_warning_share(self) -> float: ...
    @property
    def max_runtime_hours(self) -> float: ...
    @property
    def spot_recommend_hours(self) -> float: ...


def guardrail_findings(
    detail: TrainingJobDetail,
    *,
    account: str,
    region: str,
    price: Price | None,
    settings: GuardrailSettings,
    now: datetime,
    observed_at: datetime,
    event_id: str | None,
    hygiene: bool,
) -> list[Finding]:
    """Cost ceilings of an in-progress job at ``price`` (its instance type's in the region), and (on its state
    changes) its launch hygiene."""
    ceiling = ceiling_of(
        detail.Tags, default_usd=settings.default_job_max_usd, default_hours=settings.default_job_max_hours
    )
    findings = cost_findings(
        detail,
        account=account,
        region=region,
        price=price,
        ceiling=ceiling,
        warning_share=settings.cost_warning_share,
        now=now,
        observed_at=observed_at,
        event_id=event_id,
    )
    if hygiene:
        findings += hygiene_findings(
            detail,
            account=account,
            region=region,
            price=price,
            max_runtime_hours=settings.max_runtime_hours,
            spot_recommend_hours=settings.spot_recommend_hours,
            observed_at=observed_at,
            event_id=event_id,
        )
    return findings


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


KEEP_FINISHED = 50  # finished jobs of a day kept one by one (the digest lists the costliest 25)
FINISHED_FINGERPRINTS_MAX = 4000  # fingerprints of the others, so each is counted once (8 bytes each)


@dataclass(frozen=True)
class FinishedRest:
    """A day's finished jobs beyond the costliest ``KEEP_FINISHED``: summed, and fingerprinted."""

    count: int = 0
    cost_usd: float = 0.0  # of those whose cost is known
    unknown_cost: int = 0
    spot_saving_usd: float = 0.0
    seen: str = ""  # fingerprints of their job names, end to end (fewer than count past the cap)

    def has(self, job: str) -> bool:
        return has_fingerprint(self.seen, job)

    def with_job(self, summary: JobSummary) -> FinishedRest:
        room = len(self.seen) < FINISHED_FINGERPRINTS_MAX * FINGERPRINT_CHARS
        return replace(
            self,
            count=self.count + 1,
            cost_usd=round(self.cost_usd + (summary.cost_usd or 0.0), 2),
            unknown_cost=self.unknown_cost + (summary.cost_usd is None),
            spot_saving_usd=round(self.spot_saving_usd + (summary.spot_saving_usd or 0.0), 2),
            seen=self.seen + (fingerprint(summary.job) if room else ""),
        )

    def as_item(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "cost": self.cost_usd,
            "unknown": self.unknown_cost,
            "spot_saving": self.spot_saving_usd,
            "seen": self.seen,
        }

    @classmethod
    def from_item(cls, item: dict[str, Any] | None) -> FinishedRest:
        if not item:
            return cls()
        return cls(
            count=int(item.get("count") or 0),
            cost_usd=float(item.get("cost") or 0.0),
            unknown_cost=int(item.get("unknown") or 0),
            spot_saving_usd=float(item.get("spot_saving") or 0.0),
            seen=str(item.get("seen") or ""),
        )


def _cost_rank(summary: JobSummary) -> tuple[float, str]:
    return (summary.cost_usd or 0.0, summary.job)


def with_finished(
    kept: Mapping[str, JobSummary], rest: FinishedRest, summary: JobSummary, *, keep: int = KEEP_FINISHED
) -> tuple[dict[str, JobSummary], FinishedRest] | None:
    """The day with one more finished job (once per job name), keeping the costliest ``keep`` one by one;
    None when nothing changes."""
    if kept.get(summary.job) == summary or rest.has(summary.job):
        return None
    jobs = dict(kept) | {summary.job: summary}
    while len(jobs) > keep:
        cheapest = min(jobs.values(), key=_cost_rank)
        del jobs[cheapest.job]
        rest = rest.with_job(cheapest)
    return jobs, rest


def digest_finding(
    day: date,
    summaries: Sequence[JobSummary],
    *,
    account: str,
    region: str,
    observed_at: datetime,
    event_id: str | None = None,
    rest: FinishedRest | None = None,
) -> Finding | None:
    """The day's digest: ``summaries`` are the jobs kept one by one, ``rest`` the others summed."""
    rest = rest or FinishedRest()
    if not summaries and not rest.count:
        return None
    ordered = sorted(summaries, key=lambda s: (s.cost_usd or 0.0, s.job), reverse=True)
    costs = [s.cost_usd for s in ordered]
    total = (
        None
        if rest.unknown_cost or any(c is None for c in costs)
        else round(sum(c for c in costs if c is not None) + rest.cost_usd, 2)
    )
    saved = round(sum(s.spot_saving_usd or 0.0 for s in ordered) + rest.spot_saving_usd, 2)
    jobs = len(ordered) + rest.count
    lines = []
    for s in ordered[:25]:
        line = f"{s.job} ({s.status}, {s.instance_type} x {s.instance_count}): {usd_text(s.cost_usd)}"
        if s.spot_saving_share is not None:
            line += f", spot saved {s.spot_saving_share:.0%} ({usd_text(s.spot_saving_usd)})"
        lines.append(line)
    more = jobs - len(lines)
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
            f"{jobs} training jobs finished on {day.isoformat()} and cost {usd_text(total)}; "
            f"managed spot saved {usd_text(saved)}."
        ),
        observed_at=observed_at,
        event_id=event_id,
        cost_usd=total,
        remediable=False,
        evidence={
            "jobs": jobs,
            "total_cost_usd": total,
            "spot_saving_usd": saved,
            "runs": [*lines, f"... and {more} more"] if more else lines,
        },
    )


def usd_text(value: float | None) -> str:
    """An amount of dollars as an alert says it; an unknown amount is never shown as zero."""
    return "an unknown amount" if value is None else f"${value:,.2f}"
