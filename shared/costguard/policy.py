"""Findings to decisions: mode, protect tag, grace period and the cap on stops. Pure."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from types import MappingProxyType
from typing import Protocol

from costguard.events.common import to_datetime
from costguard.model import MARK_TAG_KEY, Action, Decision, Finding, Reason, ResourceKind, mark_reason
from costguard.observability import logger

# A protect tag counts unless its value clearly says no.
_FALSE_VALUES = {"false", "no", "0", "off"}
# "Keep running until" (a Slack button, interact/actions.py): an ISO time; before it the resource is treated
# like a protected one, after it it is judged as if the tag were not there.
SNOOZE_TAG_KEY = "costguard:snooze-until"


# What a decision that is a dry run only because of ReasonModes or RemediateScope says first (its note).
NOTIFY_ONLY = "notify only: "
_MODES = {"notify": True, "remediate": False}  # a mode's word -> whether its decisions are dry runs
# The reason costguard itself acts on each kind of resource for: what a budget escalation's mark or stop of one
# also needs in remediate, and what the mark that working again cancels was made for (when the mark says none).
OWN_REASONS = {
    ResourceKind.EC2_INSTANCE: Reason.GPU_IDLE,
    ResourceKind.NOTEBOOK: Reason.NOTEBOOK_IDLE,
    ResourceKind.TRAINING_JOB: Reason.JOB_STALLED,
    ResourceKind.CAPACITY_RESERVATION: Reason.CAPACITY_RESERVATION_IDLE,
    ResourceKind.PROVISIONED_THROUGHPUT: Reason.BEDROCK_THROUGHPUT_IDLE,
}


class PolicyError(ValueError):
    """ReasonModes or RemediateScope does not read; the text says what is wrong."""


@dataclass(frozen=True)
class TagClause:
    """One condition of RemediateScope on one tag: its value is (or, negated, is not) one of ``values``."""

    key: str
    values: frozenset[str]
    negated: bool = False

    def holds(self, tags: Mapping[str, str]) -> bool:
        return (tags.get(self.key) in self.values) is not self.negated


@dataclass(frozen=True)
class TagScope:
    """RemediateScope: the resources costguard may act on, by tag; every clause must hold."""

    clauses: tuple[TagClause, ...]
    text: str  # as written

    def covers(self, tags: Mapping[str, str]) -> bool:
        return all(clause.holds(tags) for clause in self.clauses)

    def outside(self, tags: Mapping[str, str]) -> str:
        """Why a resource with these tags is outside the scope (it is)."""
        clause = next(c for c in self.clauses if not c.holds(tags))
        value = tags.get(clause.key)
        what = f"no {clause.key} tag" if value is None else f"{clause.key}={value}"
        return f"{what} is outside RemediateScope ({self.text})"


@lru_cache(maxsize=16)
def parse_reason_modes(text: str) -> Mapping[Reason, bool]:
    """ReasonModes, ``gpu_idle=remediate,notebook_idle=notify``: each named reason's mode, as whether its decisions
    are dry runs. Empty: none named (every reason follows Mode). Raises PolicyError."""
    modes: dict[Reason, bool] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, mode = (x.strip() for x in part.partition("="))
        if not sep or not name or not mode:
            raise PolicyError(f"{part!r}: each entry is <reason code>=<notify|remediate>")
        try:
            reason = Reason(name.lower())
        except ValueError:
            raise PolicyError(
                f"{name!r} is not a reason code (docs/reasons.md, the reason catalogue)"
            ) from None
        if mode.lower() not in _MODES:
            raise PolicyError(f"{part!r}: the mode is notify or remediate, not {mode!r}")
        dry = _MODES[mode.lower()]
        if modes.get(reason, dry) is not dry:
            raise PolicyError(f"{reason.value} is named twice, with two modes")
        modes[reason] = dry
    return MappingProxyType(modes)  # shared by every policy made from the same text: read-only


@lru_cache(maxsize=16)
def parse_scope(text: str) -> TagScope | None:
    """RemediateScope, ``team=vision|nlp`` or ``team!=research`` (comma-separated clauses, all must hold; a
    resource without the tag is outside ``=`` and inside ``!=``). Empty: every resource. Raises PolicyError."""
    clauses = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        negated = "!=" in part
        key, sep, values = part.partition("!=" if negated else "=")
        key = key.strip()
        named = frozenset(v.strip() for v in values.split("|"))
        if not sep or not key or "" in named or "=" in values or "!" in key:
            raise PolicyError(
                f"{part!r}: a clause is <tag key>=<value>[|<value>...] or <tag key>!=<value>[|...]"
            )
        clauses.append(TagClause(key, named, negated))
    return (
        TagScope(tuple(clauses), ",".join(p.strip() for p in text.split(",") if p.strip()))
        if clauses
        else None
    )


def reasons_of(finding: Finding) -> tuple[Reason, ...]:
    """The reasons whose mode a decision on this finding follows: its own; for a budget escalation's mark or stop,
    budget_breach and the reason costguard acts on the resource's kind for (OWN_REASONS); for working again, the
    reason of the mark it cancels."""
    resource = finding.resource
    if finding.cancels_mark:
        try:
            return (Reason(mark_reason(resource.tags) or ""),)
        except ValueError:  # the mark says no reason (or none costguard knows): the kind's own
            return (OWN_REASONS.get(resource.kind, finding.reason),)
    if finding.reason is Reason.BUDGET_BREACH and finding.remediable and resource.kind in OWN_REASONS:
        return (Reason.BUDGET_BREACH, OWN_REASONS[resource.kind])
    return (finding.reason,)


@dataclass(frozen=True)
class Policy:
    """The user's rules for acting on findings."""

    dry_run: bool = True  # Mode: notify (dry runs) or remediate, for every reason ``modes`` does not name
    protect_tag_key: str = "costguard:protect"
    grace: timedelta = timedelta(minutes=30)
    max_stops: int = 5
    # ReasonModes: the reasons with a mode of their own (whether their decisions are dry runs).
    modes: Mapping[Reason, bool] = field(default_factory=dict)
    # RemediateScope: the resources acted on; a decision on any other is a dry run. None: every resource.
    scope: TagScope | None = None

    @property
    def graded(self) -> bool:
        """Whether acting depends on the reason or the resource (ReasonModes or RemediateScope is set)."""
        return bool(self.modes) or self.scope is not None

    @property
    def may_dry_run(self) -> bool:
        """Whether some decision can be a dry run (and so needs the shadow marks, act/shadow.py)."""
        return self.dry_run or any(self.modes.values()) or self.scope is not None

    @property
    def may_act(self) -> bool:
        """Whether some decision can act (a reason in remediate)."""
        return not self.dry_run or not all(self.modes.values())

    def remediates(self, reason: Reason) -> bool:
        """Whether this reason is in remediate (its own mode, else Mode), whatever the resource."""
        return not self.modes.get(reason, self.dry_run)

    def held_as(self, reasons: Iterable[Reason], tags: Mapping[str, str]) -> str | None:
        """Why a decision for these reasons on a resource with these tags is a dry run; None when it acts."""
        for reason in reasons:
            if reason in self.modes:
                if self.modes[reason]:
                    return f"{reason.value} is in notify (ReasonModes)"
            elif self.dry_run:
                return f"{reason.value} follows Mode (notify)"
        if self.scope is not None and not self.scope.covers(tags):
            return self.scope.outside(tags)
        return None

    def held(self, finding: Finding) -> str | None:
        """Why a decision on this finding is a dry run; None when it acts."""
        return self.held_as(reasons_of(finding), finding.resource.tags)

    def dry_run_for(self, finding: Finding) -> bool:
        """Whether a decision on this finding is a dry run: Mode, unless ReasonModes names its reason; and a
        dry run for a resource outside RemediateScope."""
        if not self.graded:
            return self.dry_run
        return self.held(finding) is not None

    def dry_run_as(self, reasons: Iterable[Reason], tags: Mapping[str, str]) -> bool:
        """Whether a decision for these reasons on a resource with these tags is a dry run (what a flow asks of
        a resource before it has findings: whose marks are kept in the state table)."""
        if not self.graded:
            return self.dry_run
        return self.held_as(reasons, tags) is not None


