"""Bedrock Provisioned Throughput nobody invokes: billed per model unit every hour until deleted. Pure."""

from __future__ import annotations

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
    "costguard reads AWS/Bedrock Invocations under both its ARN (what InvokeModel is called with for a "
    "provisioned model) and its name, and counts no datapoints at all as no invocations."
)


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
    price: Price | None,
    window: timedelta,
    now: datetime,
    event_id: str | None = None,
) -> list[Finding]:
    """``bedrock_throughput_idle`` for an InService throughput older than the window with no invocations in it
    (``invocations`` is the window's Sum; None, no datapoints at all, is none too, once it is that old). Only a
    no-commitment throughput its owner opted in (``costguard:auto-delete=true``) may be deleted; a committed one
    is reported with when its term ends, and told again in the week before. A marked throughput invoked again
    has its mark removed."""
    resource = throughput_resource(throughput)
    units = throughput.model_units
    hourly = round(units * price.usd_per_hour, 4) if price else None
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
            repeat_scope="commitment-ends-soon" if soon else None,
            report_note=_report_note(throughput, is_committed, now),
            event_id=event_id,
        )
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
