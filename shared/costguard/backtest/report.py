"""Backtest reports: the JSON document (stable schema), the self-contained HTML page and the terminal text."""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from costguard.backtest.history import Subject, SubjectKind
from costguard.backtest.walk import Outcome, Result
from costguard.backtest.widen import WidenRow, widen_table

# Bumped whenever a field changes meaning or goes away; new fields may appear without a bump.
SCHEMA_VERSION = 1
TIMELINE_POINTS = 600  # per resource in the HTML page: the busiest GPU per slot, so no spike is lost


@dataclass(frozen=True)
class SweepRow:
    idle_percent: float
    idle_window_minutes: int
    grace_minutes: int
    result: Result

    def as_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "idle_threshold_percent": self.idle_percent,
            "idle_window_minutes": self.idle_window_minutes,
            "grace_minutes": self.grace_minutes,
            "reclaimable_usd": r.reclaimable_usd,
            "unclaimed_idle_usd": r.unclaimed_usd,
            "idle_usd": r.idle_usd,
            "stops": r.stops,
            "near_misses": r.near_misses,
            "notices_by_reason": r.notices,
        }


def _name(subject: Subject) -> str | None:
    return subject.resource.tags.get("Name")


def totals(result: Result) -> dict[str, Any]:
    unpriced = sum(1 for o in result.outcomes for e in o.events if e.action == "stop" and e.saved_usd is None)
    return {
        "resources": len(result.outcomes),
        "reclaimable_usd": result.reclaimable_usd,
        "unclaimed_idle_usd": result.unclaimed_usd,
        "idle_usd": result.idle_usd,
        "stops": result.stops,
        "near_misses": result.near_misses,
        "stops_with_unknown_price": unpriced,
        # Stops remediate would have made that the deployed ReasonModes or RemediateScope hold (told, not made).
        "held_by_reason": result.held,
        "reason_modes": result.params.reason_modes,
        "remediate_scope": result.params.remediate_scope,
        "notices_by_reason": result.notices,
        "findings_by_reason": result.findings,
    } | ({"labelled": labelled.as_json()} if (labelled := result.labelled) is not None else {})


def resource_json(outcome: Outcome) -> dict[str, Any]:
    s = outcome.subject
    return {
        "id": s.id,
        "kind": s.kind.value,
        "name": _name(s),
        "instance_type": s.instance_type,
        "instances": s.instances,
        "hourly_usd": s.hourly_usd,
        "price_source": s.price.source if s.price else "unknown",
        "running_hours": round(outcome.running_hours, 2),
        "idle_usd": round(outcome.idle_usd, 2),
        "saved_usd": round(outcome.saved_usd, 2),
        "unclaimed_idle_usd": round(outcome.unclaimed_usd, 2),
        "stops": outcome.stops,
        "near_misses": outcome.near_misses,
        "held_by_reason": dict(sorted(outcome.held.items())),
        "notices_by_reason": dict(sorted(outcome.notices.items())),
        "findings_by_reason": dict(sorted(outcome.findings.items())),
        "decisions": [e.as_json() for e in outcome.events],
    }


