"""The savings ledger where people look: each team's week in its own channel, the deployment's day in the default
one, and the figures the ledger's metrics carry. Pure: entries in (ledger.Entry), findings and figures out.

- **A team's week** (``ledger_weekly``, one finding per team, routed by the team's routing tag to its channel, a
  message of its own): the actions of the week before the report (Monday 00:00 UTC to Monday 00:00), what they
  kept off so far, their near-misses (back within the hour: not a saving, shown apart), the top resources, and
  what is still burning: the would-be stops of notify mode whose resources still run idle, at their rates.
- **The day** (``ledger_daily``, one finding, no team tag: the default channel): yesterday's actions in one line,
  with the week so far. Nothing to say (no action in the week), no message.

Every saving is ledger.Entry's: hours kept off to the return (or now), capped at the planned end, x the rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from costguard.ledger import ACTED, NEVER_BACK, NO_TEAM, WOULD, Entry
from costguard.model import Finding, Reason, Resource, ResourceKind

# Said in place of "no action": a report, from costguard's own record of its stops.
NOTE = "A report from the savings ledger: costguard's own record of what its stops kept off the bill"

WEEK = timedelta(days=7)
TOP = 5  # resources named in a team's week
REPORT_WEEKDAY = 0  # the weekly reports go with the first run of a Monday (UTC)


def week_start(at: datetime) -> datetime:
    """The Monday 00:00 UTC of ``at``'s week."""
    day = at.astimezone(UTC).date()
    return datetime.combine(day - timedelta(days=day.weekday()), datetime.min.time(), UTC)


def day_start(at: datetime) -> datetime:
    return datetime.combine(at.astimezone(UTC).date(), datetime.min.time(), UTC)


def _money(value: float) -> str:
    return f"${value:,.2f}"


@dataclass(frozen=True)
class Figures:
    """One mode's figures over a set of entries, as of ``now``."""

    actions: int
    saved_usd: float
    near_misses: int
    near_miss_usd: float
    unknown_rate: int

    @classmethod
    def of(cls, entries: Sequence[Entry], now: datetime) -> Figures:
        misses = [e for e in entries if e.near_miss]
        return cls(
            actions=len(entries),
            saved_usd=round(sum(e.saved_usd(now) for e in entries), 2),
            near_misses=len(misses),
            near_miss_usd=round(sum(e.dollars(now) or 0.0 for e in misses), 2),
            unknown_rate=sum(e.hourly_usd is None for e in entries),
        )

    def sentence(self, verb: str) -> str:
        text = f"{self.actions} {verb} kept {_money(self.saved_usd)} off the bill so far"
        if self.near_misses:
            text += f"; {self.near_misses} near-miss(es) ({_money(self.near_miss_usd)}, not counted)"
        if self.unknown_rate:
            text += f"; {self.unknown_rate} at a rate costguard did not know (not counted)"
        return text


def still_burning(entries: Sequence[Entry]) -> list[Entry]:
    """The would-be stops still open: resources notify mode would have stopped, still idle, still billing."""
    return [e for e in entries if e.mode == WOULD and e.returned_at is None and e.kind not in NEVER_BACK]


def _resource(id_: str, name: str, account: str, region: str, tags: dict[str, str] | None = None) -> Resource:
    return Resource(
        kind=ResourceKind.SAVINGS_LEDGER, id=id_, name=name, account=account, region=region, tags=tags or {}
    )


def _line(entry: Entry, now: datetime) -> str:
    verb = "would stop" if entry.mode == WOULD else "stopped"
    worth = (
        f"near-miss, back at {entry.returned_at:%a %H:%M}"
        if entry.near_miss and entry.returned_at
        else f"{_money(entry.saved_usd(now))} over {entry.hours_off(now):.1f} h"
    )
    return f"{entry.name} ({entry.kind}, {entry.reason}) {verb} {entry.at:%a %H:%M}: {worth}"


