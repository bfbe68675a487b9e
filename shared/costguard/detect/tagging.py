"""``untagged_gpu_spend`` at launch: a GPU or accelerator resource started without the account's cost-allocation
tags (pure).

The audit tables what untagged resources cost a month (audit/holdings.py); this is the alert at launch, while
the person who started it can still tag it. It names who launched it where the event or the resource's own tags
say; an EC2 state change names nobody, and neither does a training job's (its ``RoleArn`` is the role it runs
as, not its caller): CloudTrail's RunInstances or CreateTrainingJob record does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from costguard.model import Accelerators, Finding, Reason, Resource, ResourceKind

HOURS_PER_MONTH = 730  # the audit's month (audit/report.py)
# Tags that name a person, put there by the account's tooling or by AWS (Studio adds its user profile's ARN to
# the jobs it starts), first found wins.
LAUNCHER_TAGS = ("aws:createdBy", "CreatedBy", "created-by", "created_by", "sagemaker:user-profile-arn")
# Tags that name the automation that launched it.
LAUNCHED_VIA_TAGS = (
    "aws:autoscaling:groupName",
    "aws:cloudformation:stack-name",
    "eks:nodegroup-name",
    "aws:batch:compute-environment",
    "aws:sagemaker:pipeline-execution-arn",
)
KIND_WORDS = {ResourceKind.EC2_INSTANCE: "EC2 instance", ResourceKind.TRAINING_JOB: "training job"}
NOT_IN_EVENT = "not in the event (CloudTrail's record of the launch names the caller)"


def missing_tags(tags: Mapping[str, str], required: Sequence[str]) -> list[str]:
    """The required keys the tags lack; an empty value counts as missing (the audit's rule)."""
    return [key for key in required if not str(tags.get(key, "")).strip()]


def launched_by(tags: Mapping[str, str]) -> tuple[str, str | None]:
    """Who launched it (a person's tag, else the event's silence) and through what automation, if a tag says."""
    person = next((f"{tags[k]} ({k} tag)" for k in LAUNCHER_TAGS if str(tags.get(k, "")).strip()), None)
    via = next((f"{tags[k]} ({k})" for k in LAUNCHED_VIA_TAGS if str(tags.get(k, "")).strip()), None)
    return person or NOT_IN_EVENT, via


def untagged_launch_finding(
    resource: Resource,
    *,
    required: Sequence[str],
    accelerators: Accelerators | None,
    launched_at: datetime | None,
    hourly_usd: float | None,
    observed_at: datetime,
    event_id: str | None,
    runs_as: str | None = None,
) -> Finding | None:
    """One notify-only finding for a GPU or accelerator resource (``accelerators`` known) that lacks a required
    tag; None when nothing is required, the type has no accelerator, or every tag is there. Told once per launch:
    the launch time scopes its repeats (a stop and start is a new launch, and a new alert)."""
    if not required or accelerators is None:
        return None
    missing = missing_tags(resource.tags, required)
    if not missing:
        return None
    person, via = launched_by(resource.tags)
    kind = KIND_WORDS.get(resource.kind, resource.kind.value.replace("_", " "))
    name = f" ({resource.name})" if resource.name and resource.name != resource.id else ""
    when = f" at {launched_at:%Y-%m-%d %H:%M} UTC" if launched_at else ""
    monthly = round(hourly_usd * HOURS_PER_MONTH, 2) if hourly_usd is not None else None
    cost = (
        f"its ${hourly_usd:,.2f}/h (${monthly:,.0f} a month if it keeps running) is spend no team is charged for"
        if hourly_usd is not None and monthly is not None
        else "its spend is charged to no team"
    )
    return Finding(
        reason=Reason.UNTAGGED_GPU_SPEND,
        resource=resource,
        summary=(
            f"{resource.instance_type or 'GPU'} {kind} {resource.id}{name} was launched{when} without the "
            f"cost-allocation tag{'s' if len(missing) > 1 else ''} {', '.join(missing)}: {cost}. Tag it now."
        ),
        observed_at=observed_at,
        event_id=event_id,
        hourly_usd=hourly_usd,
        remediable=False,
        repeat_scope=f"launch:{launched_at.isoformat()}" if launched_at else None,
        evidence={
            "missing_tags": missing,
            "required_tags": list(required),
            "launched_at": launched_at.isoformat() if launched_at else None,
            "launched_by": person,
            "launched_via": via,
            "runs_as": runs_as,
            "accelerators": f"{accelerators.count} x {accelerators.model}",
            "monthly_usd_at_this_rate": monthly,
        },
    )
