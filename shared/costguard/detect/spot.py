"""Spot interruptions: what job is lost, whether it checkpoints, and when a workload should leave spot. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from costguard.detect.job_families import FAMILY_TAG, family_of
from costguard.events.common import to_datetime
from costguard.model import Ec2Instance, Finding, Reason, Resource, ResourceKind
from costguard.pricing import Price

CHECKPOINT_TAG = "costguard:checkpoint"  # an s3:// URI or "true"; "false" says it does not checkpoint
CHECKPOINT_AT_TAG = "costguard:checkpoint-at"  # when the job last checkpointed (ISO 8601), if it says
# Tags that name the job on an instance, most specific first.
JOB_TAGS = (
    "costguard:job",
    "sagemaker:training-job-name",
    "aws:batch:job-id",
    "aws:batch:compute-environment",
    "Name",
)
# A checkpoint tag that says the job does not checkpoint.
CHECKPOINT_FALSE_VALUES = frozenset({"false", "no", "0", "off", "none"})
_DONE = {"terminate": "terminated", "stop": "stopped", "hibernate": "hibernated"}


@dataclass(frozen=True)
class Checkpoint:
    state: Literal["yes", "no", "unknown"]
    where: str | None = None
    last_at: datetime | None = None

    def describe(self) -> str:
        if self.state == "no":
            return f"It does not checkpoint ({CHECKPOINT_TAG}=false): everything since launch is lost."
        if self.state == "unknown":
            return (
                f"It does not checkpoint as far as costguard knows (no {CHECKPOINT_TAG} tag): "
                "the work since launch is presumed lost."
            )
        where = f" to {self.where}" if self.where else ""
        if self.last_at:
            return f"It checkpoints{where}; the last checkpoint was at {self.last_at:%Y-%m-%d %H:%M} UTC."
        return f"It checkpoints{where}, but when it last did is unknown (tag {CHECKPOINT_AT_TAG})."


def checkpoint_of(tags: dict[str, str]) -> Checkpoint:
    value = (tags.get(CHECKPOINT_TAG) or "").strip()
    if not value:
        return Checkpoint("unknown")
    if value.lower() in CHECKPOINT_FALSE_VALUES:
        return Checkpoint("no")
    last_at = None
    if tags.get(CHECKPOINT_AT_TAG):
        try:
            last_at = to_datetime(tags[CHECKPOINT_AT_TAG])
        except ValueError:
            last_at = None
    return Checkpoint("yes", value if "://" in value else None, last_at)


def job_of(tags: dict[str, str]) -> tuple[str, str] | None:
    """(tag key, job name) of the job the instance runs, if a tag names it."""
    for key in JOB_TAGS:
        if tags.get(key):
            return key, tags[key]
    return None


def workload_of(instance_id: str, tags: dict[str, str]) -> str:
    """What repeated interruptions are counted against: the family tag, the job's family, or the instance."""
    if tags.get(FAMILY_TAG):
        return tags[FAMILY_TAG]
    job = job_of(tags)
    return family_of(job[1], tags) if job else instance_id


def is_watched(instance: Ec2Instance | None) -> bool:
    """GPU or accelerator instances and anything a tag names a job on; a gone instance is reported too."""
    if instance is None:
        return True
    return instance.accelerators is not None or job_of(instance.tags) is not None


def lost_work_seconds(
    instance: Ec2Instance | None, checkpoint: Checkpoint, now: datetime
) -> tuple[int | None, str]:
    """How much work the interruption throws away, and since when; None when nobody knows."""
    if checkpoint.state == "yes":
        if checkpoint.last_at and checkpoint.last_at <= now:
            return int((now - checkpoint.last_at).total_seconds()), "the last checkpoint"
        return None, "the last checkpoint (time unknown)"
    if instance and instance.launch_time and instance.launch_time <= now:
        return int((now - instance.launch_time).total_seconds()), "launch"
    return None, "launch (time unknown)"