def team_week(
    team: str,
    entries: Sequence[Entry],
    burning: Sequence[Entry],
    *,
    start: datetime,
    now: datetime,
    account: str,
    region: str,
    team_key: str,
    event_id: str | None = None,
) -> Finding:
    """One team's week: ``entries`` are its actions of the week, ``burning`` its would-be stops still open (of
    any week)."""
    acted = Figures.of([e for e in entries if e.mode == ACTED], now)
    would = Figures.of([e for e in entries if e.mode == WOULD], now)
    week = f"{start:%Y-%m-%d}"
    parts = []
    if acted.actions:
        parts.append(acted.sentence("stop(s)"))
    if would.actions:
        parts.append(would.sentence("stop(s) notify mode held back would have"))
    if not parts:
        parts.append("no action this week")
    rate = sum(e.hourly_usd or 0.0 for e in burning)
    summary = f"Team {team}, week of {week}: " + "; ".join(parts) + "."
    if burning:
        summary += f" Still burning: {len(burning)} idle resource(s) remediate would stop, {_money(rate)}/h."
    top = sorted(entries, key=lambda e: (-e.saved_usd(now), e.name))[:TOP]
    return Finding(
        reason=Reason.LEDGER_WEEKLY,
        resource=_resource(
            f"ledger-week-{week}-{team}"[:900],
            f"Savings ledger of {team}, week of {week}",
            account,
            region,
            {team_key: team} if team != NO_TEAM else {},
        ),
        summary=summary,
        observed_at=now,
        event_id=event_id,
        cost_usd=acted.saved_usd if acted.actions else would.saved_usd,
        report_note=NOTE,
        evidence={
            "team": team,
            "week_of": week,
            "stops": acted.actions,
            "saved_usd": acted.saved_usd,
            "would_be_stops": would.actions,
            "would_have_saved_usd": would.saved_usd,
            "near_misses": acted.near_misses + would.near_misses,
            "near_miss_usd": round(acted.near_miss_usd + would.near_miss_usd, 2),
            "top_resources": [_line(e, now) for e in top],
            "still_burning": [
                f"{e.name} ({e.kind}): {_money(e.hourly_usd) + '/h' if e.hourly_usd is not None else 'rate unknown'}"
                for e in sorted(burning, key=lambda e: -(e.hourly_usd or 0.0))[:TOP]
            ],
            "still_burning_usd_per_hour": round(rate, 2),
        },
    )


def weekly_findings(
    entries: Sequence[Entry],
    open_would: Sequence[Entry],
    *,
    now: datetime,
    account: str,
    region: str,
    team_key: str,
    event_id: str | None = None,
) -> list[Finding]:
    """A report per team with an action in the week before ``now``'s (or a would-be stop still burning)."""
    end = week_start(now)
    start = end - WEEK
    week = [e for e in entries if start <= e.at < end]
    teams = sorted({e.team for e in week} | {e.team for e in open_would})
    return [
        team_week(
            team,
            [e for e in week if e.team == team],
            [e for e in open_would if e.team == team],
            start=start,
            now=now,
            account=account,
            region=region,
            team_key=team_key,
            event_id=event_id,
        )
        for team in teams
    ]


def daily_finding(
    entries: Sequence[Entry],
    *,
    now: datetime,
    account: str,
    region: str,
    event_id: str | None = None,
) -> Finding | None:
    """Yesterday's line, with the week so far (Monday to now); None when the week has no action."""
    today = day_start(now)
    yesterday = today - timedelta(days=1)
    day: date = yesterday.date()
    since = week_start(yesterday)
    week = [e for e in entries if since <= e.at < today]
    if not week:
        return None
    of_day = [e for e in week if e.at >= yesterday]
    acted = Figures.of([e for e in of_day if e.mode == ACTED], now)
    would = Figures.of([e for e in of_day if e.mode == WOULD], now)
    so_far = Figures.of([e for e in week if e.mode == ACTED], now)
    would_so_far = Figures.of([e for e in week if e.mode == WOULD], now)
    line = f"{day:%a %Y-%m-%d}: " + (
        "; ".join(
            [
                p
                for p in (
                    acted.sentence("stop(s)") if acted.actions else "",
                    would.sentence("stop(s) notify mode held back would have") if would.actions else "",
                )
                if p
            ]
        )
        or "no action"
    )
    line += f". Week so far: {_money(so_far.saved_usd)} saved"
    if would_so_far.actions:
        line += f", {_money(would_so_far.saved_usd)} remediate would have saved"
    return Finding(
        reason=Reason.LEDGER_DAILY,
        resource=_resource(
            f"ledger-day-{day.isoformat()}", f"Savings ledger, {day.isoformat()}", account, region
        ),
        summary=line + ".",
        observed_at=now,
        event_id=event_id,
        cost_usd=acted.saved_usd if acted.actions else would.saved_usd,
        report_note=NOTE,
        evidence={
            "day": day.isoformat(),
            "stops": acted.actions,
            "saved_usd": acted.saved_usd,
            "would_be_stops": would.actions,
            "would_have_saved_usd": would.saved_usd,
            "near_misses": acted.near_misses + would.near_misses,
            "week_saved_usd": so_far.saved_usd,
        },
    )


def day_figures(entries: Sequence[Entry], now: datetime) -> dict[str, dict[str, float]]:
    """Yesterday's figures per mode, as the ledger's metrics carry them: actions, dollars saved, near-misses."""
    yesterday = day_start(now) - timedelta(days=1)
    of_day = [e for e in entries if yesterday <= e.at < day_start(now)]
    out = {}
    for mode in (ACTED, WOULD):
        figures = Figures.of([e for e in of_day if e.mode == mode], now)
        out[mode] = {
            "LedgerActions": float(figures.actions),
            "LedgerSavedUsd": figures.saved_usd,
            "LedgerNearMisses": float(figures.near_misses),
        }
    return out