class PolicySettings(Protocol):
    """What a policy is read from (costguard.settings.Settings is one: the settings sit above the policy, whose
    parsers validate them)."""

    @property
    def dry_run(self) -> bool: ...
    @property
    def protect_tag_key(self) -> str: ...
    @property
    def grace_minutes(self) -> int: ...
    @property
    def max_stops_per_run(self) -> int: ...
    @property
    def reason_modes(self) -> str: ...
    @property
    def remediate_scope(self) -> str: ...


def policy_from(settings: PolicySettings) -> Policy:
    """The policy the settings describe (their values validated at start-up)."""
    return Policy(
        dry_run=settings.dry_run,
        protect_tag_key=settings.protect_tag_key,
        grace=timedelta(minutes=settings.grace_minutes),
        max_stops=settings.max_stops_per_run,
        modes=parse_reason_modes(settings.reason_modes),
        scope=parse_scope(settings.remediate_scope),
    )


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
        void = f" ({resource.mark_void})" if resource.mark_void else ""
        return (
            Action.MARK,
            f"marked now{void}; stopped after a {_minutes(policy.grace)} grace period",
            now + policy.grace,
        )
    due = mark + policy.grace
    if resource.grace_ends is not None:
        due = min(due, resource.grace_ends)
    if now < due:
        return Action.NONE, f"in its grace period until {due.isoformat()}", due
    return Action.STOP, f"grace period over since {due.isoformat()}", due