def detect_spot_interruption(
    *,
    instance_id: str,
    action: str,
    instance: Ec2Instance | None,
    account: str,
    region: str,
    price: Price | None,
    interruptions: int,
    threshold: int,
    window: timedelta,
    observed_at: datetime,
    now: datetime,
    event_id: str | None = None,
) -> list[Finding]:
    """One ``spot_interruption`` finding; past ``threshold`` interruptions of the workload in the window it
    recommends on-demand capacity or a Capacity Block."""
    tags = instance.tags if instance else {}
    job = job_of(tags)
    workload = workload_of(instance_id, tags)
    checkpoint = checkpoint_of(tags)
    seconds, since = lost_work_seconds(instance, checkpoint, now)
    cost = round(seconds / 3600 * price.usd_per_hour, 2) if price and seconds is not None else None
    hours = window.total_seconds() / 3600
    resource = _instance_resource(instance_id, instance, account, region, tags)
    recommendation = None
    if interruptions >= threshold:
        recommendation = _recommendation(workload, interruptions, hours, price, checkpoint)
    parts = [
        *_interruption_text(resource, action, instance, job, checkpoint),
        _lost_work_text(seconds, since, cost),
        recommendation or f"Interruption {interruptions} of workload {workload} in {hours:g}h.",
    ]
    return [
        Finding(
            reason=Reason.SPOT_INTERRUPTION,
            resource=resource,
            summary=" ".join(parts),
            observed_at=observed_at,
            event_id=event_id,
            hourly_usd=price.usd_per_hour if price else None,
            cost_usd=cost,
            remediable=False,
            evidence={
                "instance_action": action,
                "job": job[1] if job else None,
                "job_tag": job[0] if job else None,
                "workload": workload,
                "checkpoint": checkpoint.state,
                "checkpoint_uri": checkpoint.where,
                "launched": instance.launch_time.isoformat() if instance and instance.launch_time else None,
                "lost_work_seconds": seconds,
                "interruptions_in_window": interruptions,
                "window_hours": hours,
                "recommendation": recommendation,
                "price_usd_per_hour": price.usd_per_hour if price else None,
                "price_source": f"{price.source} (on-demand; spot pays less)" if price else "unknown",
            },
        )
    ]


def _instance_resource(
    instance_id: str, instance: Ec2Instance | None, account: str, region: str, tags: dict[str, str]
) -> Resource:
    """The interrupted instance as a finding's resource (only its id, if it is gone already)."""
    return Resource(
        kind=ResourceKind.EC2_INSTANCE,
        id=instance_id,
        name=instance.name if instance else None,
        account=account,
        region=region,
        instance_type=instance.type if instance else None,
        tags=tags,
    )


def _interruption_text(
    resource: Resource,
    action: str,
    instance: Ec2Instance | None,
    job: tuple[str, str] | None,
    checkpoint: Checkpoint,
) -> list[str]:
    """What happens to the instance, the job it runs and whether it checkpoints, as the summary says it."""
    parts = [
        f"Spot instance {resource.display_name} will be {_DONE.get(action, action)} by EC2 in two minutes."
    ]
    if instance is None:
        parts.append(
            "It is gone already (DescribeInstances does not find it): its job and checkpoints are unknown."
        )
    else:
        parts.append(f"It runs {job[1]} ({job[0]})." if job else "No tag names the job it runs.")
        parts.append(checkpoint.describe())
    return parts


def _lost_work_text(seconds: int | None, since: str, cost: float | None) -> str:
    """The work the interruption throws away and what it cost, when both are known."""
    if cost is not None:
        return f"Lost work: {_hours(seconds)} since {since}, about ${cost:,.2f} at the on-demand price."
    return f"Lost work: unknown (time since {since}, or no price for the type)."


def _recommendation(
    workload: str, interruptions: int, hours: float, price: Price | None, checkpoint: Checkpoint
) -> str:
    """For a workload interrupted too often: on-demand capacity or a Capacity Block (and checkpoints)."""
    on_demand = f" (${price.usd_per_hour:,.2f}/h)" if price else ""
    return (
        f"Workload {workload} was interrupted {interruptions} times in {hours:g}h: run it on on-demand "
        f"capacity{on_demand} or in a Capacity Block (GPUs reserved for a fixed period) so it can finish"
        + ("" if checkpoint.state == "yes" else ", and make it checkpoint")
        + "."
    )


def _hours(seconds: int | None) -> str:
    if seconds is None:
        return "an unknown time"
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h {rest // 60:02d}m"
