"""The savings ledger: what each action costguard took was worth. Pure.

One entry per action that succeeded (a stop: an instance or notebook stopped, a job stopped, a workload scaled to
zero, a throughput deleted, a reservation cancelled; a Stop now click) or, in notify mode, that it would have
taken (a dry run's stop, kept as a shadow stop): the resource, its owner and team, its account and region, why,
the hourly rate at the time, and when the resource came back (its owner started it again).

Hours kept off run from the action to the resource's return, or to now while it stays off, capped at the end of
its planned run where one is known (a training job's MaxRuntime from its start; SageMaker's default of one day
when the job set none). Dollars are hours x the rate. A resource back within NEAR_MISS of the action is a near-miss
of that action: its dollars are not a saving (the owner needed it), and are shown apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from costguard.model import Decision, ResourceKind

# Back this soon after the action: a near-miss (the backtest's horizon: one definition of a near-miss).
NEAR_MISS = timedelta(minutes=60)
# A training job that set no MaxRuntimeInSeconds runs at most SageMaker's default: one day.
DEFAULT_MAX_RUNTIME = timedelta(days=1)
NO_TEAM = "(no team)"
ACTED, WOULD = "acted", "would"  # an action taken (remediate), or one notify mode would have taken
# Kinds whose action ends the resource for good: it never comes back (a job is over once stopped, a reservation
# cancelled, a throughput deleted). Their hours run to the planned end, or to now.
NEVER_BACK = frozenset(
    k.value
    for k in (
        ResourceKind.TRAINING_JOB,
        ResourceKind.CAPACITY_RESERVATION,
        ResourceKind.PROVISIONED_THROUGHPUT,
    )
)


@dataclass(frozen=True)
class Entry:
    """One action and what it was worth."""

    id: str  # the decision's id
    at: datetime
    account: str
    region: str
    kind: str
    resource_id: str
    name: str
    team: str
    owner: str | None
    reason: str
    mode: str  # ACTED or WOULD
    hourly_usd: float | None
    planned_end: datetime | None = None
    returned_at: datetime | None = None

    @property
    def resource_key(self) -> str:
        return f"{self.account}/{self.region}/{self.kind}/{self.resource_id}"

    def off_until(self, now: datetime) -> datetime:
        """When the time kept off ends: its return (or now), never past its planned end nor before the action."""
        end = self.returned_at or now
        if self.planned_end is not None:
            end = min(end, self.planned_end)
        return max(end, self.at)

    def hours_off(self, now: datetime) -> float:
        return (self.off_until(now) - self.at).total_seconds() / 3600

    @property
    def near_miss(self) -> bool:
        return near_miss(self.at, self.returned_at)

    def dollars(self, now: datetime) -> float | None:
        """Hours kept off x the rate (None when the rate is unknown)."""
        if self.hourly_usd is None:
            return None
        return self.hourly_usd * (self.off_until(now) - self.at).total_seconds() / 3600

    def saved_usd(self, now: datetime) -> float:
        """The saving: the dollars, but none for a near-miss or an unknown rate."""
        return 0.0 if self.near_miss else self.dollars(now) or 0.0

    def returned(self, at: datetime) -> Entry:
        """Its resource came back at ``at`` (the first return counts: a later one changes nothing)."""
        return self if self.returned_at is not None else replace(self, returned_at=max(at, self.at))

    def as_json(self, now: datetime) -> dict[str, Any]:
        data = asdict(self)
        for key in ("at", "planned_end", "returned_at"):
            data[key] = data[key].isoformat() if data[key] is not None else None
        dollars = self.dollars(now)
        return data | {
            "hours_off": round(self.hours_off(now), 2),
            "dollars": round(dollars, 2) if dollars is not None else None,
            "saved_usd": round(self.saved_usd(now), 2),
            "near_miss": self.near_miss,
        }


def near_miss(at: datetime, returned_at: datetime | None, horizon: timedelta = NEAR_MISS) -> bool:
    """Back strictly within the horizon of the action (the backtest's own near-miss, with its horizon)."""
    return returned_at is not None and returned_at - at < horizon


def planned_end(decision: Decision) -> datetime | None:
    """The end of the resource's planned run, where known: a training job's start + its MaxRuntime (SageMaker's
    default of a day when it set none)."""
    resource = decision.resource
    if resource.kind is not ResourceKind.TRAINING_JOB or resource.started is None:
        return None
    hours = decision.finding.evidence.get("max_runtime_hours")
    runtime = timedelta(hours=float(hours)) if isinstance(hours, int | float) and hours > 0 else None
    return resource.started + (runtime or DEFAULT_MAX_RUNTIME)


def entry_for(decision: Decision, *, team_key: str, owner_key: str = "owner") -> Entry:
    """The entry of a stop decision carried out (or, a dry run, that would have been)."""
    resource = decision.resource
    return Entry(
        id=decision.id,
        at=decision.decided_at,
        account=resource.account,
        region=resource.region,
        kind=resource.kind.value,
        resource_id=resource.id,
        name=resource.display_name,
        team=resource.tags.get(team_key, "").strip() or NO_TEAM,
        owner=resource.tags.get(owner_key) or None,
        reason=decision.reason.value,
        mode=WOULD if decision.dry_run else ACTED,
        hourly_usd=decision.hourly_usd if resource.kind.has_own_rate else None,
        planned_end=planned_end(decision),
    )


@dataclass
class TeamTotals:
    """A team's ledger over a period: actions, the dollars saved, near-misses (and their dollars apart), and
    what is still kept off."""

    team: str
    actions: int = 0
    saved_usd: float = 0.0
    near_misses: int = 0
    near_miss_usd: float = 0.0
    still_off: int = 0
    unknown_rate: int = 0
    top: list[Entry] = field(default_factory=list)


def totals(entries: Iterable[Entry], now: datetime, *, top: int = 5) -> list[TeamTotals]:
    """Per team (most saved first): its actions, saving, near-misses, still-off count and top entries."""
    teams: dict[str, TeamTotals] = {}
    for entry in entries:
        t = teams.setdefault(entry.team, TeamTotals(entry.team))
        t.actions += 1
        t.saved_usd += entry.saved_usd(now)
        if entry.near_miss:
            t.near_misses += 1
            t.near_miss_usd += entry.dollars(now) or 0.0
        t.still_off += entry.kind not in NEVER_BACK and entry.returned_at is None
        t.unknown_rate += entry.hourly_usd is None
        t.top.append(entry)
    for t in teams.values():
        t.top = sorted(t.top, key=lambda e: e.saved_usd(now), reverse=True)[:top]
    return sorted(teams.values(), key=lambda t: (-t.saved_usd, t.team))


CSV_FIELDS = (
    "at",
    "mode",
    "team",
    "owner",
    "account",
    "region",
    "kind",
    "resource_id",
    "name",
    "reason",
    "hourly_usd",
    "returned_at",
    "planned_end",
    "hours_off",
    "dollars",
    "saved_usd",
    "near_miss",
)


def csv_rows(entries: Sequence[Entry], now: datetime) -> list[dict[str, Any]]:
    """One row per action (CSV_FIELDS)."""
    return [{k: e.as_json(now)[k] for k in CSV_FIELDS} for e in entries]


def _money(value: float | None) -> str:
    return "rate unknown" if value is None else f"${value:,.2f}"


def render(entries: Sequence[Entry], now: datetime, *, title: str = "Savings ledger") -> str:
    """The ledger as text: each action (its rate, hours kept off so far, dollars), then per team."""
    if not entries:
        return f"{title}: no action yet."
    lines = [f"{title} at {now:%Y-%m-%d %H:%M} UTC ({len(entries)} action(s)):"]
    for e in sorted(entries, key=lambda e: e.at):
        rate = f"{_money(e.hourly_usd)}/h" if e.hourly_usd is not None else "rate unknown"
        back = (
            f"back {e.returned_at:%m-%d %H:%M}"
            if e.returned_at
            else "ended for good"
            if e.kind in NEVER_BACK
            else "still off"
        )
        verdict = "NEAR-MISS, not a saving" if e.near_miss else f"saved {_money(e.saved_usd(now))}"
        lines.append(
            f"  {e.at:%m-%d %H:%M} {'would stop' if e.mode == WOULD else 'stopped':<10} {e.name} ({e.kind}, "
            f"{e.team}) for {e.reason}: {rate}, {e.hours_off(now):.1f} h off ({back}), {verdict}"
        )
    for t in totals(entries, now):
        lines.append(
            f"  team {t.team}: {t.actions} action(s), {_money(t.saved_usd)} saved, {t.near_misses} near-miss(es)"
            + (f" ({_money(t.near_miss_usd)} not counted)" if t.near_misses else "")
            + f", {t.still_off} still off"
        )
    return "\n".join(lines)
