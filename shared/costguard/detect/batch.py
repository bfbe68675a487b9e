"""Detectors for AWS Batch jobs: one job retrying into the same failure, and a queue whose jobs keep failing. Pure."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from costguard.events.batch import Attempt, BatchJobDetail
from costguard.model import Finding, Reason, Resource, ResourceKind
from costguard.pricing import Price
from costguard.windows import WindowCount

_NOT_TAGS = {"resourceArn"}  # Batch puts the job's own ARN among its tags


@dataclass(frozen=True)
class FailedAttempt:
    number: int  # 1-based, in Batch's order
    exit_code: int | None
    reason: str
    seconds: int | None
    cost_usd: float | None

    def describe(self) -> str:
        code = "no exit code" if self.exit_code is None else f"exit {self.exit_code}"
        cost = "cost unknown" if self.cost_usd is None else f"${self.cost_usd:,.2f}"
        return f"#{self.number}: {code} ({self.reason[:200]}), ran {duration(self.seconds)}, {cost}"


def instance_type_of(detail: BatchJobDetail) -> str | None:
    return detail.container.instanceType if detail.container else None


def attempt_seconds(attempt: Attempt) -> int | None:
    if attempt.startedAt and attempt.stoppedAt and attempt.stoppedAt >= attempt.startedAt:
        return int((attempt.stoppedAt - attempt.startedAt).total_seconds())
    return None


def attempt_failed(attempt: Attempt) -> bool:
    """An attempt that ended without exit code 0 (no exit code at all: its host or container went away)."""
    exit_code = attempt.container.exitCode if attempt.container else None
    return attempt.stoppedAt is not None and exit_code != 0


def failed_attempts(detail: BatchJobDetail, price: Price | None) -> list[FailedAttempt]:
    """Each failed attempt with what it cost: its duration x the on-demand price; None when either is unknown."""
    found = []
    for number, attempt in enumerate(detail.attempts, start=1):
        if not attempt_failed(attempt):
            continue
        seconds = attempt_seconds(attempt)
        container = attempt.container
        reason = (container.reason if container else None) or attempt.statusReason or "no reason given"
        cost = round(seconds / 3600 * price.usd_per_hour, 2) if price and seconds is not None else None
        found.append(
            FailedAttempt(number, container.exitCode if container else None, reason.strip(), seconds, cost)
        )
    return found


def attempts_cost_usd(attempts: list[FailedAttempt], price: Price | None) -> float | None:
    """Total duration x price, rounded once; unknown if any duration or the price is unknown."""
    seconds = [a.seconds for a in attempts]
    if price is None or not attempts or any(s is None for s in seconds):
        return None
    return round(sum(s for s in seconds if s is not None) / 3600 * price.usd_per_hour, 2)


def batch_job_resource(detail: BatchJobDetail, *, account: str, region: str) -> Resource:
    return Resource(
        kind=ResourceKind.BATCH_JOB,
        id=detail.jobId,
        name=detail.jobName,
        arn=detail.jobArn,
        account=account,
        region=region,
        instance_type=instance_type_of(detail),
        tags={k: v for k, v in detail.tags.items() if k not in _NOT_TAGS},
    )


def detect_batch_retry_loop(
    detail: BatchJobDetail,
    *,
    account: str,
    region: str,
    price: Price | None,
    threshold: int,
    observed_at: datetime,
    event_id: str | None = None,
) -> list[Finding]:
    """A job with at least ``threshold`` failed attempts gives one ``batch_retry_loop`` finding."""
    failed = failed_attempts(detail, price)
    if len(failed) < threshold:
        return []
    resource = batch_job_resource(detail, account=account, region=region)
    cost = attempts_cost_usd(failed, price)
    limit = detail.retryStrategy.attempts if detail.retryStrategy else None
    spent = (
        f"${cost:,.2f}"
        if cost is not None
        else "an unknown amount (the event names no instance type or no price is known for it)"
        if price is None
        else "an unknown amount (an attempt has no start or stop time)"
    )
    if detail.status == "FAILED":
        state = "has failed for good"
    else:
        left = f", {limit - len(detail.attempts)} attempt(s) left" if limit else ""
        state = f"is being retried (status {detail.status}{left})"
    codes = Counter(a.exit_code for a in failed)
    same = ""
    if len(codes) == 1 and None not in codes:
        same = f" Every attempt exited {failed[0].exit_code}: retrying the same input will not help."
    return [
        Finding(
            reason=Reason.BATCH_RETRY_LOOP,
            resource=resource,
            summary=(
                f"Batch job {detail.jobName} on queue {detail.queue_name} {state} after {len(failed)} failed "
                f"attempts that cost {spent}.{same}"
            ),
            observed_at=observed_at,
            event_id=event_id,
            hourly_usd=price.usd_per_hour if price else None,
            cost_usd=cost,
            remediable=False,
            evidence={
                "failed_attempts": [a.describe() for a in failed],
                "retry_limit": limit,
                "status": detail.status,
                "status_reason": detail.statusReason,
                "job_queue": detail.jobQueue,
                "job_definition": detail.jobDefinition,
                "instance_type": resource.instance_type,
                "price_usd_per_hour": price.usd_per_hour if price else None,
                "price_source": price.source if price else "unknown",
            },
        )
    ]


def queue_member(detail: BatchJobDetail) -> str:
    """How one failed job is counted in its queue's window (once, however often its event is delivered)."""
    return f"{detail.jobName} ({detail.jobId})"


def queue_key(detail: BatchJobDetail, *, account: str, region: str) -> str:
    return f"batchq#{account}#{region}#{detail.queue_name}"


def detect_failing_queue(
    detail: BatchJobDetail,
    counted: WindowCount,
    *,
    account: str,
    region: str,
    threshold: int,
    window: timedelta,
    observed_at: datetime,
    event_id: str | None = None,
) -> list[Finding]:
    """The failed job that brings its queue to ``threshold`` failed jobs in the window gives one finding on the
    queue: one alert per queue per window, not one per job."""
    if not counted.reached(threshold):
        return []
    hours = window.total_seconds() / 3600
    resource = Resource(
        kind=ResourceKind.BATCH_QUEUE,
        id=detail.queue_name,
        name=detail.queue_name,
        arn=detail.jobQueue if detail.jobQueue.startswith("arn:") else None,
        account=account,
        region=region,
    )
    return [
        Finding(
            reason=Reason.BATCH_RETRY_LOOP,
            resource=resource,
            summary=(
                f"Batch queue {detail.queue_name} has had {counted.count} failed jobs since "
                f"{counted.started_at:%Y-%m-%d %H:%M} UTC (threshold {threshold} in {hours:g}h): "
                "something the jobs share (image, job definition, data, compute environment) is broken."
            ),
            observed_at=observed_at,
            event_id=event_id,
            remediable=False,
            evidence={
                "failed_jobs": sorted(counted.members)
                + ([f"... and {counted.unlisted} more"] if counted.unlisted else []),
                "window_started": counted.started_at.isoformat(),
                "window_hours": hours,
                "latest_job_definition": detail.jobDefinition,
            },
        )
    ]


def duration(seconds: int | None) -> str:
    if seconds is None:
        return "an unknown time"
    hours, rest = divmod(seconds, 3600)
    minutes = rest // 60
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {seconds % 60:02d}s"