def as_json(
    result: Result, sweep: list[SweepRow] | None = None, api_calls: dict[str, int] | None = None
) -> dict[str, Any]:
    h = result.history
    return {
        "schema_version": SCHEMA_VERSION,
        "source": h.source,
        "period": {
            "start": h.start.isoformat(),
            "end": h.end.isoformat(),
            "step_minutes": int(h.step.total_seconds() // 60),
        },
        "settings": result.params.as_json(),
        "totals": totals(result),
        "resources": [resource_json(o) for o in result.outcomes],
        "sweep": [row.as_json() for row in sweep or []],
        "api_calls": api_calls or {},
    }


# -- terminal -------------------------------------------------------------------------------------


def sweep_table(rows: list[SweepRow]) -> str:
    lines = [
        f"{'idle %':>7} {'window':>7} {'grace':>6} {'idle $':>12} {'saved $':>12} {'unclaimed $':>12} "
        f"{'stops':>6} {'near-misses':>11}"
    ]
    for row in rows:
        r = row.result
        lines.append(
            f"{row.idle_percent:>7g} {row.idle_window_minutes:>6}m {row.grace_minutes:>5}m {r.idle_usd:>12,.2f} "
            f"{r.reclaimable_usd:>12,.2f} {r.unclaimed_usd:>12,.2f} {r.stops:>6} {r.near_misses:>11}"
        )
    return "\n".join(lines)


def notices_line(counts: dict[str, int]) -> str:
    """``gpu_idle 12, gpu_starved 3``: the notices by reason, most first."""
    return ", ".join(f"{reason} {count}" for reason, count in counts.items()) or "none"


def as_text(
    result: Result,
    sweep: list[SweepRow] | None = None,
    limit: int = 20,
    widened: list[WidenRow] | None = None,
) -> str:
    h, t = result.history, totals(result)
    lines = [
        f"Backtest of {h.source}, {h.start:%Y-%m-%d %H:%M} to {h.end:%Y-%m-%d %H:%M} UTC in "
        f"{int(h.step.total_seconds() // 60)}-minute steps: {t['resources']} GPU resources."
    ]
    acted = sorted(
        (o for o in result.outcomes if o.events), key=lambda o: (o.saved_usd, o.idle_usd), reverse=True
    )
    for outcome in acted[:limit]:
        s = outcome.subject
        hourly = f"${s.hourly_usd:,.2f}/h" if s.hourly_usd is not None else "price unknown"
        name = f" {_name(s)}" if _name(s) else ""
        lines.append(f"  {s.id}{name} ({s.instance_type}, {hourly})")
        for e in outcome.events:
            extra = ""
            if e.action == "stop":
                saved = f"${e.saved_usd:,.2f}" if e.saved_usd is not None else "unknown $"
                until = f"{e.stopped_until:%m-%d %H:%M}" if e.stopped_until else "?"
                extra = f" -> saves {saved} until {until} ({e.ended_by})" + (
                    "  NEAR-MISS" if e.near_miss else ""
                )
            lines.append(f"    {e.at:%m-%d %H:%M} {e.action:<7} {e.reason}{extra}")
    if len(acted) > limit:
        lines.append(f"  ... and {len(acted) - limit} more resources with decisions (see --json or --out)")
    lines.append(
        f"Totals: ${t['reclaimable_usd']:,.2f} reclaimable by {t['stops']} stops, {t['near_misses']} near-misses; "
        f"${t['idle_usd']:,.2f} of idle time, ${t['unclaimed_idle_usd']:,.2f} of it left unclaimed "
        "(window, grace, protection, caps)"
        + (
            f"; {t['stops_with_unknown_price']} stop(s) of unknown price"
            if t["stops_with_unknown_price"]
            else ""
        )
        + "."
    )
    if t["held_by_reason"] or t["reason_modes"] or t["remediate_scope"]:
        held = sum(t["held_by_reason"].values())
        lines.append(
            f"Held by ReasonModes ({t['reason_modes'] or 'none'}) and RemediateScope "
            f"({t['remediate_scope'] or 'every resource'}): {held} stop(s) told in notify instead"
            + (f" ({notices_line(t['held_by_reason'])})" if held else "")
            + "."
        )
    if (labelled := t.get("labelled")) is not None:
        lines.append(
            f"Labelled world ({result.params.idle_policy} policy): ${labelled['reclaimed_idle_usd']:,.2f} of "
            f"${labelled['reclaimable_idle_usd']:,.2f} reclaimable idle dollars reclaimed "
            f"({labelled['reclaimed_share']:.1%}), {labelled['work_stops']} stop(s) of labelled work."
        )
    lines.append(f"Notices that would have been posted, by verdict: {notices_line(t['notices_by_reason'])}.")
    if sweep:
        lines += ["", "Threshold sweep:", sweep_table(sweep)]
    if widened:
        lines += ["", "Widening remediate one step at a time (each step's RemediateScope, as deployed):"]
        lines += [widen_table(widened)]
    return "\n".join(lines)


# -- HTML -----------------------------------------------------------------------------------------

_WIDTH, _HEIGHT, _PAD = 900, 120, 4
_COLORS = {"mark": "#e69f00", "unmark": "#0072b2", "stop": "#d55e00", "notify": "#999999"}


def busiest_per_slot(subject: Subject, start: datetime, end: datetime, slots: int) -> list[float | None]:
    """The busiest GPU in each of ``slots`` equal slices of the period (per GPU for training hosts)."""
    width = (end - start) / slots
    divisor = max(1, subject.gpu_count) if subject.kind is SubjectKind.TRAINING_JOB else 1
    found: list[float | None] = [None] * slots
    for track in subject.tracks.values():
        for at, value in track.series[track.at_or_after(start) : track.at_or_after(end)]:
            slot = min(slots - 1, int((at - start) / width))
            current = found[slot]
            per_gpu = value / divisor
            found[slot] = per_gpu if current is None else max(current, per_gpu)
    return found


def timeline_svg(outcome: Outcome, result: Result) -> str:
    h = result.history
    span = (h.end - h.start).total_seconds()

    def x(at: datetime) -> float:
        return round(_PAD + (_WIDTH - 2 * _PAD) * (at - h.start).total_seconds() / span, 1)

    def y(percent: float) -> float:
        return round(_HEIGHT - _PAD - (_HEIGHT - 2 * _PAD) * percent / 100, 1)

    slots = max(1, min(TIMELINE_POINTS, int((h.end - h.start) / h.step)))
    values = busiest_per_slot(outcome.subject, h.start, h.end, slots)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_HEIGHT}" '
        f'viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img">',
        f'<rect x="0" y="0" width="{_WIDTH}" height="{_HEIGHT}" fill="#fafafa" stroke="#ddd"/>',
    ]
    for start, until in outcome.stopped:
        parts.append(
            f'<rect x="{x(start)}" y="{_PAD}" width="{max(1.0, x(until) - x(start))}" '
            f'height="{_HEIGHT - 2 * _PAD}" fill="#009e73" fill-opacity="0.15"><title>would-be stopped '
            f"{start:%m-%d %H:%M} to {until:%m-%d %H:%M}</title></rect>"
        )
    threshold = y(result.params.idle_percent)
    parts.append(
        f'<line x1="{_PAD}" x2="{_WIDTH - _PAD}" y1="{threshold}" y2="{threshold}" stroke="#aaa" '
        'stroke-dasharray="4 3"/>'
    )
    path: list[str] = []
    slot_width = (h.end - h.start) / slots
    for n, value in enumerate(values):
        if value is None:
            if path:
                parts.append(
                    f'<polyline fill="none" stroke="#333" stroke-width="1" points="{" ".join(path)}"/>'
                )
            path = []
            continue
        path.append(f"{x(h.start + slot_width * n)},{y(value)}")
    if path:
        parts.append(f'<polyline fill="none" stroke="#333" stroke-width="1" points="{" ".join(path)}"/>')
    for e in outcome.events:
        color = _COLORS.get(e.action, "#999")
        title = html.escape(f"{e.at:%Y-%m-%d %H:%M} {e.action} ({e.reason}): {e.note}")
        if e.near_miss:
            title += " - near-miss"
        cx = x(e.at)
        if e.action == "stop":
            parts.append(
                f'<line x1="{cx}" x2="{cx}" y1="{_PAD}" y2="{_HEIGHT - _PAD}" stroke="{color}" stroke-width="2">'
                f"<title>{title}</title></line>"
            )
            if e.near_miss:
                parts.append(
                    f'<text x="{cx + 3}" y="{_PAD + 12}" font-size="11" fill="{color}">near-miss</text>'
                )
        else:
            parts.append(
                f'<circle cx="{cx}" cy="{_PAD + 6}" r="4" fill="{color}"><title>{title}</title></circle>'
            )
    parts.append("</svg>")
    return "".join(parts)


