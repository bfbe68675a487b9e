"""Bedrock Provisioned Throughput nobody invokes: billed per model unit every hour until deleted. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from costguard.model import MARK_TAG_KEY, Finding, ProvisionedThroughput, Reason, Resource, ResourceKind
from costguard.policy import utc_text
from costguard.pricing import Price

# The owner's opt-in: without it an idle throughput is only reported, whatever the mode.
AUTO_DELETE_TAG = "costguard:auto-delete"
# How long before a commitment's end its owner is told again, so that it is deleted when it lapses (billing
# goes on after the term, at the no-commitment rate, until someone deletes it).
EXPIRY_NOTICE = timedelta(days=7)

# What AWS's metric reference leaves open, said in every idle finding and in docs/reasons.md.
DIMENSION_NOTE = (
    "AWS's Bedrock metric reference does not say which ModelId value a provisioned model's invocations carry; "
    "costguard lists the AWS/Bedrock Invocations series (ListMetrics) and reads the ones whose ModelId is this "
    "throughput's ARN (what InvokeModel is called with for a provisioned model), its id or its name. Only a "
    "series found that way with no datapoints in the window counts as no invocations; with none found, "
    "costguard cannot tell whether it is used and never deletes it."
)
# Why a throughput with no series found is not judged, in the notice and its evidence.
UNREADABLE_HELP = (
    "CloudWatch lists a series only when it received data in the last two weeks, and AWS does not document "
    "which ModelId a provisioned model's invocations are published under. If it serves traffic, check the "
    "AWS/Bedrock Invocations series in the CloudWatch console; if nobody has invoked it for two weeks, delete it "
    "yourself (costguard will not act on silence)."
)


def model_id_spellings(throughput: ProvisionedThroughput) -> tuple[str, ...]:
    """The ModelId values costguard reads as this throughput's: its ARN, its id (the ARN's last part) and its
    name. Any other spelling is not its (a series under an unrelated model must not make it look busy)."""
    ident = throughput.arn.rsplit("/", 1)[-1]
    return tuple(dict.fromkeys((throughput.arn, ident, throughput.name)))


def opted_in(tags: dict[str, str]) -> bool:
    # Exactly what the IAM condition accepts (StringEqualsIgnoreCase "true"): a delete IAM refuses is no delete.
    return tags.get(AUTO_DELETE_TAG, "").lower() == "true"


def throughput_resource(throughput: ProvisionedThroughput) -> Resource:
    return Resource(
        kind=ResourceKind.PROVISIONED_THROUGHPUT,
        id=throughput.id,
        name=throughput.name,
        arn=throughput.arn,
        account=throughput.account,
        region=throughput.region,
        instance_type=f"{throughput.base_model} model unit",
        instance_count=throughput.model_units,
        tags=throughput.tags,
        started=throughput.created,
    )


def committed(throughput: ProvisionedThroughput, now: datetime) -> bool:
    """Under a commitment AWS will not let it be deleted before (an unknown end counts as not yet reached)."""
    if not throughput.commitment:
        return False
    return throughput.commitment_expires is None or throughput.commitment_expires > now


def old_enough(throughput: ProvisionedThroughput, window: timedelta, now: datetime) -> bool:
    return throughput.created is not None and now - throughput.created >= window


def throughput_findings(
    throughput: ProvisionedThroughput,
    invocations: float | None,
    *,
    series: Sequence[str],
    price: Price | None,
    window: timedelta,
    now: datetime,
    event_id: str | None = None,
) -> list[Finding]:
    """``bedrock_throughput_idle`` for an InService throughput older than the window with no invocations in it.

    ``series`` are the ModelId values CloudWatch lists an AWS/Bedrock Invocations series under for it
    (model_id_spellings); ``invocations`` is their Sum over the window. Silence counts as no use only under a
    series shown to exist: with none found, costguard cannot tell, says so once (``gpu_metrics_missing``, never
    remediable) and cancels a pending delete. Only a no-commitment throughput its owner opted in
    (``costguard:auto-delete=true``) may be deleted; a committed one is reported with when its term ends, and
    told again in the week before. A marked throughput invoked again has its mark removed."""
    resource = throughput_resource(throughput)
    units = throughput.model_units
    hourly = round(units * price.usd_per_hour, 4) if price else None
    if not series and not invocations:
        return _cannot_tell(throughput, resource, hourly, window, now, event_id)
    if invocations:
        if MARK_TAG_KEY not in throughput.tags:
            return []
        return [
            Finding(
                reason=Reason.GPU_ACTIVE_AGAIN,
                resource=resource,
                summary=f"Provisioned Throughput {throughput.name} served {invocations:,.0f} invocations in the "
                f"last {_hours(window)} h: its pending delete is off.",
                observed_at=now,
                evidence={"invocations": invocations},
                hourly_usd=hourly,
                cancels_mark=True,
                event_id=event_id,
            )
        ]
    if not old_enough(throughput, window, now):
        return []  # too young to have a whole window behind it (or its age is unknown)
    idle_cost = round(hourly * _hours(window), 2) if hourly is not None else None
    is_committed = committed(throughput, now)
    expires = throughput.commitment_expires
    soon = is_committed and expires is not None and expires - now <= EXPIRY_NOTICE
    return [
        Finding(
            reason=Reason.BEDROCK_THROUGHPUT_IDLE,
            resource=resource,
            summary=_summary(throughput, price, hourly, idle_cost, window, now),
            observed_at=now,
            evidence={
                "model_units": units,
                "base_model": throughput.base_model,
                "model_arn": throughput.model_arn,
                "commitment": throughput.commitment or "none",
                "commitment_expires": expires.isoformat() if expires else None,
                "invocations": 0,
                "series": list(series),
                "window_hours": _hours(window),
                "usd_per_model_unit_hour": price.usd_per_hour if price else None,
                "usd_idle_in_window": idle_cost,
                "price_source": price.source if price else "unknown: no published rate in the table",
                "metric": DIMENSION_NOTE,
                "auto_delete": _auto_delete_text(throughput, is_committed),
            },
            hourly_usd=hourly,
            cost_usd=idle_cost,
            remediable=not is_committed and opted_in(throughput.tags),
            # The owner's opt-in is what arms the delete (act/arming.py holds it to the tag as first seen).
            armed_by=(
                {AUTO_DELETE_TAG: throughput.tags[AUTO_DELETE_TAG]}
                if not is_committed and opted_in(throughput.tags)
                else {}
            ),
            repeat_scope="commitment-ends-soon" if soon else None,
            report_note=_report_note(throughput, is_committed, now),
            event_id=event_id,
        )
    ]


def _cannot_tell(
    throughput: ProvisionedThroughput,
    resource: Resource,
    hourly: float | None,
    window: timedelta,
    now: datetime,
    event_id: str | None,
) -> list[Finding]:
    """No Invocations series found for it: neither idle nor busy. Told once (the repeat gate's alert-once
    reasons), never remediable; a pending delete is cancelled, since its idleness can no longer be shown."""
    if not old_enough(throughput, window, now):
        return []
    spellings = ", ".join(model_id_spellings(throughput))
    unreadable = Finding(
        reason=Reason.GPU_METRICS_MISSING,
        resource=resource,
        summary=f"Provisioned Throughput {throughput.name} ({throughput.model_units} model unit"
        f"{'s' if throughput.model_units != 1 else ''} of {throughput.base_model}): costguard cannot tell "
        "whether it is used. CloudWatch lists no AWS/Bedrock Invocations series under its ARN, id or name, so "
        "no datapoints is not evidence that nobody calls it; it is not called idle and never deleted on that.",
        observed_at=now,
        evidence={
            "model_units": throughput.model_units,
            "base_model": throughput.base_model,
            "model_id_values_read": spellings,
            "series": [],
            "metric": DIMENSION_NOTE,
            "how_to_fix": UNREADABLE_HELP,
        },
        hourly_usd=hourly,
        remediable=False,
        event_id=event_id,
    )
    if MARK_TAG_KEY not in throughput.tags:
        return [unreadable]
    return [
        unreadable,
        Finding(
            reason=Reason.GPU_ACTIVE_AGAIN,
            resource=resource,
            summary=f"Provisioned Throughput {throughput.name}: costguard can no longer find its invocation series "
            "and cannot confirm it is idle, so its pending delete is off.",
            observed_at=now,
            evidence={"series": []},
            hourly_usd=hourly,
            cancels_mark=True,
            event_id=event_id,
        ),
    ]


def _summary(
    throughput: ProvisionedThroughput,
    price: Price | None,
    hourly: float | None,
    idle_cost: float | None,
    window: timedelta,
    now: datetime,
) -> str:
    units = throughput.model_units
    rate = (
        f"${price.usd_per_hour:,.2f} per model unit-hour, ${hourly:,.2f} an hour"
        if price is not None and hourly is not None
        else "an hourly price costguard does not know (no published rate in its table)"
    )
    spent = f"${idle_cost:,.2f}" if idle_cost is not None else "an unknown amount"
    text = (
        f"Provisioned Throughput {throughput.name} ({units} model unit{'s' if units != 1 else ''} of "
        f"{throughput.base_model}, {rate}) served no invocations in {_hours(window)} hours: {spent} paid for "
        "idle capacity in that time. It bills every hour until it is deleted."
    )
    if committed(throughput, now):
        ends = utc_text(throughput.commitment_expires) if throughput.commitment_expires else "an unknown date"
        text += (
            f" Its {throughput.commitment} commitment runs until {ends}: AWS does not allow deleting it before "
            "then; delete it when the term ends, or it keeps billing."
        )
    return text


def _report_note(throughput: ProvisionedThroughput, is_committed: bool, now: datetime) -> str | None:
    if is_committed:
        return "reported only: a committed Provisioned Throughput cannot be deleted before its term ends"
    if not opted_in(throughput.tags):
        return f"reported only: tag it {AUTO_DELETE_TAG}=true to let costguard delete it in remediate mode"
    return None


def _auto_delete_text(throughput: ProvisionedThroughput, is_committed: bool) -> str:
    if is_committed:
        return "never: under a commitment"
    if opted_in(throughput.tags):
        return f"opted in ({AUTO_DELETE_TAG}=true): deleted in remediate mode after the grace period"
    return f"not opted in: tag it {AUTO_DELETE_TAG}=true to let costguard delete it in remediate mode"


def _hours(window: timedelta) -> int:
    return int(window.total_seconds() // 3600)
