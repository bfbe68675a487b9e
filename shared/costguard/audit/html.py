"""The audit report as one self-contained HTML page: inline styles and SVG charts, no script, no fetches."""

from __future__ import annotations

from html import escape
from typing import Any

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#1d1d1f}
h1{font-size:1.5em;margin-bottom:.2em} h2{font-size:1.15em;margin-top:1.6em}
.totals{display:flex;gap:2em;margin:1em 0}
.total{background:#f3f5f7;border-radius:6px;padding:.6em 1em}
.total b{display:block;font-size:1.4em}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:.35em .6em;border-bottom:1px solid #e3e6ea;vertical-align:top}
th{background:#f3f5f7} td.num{text-align:right;white-space:nowrap}
.failed{color:#b00020} .muted{color:#6b7280;font-size:.9em}
"""
CHART_WIDTH = 168
CHART_HEIGHT = 28


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"${value:,.2f}"


def sparkline(points: list[float]) -> str:
    """The busiest GPU over the window (0-100%) as an inline SVG polyline."""
    if not points:
        return '<span class="muted">no data</span>'
    step = CHART_WIDTH / max(1, len(points) - 1)
    coords = " ".join(
        f"{n * step:.1f},{CHART_HEIGHT - min(100.0, max(0.0, v)) / 100 * CHART_HEIGHT:.1f}"
        for n, v in enumerate(points)
    )
    return (
        f'<svg class="chart" width="{CHART_WIDTH}" height="{CHART_HEIGHT}" viewBox="0 0 {CHART_WIDTH} '
        f'{CHART_HEIGHT}" role="img" aria-label="GPU utilization"><rect width="100%" height="100%" '
        f'fill="#f3f5f7"/><polyline fill="none" stroke="#2563eb" stroke-width="1.5" points="{coords}"/></svg>'
    )


def _finding_row(finding: dict[str, Any]) -> str:
    resource = finding["resource"]
    target = finding["recommended_type"] or "stop"
    if finding["recommended_market"] == "spot":
        target += " (spot)"
    name = resource["name"] or resource["id"]
    hourly = finding["recommended_hourly_usd"]
    after = "nothing while stopped" if finding["recommended_type"] is None else f"{_money(hourly)}/h"
    return (
        f'<tr class="finding" data-reason="{escape(finding["reason"])}" '
        f'data-saving="{finding["monthly_saving_usd"]:.2f}">'
        f"<td>{escape(name)}<div class='muted'>{escape(resource['id'])} · {escape(resource['region'])} · "
        f"{escape(resource['team'])}</div></td>"
        f"<td><code>{escape(finding['reason'])}</code><div class='muted'>{escape(finding['confidence'])} "
        f"confidence</div></td>"
        f"<td>{escape(finding['current_type'])} &times; {finding['instance_count']}"
        f"<div class='muted'>{_money(finding['current_hourly_usd'])}/h</div></td>"
        f"<td>{escape(target)}<div class='muted'>{after}</div></td>"
        f"<td class='num'>{_money(finding['monthly_saving_usd'])}</td>"
        f"<td>{sparkline(finding.get('chart') or [])}</td>"
        f"<td>{escape(finding['summary'])}</td></tr>"
    )


def _group_table(title: str, css: str, groups: dict[str, dict[str, Any]]) -> str:
    rows = "".join(
        f'<tr class="{css}"><td>{escape(name)}</td><td class="num">{g["findings"]}</td>'
        f'<td class="num">{_money(g["monthly_saving_usd"])}</td></tr>'
        for name, g in groups.items()
    )
    return (
        f"<h2>{escape(title)}</h2><table><tr><th>{escape(title.split()[-1].capitalize())}</th>"
        f"<th>Findings</th><th>Monthly saving</th></tr>{rows}</table>"
    )


def render_html(report: dict[str, Any]) -> str:
    totals = report["totals"]
    regions = "".join(
        f'<tr class="region {"failed" if r["status"] != "ok" else ""}"><td>{escape(r["region"])}</td>'
        f"<td>{escape(r['status'])}</td><td class='num'>{r['resources']}</td><td class='num'>{r['findings']}</td>"
        f"<td>{escape(str(r.get('error') or ''))} {escape(str(r.get('cause') or ''))[:300]}</td></tr>"
        for r in report["regions"]
    )
    findings = "".join(_finding_row(f) for f in report["findings"])
    failed = totals["failed_regions"]
    warning = (
        f'<p class="failed" id="failed-regions">Not audited (failed): {escape(", ".join(failed))}</p>'
        if failed
        else ""
    )
    window = report["window"]
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>costguard right-sizing audit</title>
<style>{_STYLE}</style></head><body>
<h1>Right-sizing audit</h1>
<p class="muted">Run {escape(report["run"])}, generated {escape(report["generated_at"])};
usage from {escape(window["start"])} to {escape(window["end"])} ({window["days"]:g} days).</p>
{warning}
<div class="totals">
<div class="total">Monthly saving<b id="total-saving">{_money(totals["monthly_saving_usd"])}</b></div>
<div class="total">Findings<b id="total-findings">{totals["findings"]}</b></div>
<div class="total">Resources audited<b id="total-resources">{totals["resources"]}</b></div>
<div class="total">Their monthly cost<b id="total-cost">{_money(totals["monthly_cost_usd"])}</b></div>
</div>
{_group_table("Savings by rule", "by-rule", report["by_rule"])}
{_group_table("Savings by team", "by-team", report["by_team"])}
<h2>Findings, largest saving first</h2>
<table id="findings"><tr><th>Resource</th><th>Rule</th><th>Now</th><th>Recommended</th><th>Monthly saving</th>
<th>Busiest GPU</th><th>Why</th></tr>{findings}</table>
<h2>Regions</h2>
<table id="regions"><tr><th>Region</th><th>Status</th><th>Resources</th><th>Findings</th><th>Error</th></tr>
{regions}</table>
</body></html>
"""