_CHANGES = (Action.MARK, Action.STOP, Action.UNMARK)


def _decision(
    finding: Finding, policy: Policy, now: datetime, action: Action, note: str, stop_after: datetime | None
) -> Decision:
    dry_run, held = policy.dry_run, None
    if policy.graded:
        # A finding whose reason is in notify, or whose resource is outside the scope, is decided as notify mode
        # decides it; a change it would make says why it is not made.
        held = policy.held(finding)
        dry_run = held is not None
        if held is not None and action in _CHANGES:
            note = f"{NOTIFY_ONLY}{held}; {note}"
    return Decision(
        action=action,
        reason=finding.reason,
        finding=finding,
        dry_run=dry_run,
        note=note,
        decided_at=now,
        stop_after=stop_after,
        held=held,
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
    for group in _by_dryness(listed, stops, policy):
        for n in group[policy.max_stops :]:
            chosen[n] = (Action.NOTIFY, held, chosen[n][2])
    return [_decision(finding, policy, now, *choice) for finding, choice in zip(listed, chosen, strict=True)]


def _by_dryness(findings: Sequence[Finding], positions: list[int], policy: Policy) -> list[list[int]]:
    """Stop positions (in order) as the groups the per-run cap counts apart: one, unless ReasonModes or
    RemediateScope makes some of them dry runs. The stops a dry run would make never take a live stop's place,
    and are capped among themselves as in notify mode."""
    if not policy.graded:
        return [positions]
    live = [n for n in positions if not policy.dry_run_for(findings[n])]
    dry = [n for n in positions if policy.dry_run_for(findings[n])]
    return [live, dry]


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
    shorten a pending stop but never start one costguard did not decide on. Refused too where the finding's
    reason is in notify or the resource outside RemediateScope: Stop now stops only what a sweep would."""
    resource = finding.resource
    held = policy.held(finding) if policy.graded else None
    if held is not None:
        note = f"not stopped: {NOTIFY_ONLY}{held}"
    elif is_protected(resource.tags, policy.protect_tag_key):
        note = f"protected by tag {policy.protect_tag_key}: never stopped"
    elif (snooze := snoozed_until(resource.tags, now)) is not None:
        note = f"kept running until {utc_text(snooze)} (snoozed): not stopped"
    elif resource.stop_blocker:
        note = f"not stopped: {resource.stop_blocker}"
    elif marked_at(resource.tags) is None:
        note = "not stopped: costguard stops only what it has marked idle, and this is not marked"
        if resource.mark_void:
            note += f" ({resource.mark_void})"
    else:
        return _decision(
            finding, policy, now, Action.STOP, "stopped now on request (grace period skipped)", now
        )
    return _decision(finding, policy, now, Action.NOTIFY, note, None)


def _costliest_first(findings: Sequence[Finding], positions: Iterable[int]) -> list[int]:
    return sorted(positions, key=lambda n: findings[n].hourly_usd or 0.0, reverse=True)


def _minutes(delta: timedelta) -> str:
    return f"{int(delta.total_seconds() // 60)}-minute"
