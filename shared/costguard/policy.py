"""Findings to decisions: mode, protect tag, grace period and the cap on stops. Pure."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache

from costguard.events.common import to_datetime
from costguard.model import MARK_TAG_KEY, Action, Decision, Finding
from costguard.observability import logger

# A protect tag counts unless its value clearly says no.
_FALSE_VALUES = {"false", "no", "0", "off"}
# "Keep running until" (a Slack button, interact/actions.py): an ISO time; before it the resource is treated
# like a protected one, after it it is judged as if the tag were not there.
SNOOZE_TAG_KEY = "costguard:snooze-until"


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
    return _parse_mark(raw)


@lru_cache(maxsize=4096)
def _parse_mark(raw: str) -> datetime | None:
    # Cached: a marked resource is decided on at every sweep until its stop (and at every step of a
    # backtest), always with the same mark; a datetime is immutable, so sharing one is safe.
    try:
        # The moment is the value's first word: a training job's mark may say why after it (model.mark_text).
        parsed: datetime = to_datetime(raw.split(maxsplit=1)[0] if raw.strip() else raw)
    except ValueError:
        return None  # a hand-edited, unreadable mark restarts the grace period
    return parsed


def snoozed_until(tags: dict[str, str], now: datetime) -> datetime | None:
    """When a snooze (tag costguard:snooze-until) still in force ends; None when there is none, it has
    ended, or its value cannot be read (logged: a hand-edited tag must not silently keep a resource)."""
    raw = tags.get(SNOOZE_TAG_KEY)
    if not raw:
        return None
    until = _parse_snooze(raw)
    if until is None:
        logger.warning("unreadable snooze tag ignored", extra={"tag": SNOOZE_TAG_KEY, "value": raw[:64]})
        return None
    return until if now < until else None


@lru_cache(maxsize=4096)
def _parse_snooze(raw: str) -> datetime | None:
    try:
        parsed: datetime = to_datetime(raw)
    except ValueError:
        return None
    return parsed


def utc_text(at: datetime) -> str:
    """A time as messages say it: 2026-11-21 12:00 UTC."""
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def decide(finding: Finding, policy: Policy, now: datetime) -> Decision:
    """The one decision for one finding."""
    return _decision(finding, policy, now, *_choose(finding, policy, now))


def waits_out_grace(findings: Sequence[Finding], policy: Policy, now: datetime) -> bool:
    """Whether every one of these findings is decided by waiting: a marked resource in its grace period, of
    which nothing is said or done until its stop is due."""
    return bool(findings) and all(_choose(f, policy, now)[0] is Action.NONE for f in findings)


def _choose(finding: Finding, policy: Policy, now: datetime) -> tuple[Action, str, datetime | None]:
    """The action for one finding, with its note and, for a mark or a stop, when the stop is due."""
    resource = finding.resource
    if finding.cancels_mark:
        return Action.UNMARK, "working again: the pending stop is cancelled", None
    if not finding.remediable:
        return (
            Action.NOTIFY,
            finding.report_note or "costguard reports this finding and never acts on it",
            None,
        )
    if is_protected(resource.tags, policy.protect_tag_key):
        return Action.NOTIFY, f"protected by tag {policy.protect_tag_key}: never stopped", None
    snooze = snoozed_until(resource.tags, now)
    if snooze is not None:
        return Action.NOTIFY, f"kept running until {utc_text(snooze)} (snoozed)", None
    if resource.stop_blocker:
        return Action.NOTIFY, f"not stopped: {resource.stop_blocker}", None
    mark = marked_at(resource.tags)
    if mark is None:
        return (
            Action.MARK,
            f"marked now; stopped after a {_minutes(policy.grace)} grace period",
            now + policy.grace,
        )
    due = mark + policy.grace
    if now < due:
        return Action.NONE, f"in its grace period until {due.isoformat()}", due
    return Action.STOP, f"grace period over since {due.isoformat()}", due


def _decision(
    finding: Finding, policy: Policy, now: datetime, action: Action, note: str, stop_after: datetime | None
) -> Decision:
    return Decision(
        action=action,
        reason=finding.reason,
        finding=finding,
        dry_run=policy.dry_run,
        note=note,
        decided_at=now,
        stop_after=stop_after,
    )


def decide_all(
    findings: Iterable[Finding], policy: Policy, now: datetime, stopped: Collection[str] = ()
) -> list[Decision]:
    """Decide each finding, then hold stops beyond the cap back to a notification, costliest first.

    ``stopped``: the keys of resources a dry run has already decided to stop (act/shadow.py). A live run would
    have stopped them then, and would not see them now: their stops, decided again, take no place under the cap.
    """
    listed = list(findings)
    # Each action chosen first, each decision then built once: with many instances waiting on the cap,
    # building their stops only to copy each into a notification was much of the cost of a sweep (and of
    # every step of a backtest).
    chosen = [_choose(finding, policy, now) for finding in listed]
    stops = _costliest_first(
        listed,
        (
            n
            for n, (action, _, _) in enumerate(chosen)
            if action is Action.STOP and listed[n].resource.key not in stopped
        ),
    )
    held = f"stop cap of {policy.max_stops} per run reached: not stopped"
    for n in stops[policy.max_stops :]:
        chosen[n] = (Action.NOTIFY, held, chosen[n][2])
    return [_decision(finding, policy, now, *choice) for finding, choice in zip(listed, chosen, strict=True)]


def stop_candidates(
    findings: Sequence[Finding], policy: Policy, now: datetime, stopped: Collection[str] = ()
) -> list[int]:
    """The positions of the findings whose decision would be a stop, costliest first: the order in which
    ``decide_all`` gives out the per-run cap (those of ``stopped`` left out, as there). What only AWS can tell
    about a stop (EC2 stop protection) is read for these before deciding (pipeline.with_stop_blockers), and the
    stop is then decided with it."""
    return _costliest_first(
        findings,
        (
            n
            for n, finding in enumerate(findings)
            if _choose(finding, policy, now)[0] is Action.STOP and finding.resource.key not in stopped
        ),
    )


def decide_requested_stop(finding: Finding, policy: Policy, now: datetime) -> Decision:
    """A person's "Stop now" (Slack, interact/actions.py): the grace period skipped, every other rule kept.

    Refused (a notification saying why) for a protected, snoozed or stop-blocked resource, and for one
    costguard has not marked: its role may stop only what carries the mark (template.yaml), so a button can
    shorten a pending stop but never start one costguard did not decide on."""
    resource = finding.resource
    if is_protected(resource.tags, policy.protect_tag_key):
        note = f"protected by tag {policy.protect_tag_key}: never stopped"
    elif (snooze := snoozed_until(resource.tags, now)) is not None:
        note = f"kept running until {utc_text(snooze)} (snoozed): not stopped"
    elif resource.stop_blocker:
        note = f"not stopped: {resource.stop_blocker}"
    elif marked_at(resource.tags) is None:
        note = "not stopped: costguard stops only what it has marked idle, and this is not marked"
    else:
        return _decision(
            finding, policy, now, Action.STOP, "stopped now on request (grace period skipped)", now
        )
    return _decision(finding, policy, now, Action.NOTIFY, note, None)


def _costliest_first(findings: Sequence[Finding], positions: Iterable[int]) -> list[int]:
    return sorted(positions, key=lambda n: findings[n].hourly_usd or 0.0, reverse=True)


def _minutes(delta: timedelta) -> str:
    return f"{int(delta.total_seconds() // 60)}-minute"
