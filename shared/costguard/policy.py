"""Findings to decisions: mode, protect tag, grace period and the cap on stops. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from costguard.events.common import to_datetime
from costguard.model import MARK_TAG_KEY, Action, Decision, Finding

# A protect tag counts unless its value clearly says no.
_FALSE_VALUES = {"false", "no", "0", "off"}


@dataclass(frozen=True)
class Policy:
    """The user's rules for acting on findings."""

    dry_run: bool = True
    protect_tag_key: str = "costguard:protect"
    grace: timedelta = timedelta(minutes=30)
    max_stops: int = 5


def is_protected(tags: dict[str, str], protect_tag_key: str) -> bool:
    value = tags.get(protect_tag_key)
    return value is not None and value.strip().lower() not in _FALSE_VALUES


def marked_at(tags: dict[str, str]) -> datetime | None:
    raw = tags.get(MARK_TAG_KEY)
    if not raw:
        return None
    try:
        parsed: datetime = to_datetime(raw)
    except ValueError:
        return None  # a hand-edited, unreadable mark restarts the grace period
    return parsed


def decide(finding: Finding, policy: Policy, now: datetime) -> Decision:
    """The one decision for one finding."""

    def decision(action: Action, note: str, stop_after: datetime | None = None) -> Decision:
        return Decision(
            action=action,
            reason=finding.reason,
            finding=finding,
            dry_run=policy.dry_run,
            note=note,
            decided_at=now,
            stop_after=stop_after,
        )

    resource = finding.resource
    if finding.cancels_mark:
        return decision(Action.UNMARK, "working again: the pending stop is cancelled")
    if not finding.remediable:
        return decision(Action.NOTIFY, "costguard reports this finding and never acts on it")
    if is_protected(resource.tags, policy.protect_tag_key):
        return decision(Action.NOTIFY, f"protected by tag {policy.protect_tag_key}: never stopped")
    if resource.stop_blocker:
        return decision(Action.NOTIFY, f"not stopped: {resource.stop_blocker}")
    mark = marked_at(resource.tags)
    if mark is None:
        return decision(
            Action.MARK,
            f"marked now; stopped after a {_minutes(policy.grace)} grace period",
            now + policy.grace,
        )
    due = mark + policy.grace
    if now < due:
        return decision(Action.NONE, f"in its grace period until {due.isoformat()}", due)
    return decision(Action.STOP, f"grace period over since {due.isoformat()}", due)


def decide_all(findings: Iterable[Finding], policy: Policy, now: datetime) -> list[Decision]:
    """Decide each finding, then hold stops beyond the cap back to a notification, costliest first."""
    decisions = [decide(finding, policy, now) for finding in findings]
    stops = sorted(
        (d for d in decisions if d.action is Action.STOP), key=lambda d: d.hourly_usd or 0.0, reverse=True
    )
    over_cap = {id(d) for d in stops[policy.max_stops :]}
    return [
        d.model_copy(
            update={
                "action": Action.NOTIFY,
                "note": f"stop cap of {policy.max_stops} per run reached: not stopped",
            }
        )
        if id(d) in over_cap
        else d
        for d in decisions
    ]


def _minutes(delta: timedelta) -> str:
    return f"{int(delta.total_seconds() // 60)}-minute"