def as_html(
    result: Result, sweep: list[SweepRow] | None = None, widened: list[WidenRow] | None = None
) -> str:
    h, t = result.history, totals(result)
    esc = html.escape
    rows = sorted(result.outcomes, key=lambda o: (o.saved_usd, o.idle_usd), reverse=True)
    body = [
        "<!doctype html><html><head><meta charset='utf-8'><title>costguard backtest</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse}"
        "td,th{border:1px solid #ddd;padding:4px 8px;text-align:right}th{background:#f3f3f3}"
        "td.l,th.l{text-align:left}.near{color:#d55e00;font-weight:bold}section{margin:1.5em 0}"
        ".legend span{margin-right:1em}</style></head><body>",
        f"<h1>costguard backtest</h1><p>{esc(h.source)}: {h.start:%Y-%m-%d %H:%M} to {h.end:%Y-%m-%d %H:%M} UTC, "
        f"{int(h.step.total_seconds() // 60)}-minute steps, {t['resources']} GPU resources. Idle under "
        f"{result.params.idle_percent:g}% for {int(result.params.idle_window.total_seconds() // 60)} minutes, "
        f"{int(result.params.grace.total_seconds() // 60)}-minute grace.</p>",
        "<table><tr><th class='l'>Total</th><th>Value</th></tr>"
        f"<tr><td class='l'>Reclaimable by stopping</td><td>${t['reclaimable_usd']:,.2f}</td></tr>"
        f"<tr><td class='l'>Idle time</td><td>${t['idle_usd']:,.2f}</td></tr>"
        f"<tr><td class='l'>Idle time left unclaimed</td><td>${t['unclaimed_idle_usd']:,.2f}</td></tr>"
        f"<tr><td class='l'>Would-be stops</td><td>{t['stops']}</td></tr>"
        f"<tr><td class='l'>Near-misses</td><td>{t['near_misses']}</td></tr></table>",
        "<section><h2>Notices by verdict</h2><table><tr><th class='l'>Verdict</th><th>Notices posted</th>"
        "<th>Findings</th></tr>"
        + "".join(
            f"<tr><td class='l'>{esc(reason)}</td><td>{t['notices_by_reason'].get(reason, 0)}</td>"
            f"<td>{count}</td></tr>"
            for reason, count in t["findings_by_reason"].items()
        )
        + "</table></section>",
    ]
    if sweep:
        body.append(
            "<section><h2>Threshold sweep</h2><table><tr><th>Idle %</th><th>Window (min)</th><th>Grace (min)</th>"
            "<th>Idle $</th><th>Reclaimable $</th><th>Unclaimed $</th><th>Stops</th><th>Near-misses</th></tr>"
        )
        for row in sweep:
            r = row.result
            body.append(
                f"<tr><td>{row.idle_percent:g}</td><td>{row.idle_window_minutes}</td><td>{row.grace_minutes}</td>"
                f"<td>{r.idle_usd:,.2f}</td><td>{r.reclaimable_usd:,.2f}</td><td>{r.unclaimed_usd:,.2f}</td><td>{r.stops}</td>"
                f"<td>{r.near_misses}</td></tr>"
            )
        body.append("</table></section>")
    if widened:
        body.append(
            "<section><h2>Widening remediate one step at a time</h2><table><tr><th>Step</th><th class='l'>Adds</th>"
            "<th class='l'>RemediateScope</th><th>Stops</th><th>Near-misses</th><th>Reclaimable $</th></tr>"
        )
        for step in widened:
            r = step.result
            body.append(
                f"<tr><td>{step.step}</td><td class='l'>{esc(step.added)}</td><td class='l'>{esc(step.scope or '(none)')}"
                f"</td><td>{r.stops}</td><td>{r.near_misses}</td><td>{r.reclaimable_usd:,.2f}</td></tr>"
            )
        body.append("</table></section>")
    body.append(
        "<h2>Timelines</h2><p class='legend'><span>line: busiest GPU %</span><span>dashed: idle threshold</span>"
        "<span style='color:#009e73'>shaded: would-be stopped</span><span style='color:#e69f00'>&#9679; mark</span>"
        "<span style='color:#0072b2'>&#9679; unmark</span><span style='color:#999'>&#9679; notify</span>"
        "<span style='color:#d55e00'>| stop</span></p>"
    )
    for outcome in rows:
        s = outcome.subject
        hourly = f"${s.hourly_usd:,.2f}/h" if s.hourly_usd is not None else "price unknown"
        near = (
            f" <span class='near'>{outcome.near_misses} near-miss(es)</span>" if outcome.near_misses else ""
        )
        body.append(
            f"<section><h3>{esc(s.id)}{' ' + esc(_name(s) or '') if _name(s) else ''} <small>{esc(s.kind.value)}, {esc(s.instance_type)}, {hourly}</small></h3>"
            f"<p>saved ${outcome.saved_usd:,.2f}, idle ${outcome.idle_usd:,.2f}, unclaimed "
            f"${outcome.unclaimed_usd:,.2f}{near}; notices: {esc(notices_line(dict(outcome.notices.most_common())))}"
            f"</p>{timeline_svg(outcome, result)}</section>"
        )
    body.append("</body></html>")
    return "\n".join(body)
