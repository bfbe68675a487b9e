"""The audit report as one self-contained HTML page: inline styles and SVG charts, no script, no fetches (its
links to the AWS console are links: nothing is loaded from them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from html import escape
from typing import Any

from costguard.audit.holdings_html import holdings_html
from costguard.audit.html_finance import (
    SORT_STYLE,
    comparison_html,
    cost_box,
    headline,
    legend,
    linked,
    money,
    money_and_unknown,
    sort_ranks,
    sorter,
    tier_line,
)
from costguard.audit.report import failed_items

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#1d1d1f}
h1{font-size:1.5em;margin-bottom:.2em} h2{font-size:1.15em;margin-top:1.6em}
.totals{display:flex;flex-wrap:wrap;gap:1.2em;margin:1em 0}
.total{background:#f3f5f7;border-radius:6px;padding:.6em 1em}
.total b{display:block;font-size:1.4em}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:.35em .6em;border-bottom:1px solid #e3e6ea;vertical-align:top}
th{background:#f3f5f7} th.num,td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
.failed{color:#b00020} .muted{color:#6b7280;font-size:.9em}
.risk-low{color:#166534} .risk-medium{color:#92400e} .risk-high{color:#b00020}
svg.chart text{font:9px system-ui,sans-serif;fill:#6b7280}
"""
CHART_WIDTH = 240
CHART_HEIGHT = 64
PLOT_LEFT = 24  # room for the y labels
PLOT_BOTTOM = 12  # room for the dates
THRESHOLD_PERCENT = 80.0


def _money(value: float | None) -> str:
    return money(value)


def _moment(value: str | datetime | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def when(value: str | datetime | None) -> str:
    """An instant as a person reads it: "20 Nov 2026 12:00 UTC"."""
    moment = _moment(value)
    if moment is None:
        return escape(str(value or ""))
    moment = moment.astimezone(UTC)
    return f"{moment.day} {moment:%b %Y %H:%M} UTC"


def _day(moment: datetime) -> str:
    moment = moment.astimezone(UTC)
    return f"{moment.day} {moment:%b}"


def sparkline(
    points: list[float | None],
    start: str | datetime | None = None,
    step_hours: float = 6,
    threshold: float = THRESHOLD_PERCENT,
) -> str:
    """The busiest GPU over the window (0-100%) as an inline SVG chart: a time axis with dates under it, the
    0 and 100% marks, and the threshold (the highest projected utilization the audit recommends) dashed. A None
    point (no data: before the resource was launched, or a gap) is drawn as nothing, never as 0%."""
    if all(v is None for v in points):
        return '<span class="muted">no data</span>'
    plot_w = CHART_WIDTH - PLOT_LEFT - 2
    plot_h = CHART_HEIGHT - PLOT_BOTTOM - 2
    step = plot_w / max(1, len(points) - 1)

    def y(percent: float) -> float:
        return 1 + plot_h - min(100.0, max(0.0, percent)) / 100 * plot_h

    # One line per run of points with data; a point with no neighbour is a dot.
    runs: list[list[tuple[float, float]]] = [[]]
    for n, v in enumerate(points):
        if v is None:
            runs.append([])
        else:
            runs[-1].append((PLOT_LEFT + n * step, y(v)))
    lines = [
        '<polyline fill="none" stroke="#2563eb" stroke-width="1.5" points="'
        + " ".join(f"{x:.1f},{v:.1f}" for x, v in run)
        + '"/>'
        if len(run) > 1
        else f'<circle cx="{run[0][0]:.1f}" cy="{run[0][1]:.1f}" r="1.5" fill="#2563eb"/>'
        for run in runs
        if run
    ]
    parts = [
        f'<svg class="chart" width="{CHART_WIDTH}" height="{CHART_HEIGHT}" viewBox="0 0 {CHART_WIDTH} '
        f'{CHART_HEIGHT}" role="img" aria-label="busiest GPU utilization over the window, percent">',
        f'<rect x="{PLOT_LEFT}" y="1" width="{plot_w}" height="{plot_h}" fill="#f3f5f7"/>',
        f'<text x="{PLOT_LEFT - 3}" y="{y(0):.1f}" text-anchor="end">0</text>',
        f'<line class="threshold" x1="{PLOT_LEFT}" x2="{PLOT_LEFT + plot_w}" y1="{y(threshold):.1f}" '
        f'y2="{y(threshold):.1f}" stroke="#b00020" stroke-width="1" stroke-dasharray="3,2"/>',
        f'<text x="{PLOT_LEFT - 3}" y="{y(threshold) + 3:.1f}" text-anchor="end" fill="#b00020">'
        f"{threshold:g}%</text>",
        *lines,
    ]
    first = _moment(start)
    if first is not None:
        last = first + timedelta(hours=step_hours * (len(points) - 1))
        middle = first + (last - first) / 2
        base = CHART_HEIGHT - 2
        parts += [
            f'<text class="axis" x="{PLOT_LEFT}" y="{base}" text-anchor="start">{_day(first)}</text>',
            f'<text class="axis" x="{PLOT_LEFT + plot_w / 2:.1f}" y="{base}" text-anchor="middle">'
            f"{_day(middle)}</text>",
            f'<text class="axis" x="{PLOT_LEFT + plot_w}" y="{base}" text-anchor="end">{_day(last)}</text>',
        ]
    parts.append("</svg>")
    return "".join(parts)


def _risk(finding: dict[str, Any]) -> str:
    risk = str(finding.get("risk") or "high")
    projected = finding.get("projected_gpu_p95_percent")
    if finding.get("recommended_type") is None:
        shown = "none: stopped"
    elif projected is None:
        shown = "unknown"
    else:
        shown = f"{projected:g}%"
    basis = finding.get("projection_basis") or ""
    return (
        f"<td class='num'>{escape(shown)}<div class='risk-{escape(risk)}'>{escape(risk)} risk</div>"
        f"<div class='muted'>{escape(basis)}</div></td>"
    )


def _finding_row(
    finding: dict[str, Any],
    window_start: str | None,
    accounts: dict[str, str] | None = None,
    ranks: str = "",
) -> str:
    """One finding; ``accounts`` (id -> label) when the report covers several, to say whose it is; ``ranks``:
    its place under each sort key (CSS custom properties)."""
    resource = finding["resource"]
    where = escape(resource["region"])
    if accounts is not None:
        account = str(resource.get("account") or "")
        where = f"{escape(accounts.get(account, account))} · {where}"
    target = finding["recommended_type"] or "stop"
    if finding["recommended_market"] == "spot":
        target += " (spot)"
    name = resource["name"] or resource["id"]
    hourly = finding["recommended_hourly_usd"]
    after = "nothing while stopped" if finding["recommended_type"] is None else f"{_money(hourly)}/h"
    chart = sparkline(
        finding.get("chart") or [],
        finding.get("chart_start") or window_start,
        float(finding.get("chart_step_hours") or 6),
    )
    saving = finding["monthly_saving_usd"]
    return (
        f'<tr class="finding" data-reason="{escape(finding["reason"])}" '
        f'data-saving="{"" if saving is None else f"{saving:.2f}"}" data-tier="{escape(str(finding.get("tier")))}"'
        f' style="{ranks}">'
        f"<td>{linked(escape(name), finding.get('console_url'))}<div class='muted'>{escape(resource['id'])} · "
        f"{where} · {escape(resource['team'])}</div></td>"
        f"<td><code>{escape(finding['reason'])}</code><div class='muted'>{escape(finding['confidence'])} "
        f"confidence</div>{tier_line(finding)}</td>"
        f"<td>{escape(finding['current_type'])} &times; {finding['instance_count']}"
        f"<div class='muted'>{_money(finding['current_hourly_usd'])}"
        f"{'' if finding['current_hourly_usd'] is None else '/h'}</div></td>"
        f"<td>{escape(target)}<div class='muted'>{after}</div></td>"
        f"{_risk(finding)}"
        f"<td class='num'>{_money(saving)}<div class='muted'>{_basis(finding)}</div></td>"
        f"<td>{chart}</td>"
        f"<td>{escape(finding['summary'])}</td></tr>"
    )


def _basis(row: dict[str, Any]) -> str:
    """The hours a figure is over: a month, or the hours it ran in the window (jobs, what did not run all of it)."""
    if row.get("cost_basis", "month") == "month":
        return "a month"
    return f"spent in {row.get('cost_hours') or 0:g} h run"


def _per_1000(value: float | None, row: dict[str, Any]) -> str:
    if value is not None:
        return f"${value:,.4f}"
    return "unknown" if row.get("hourly_usd") is None else "no requests"


def _endpoint_row(row: dict[str, Any]) -> str:
    fit = row.get("fit")
    gpus = f"{row['gpus_per_instance']} x {row['gpu_model']} each" if row.get("gpus_per_instance") else ""
    gpu = row.get("gpu_p95_percent")
    if fit:
        cheaper = (
            f"{escape(fit['instance_type'])} &times; {row['instance_count']}: "
            f"{_per_1000(fit['cost_per_1000_requests_usd'], fit)} per 1,000"
            f"<div class='muted'>{_money(fit['hourly_usd'])}/h, saves {_money(fit['monthly_saving_usd'])}/month "
            f"(<code>{escape(fit['reason'])}</code>, {escape(fit['risk'])} risk)</div>"
        )
    else:
        cheaper = f"<span class='muted'>{escape(str(row.get('why_no_fit') or ''))}</span>"
    return (
        f'<tr class="endpoint" data-per-1000="{row["cost_per_1000_requests_usd"] or ""}">'
        f"<td>{escape(row['endpoint'])}<div class='muted'>{escape(row['variant'])} · {escape(row['region'])} · "
        f"{escape(row['team'])}</div></td>"
        f"<td>{escape(row['instance_type'])} &times; {row['instance_count']}<div class='muted'>{escape(gpus)}</div></td>"
        f"<td class='num'>{row['requests']:,}<div class='muted'>in {row['hours']:g} h</div></td>"
        f"<td class='num'>{'no data' if gpu is None else f'{gpu:g}%'}</td>"
        f"<td class='num'>{_money(row['window_cost_usd'])}</td>"
        f"<td class='num'>{_per_1000(row['cost_per_1000_requests_usd'], row)}</td>"
        f"<td>{cheaper}</td></tr>"
    )


def _endpoints_html(section: dict[str, Any] | None) -> str:
    """GPU endpoint variants by cost per 1,000 requests, largest first (a report made before them has none)."""
    if not section or not section.get("rows"):
        return ""
    rows = "".join(_endpoint_row(r) for r in section["rows"])
    return (
        '<h2 id="endpoints">Endpoints by cost per 1,000 requests</h2>'
        "<p class='muted'>Each in-service GPU endpoint variant: its instances' cost over the window divided by the "
        "requests it served (SageMaker's Invocations), and the cheaper type the right-sizing rules found for it "
        "(the same compute and memory fit as for instances; its saving is among the findings above). Spend that "
        "served no request comes first.</p>"
        '<table id="endpoint-rows"><tr><th>Endpoint</th><th>Instances</th><th class="num">Requests</th>'
        '<th class="num">GPU p95 per GPU</th><th class="num">Cost in the window</th>'
        f'<th class="num">Per 1,000 requests</th><th>Cheaper fit</th></tr>{rows}</table>'
    )


def _skipped_row(skipped: dict[str, Any]) -> str:
    name = skipped.get("name") or skipped["id"]
    hourly = skipped.get("hourly_usd")
    monthly = skipped.get("monthly_cost_usd")
    return (
        f'<tr class="skipped"><td>{linked(escape(str(name)), skipped.get("console_url"))}'
        f'<div class="muted">{escape(skipped["id"])} · '
        f"{escape(skipped['region'])} · {escape(str(skipped.get('team') or ''))}</div></td>"
        f"<td>{escape(skipped['instance_type'])} &times; {skipped.get('instance_count', 1)}</td>"
        f"<td class='num'>{_money(hourly)}{'/h' if hourly is not None else ''}</td>"
        f"<td class='num'>{_money(monthly)}<div class='muted'>{_basis(skipped)}</div></td>"
        f"<td>{escape(skipped['why'])}</td></tr>"
    )


def _group_table(title: str, css: str, groups: dict[str, dict[str, Any]]) -> str:
    ordered = sorted(groups.items(), key=lambda kv: (-kv[1]["monthly_saving_usd"], kv[0]))
    rows = "".join(
        f'<tr class="{css}"><td>{escape(name)}</td><td class="num">{g["findings"]}</td>'
        f'<td class="num">{money_and_unknown(g["monthly_saving_usd"], g.get("unpriced_findings", 0))}</td></tr>'
        for name, g in ordered
    )
    return (
        f"<h2>{escape(title)}</h2><table><tr><th>{escape(title.split()[-1].capitalize())}</th>"
        f'<th class="num">Findings</th><th class="num">Monthly saving</th></tr>{rows}</table>'
    )


def _team_table(teams: dict[str, dict[str, Any]]) -> str:
    """Per team (the routing tag), across accounts and regions: what it runs and what it could save."""
    rows = "".join(
        f'<tr class="by-team"><td>{escape(name)}</td><td class="num">{t.get("resources", 0)}</td>'
        f'<td class="num">{money_and_unknown(t.get("monthly_cost_usd", 0.0), t.get("unpriced", 0))}</td>'
        f'<td class="num">{t["findings"]}</td>'
        f'<td class="num">{money_and_unknown(t["monthly_saving_usd"], t.get("unpriced_findings", 0))}</td></tr>'
        for name, t in teams.items()
    )
    return (
        '<h2>By team</h2><table id="by-team"><tr><th>Team</th><th class="num">Resources</th>'
        '<th class="num">Monthly cost</th><th class="num">Findings</th><th class="num">Monthly saving</th></tr>'
        f"{rows}</table>"
    )


def _account_row(account: dict[str, Any]) -> str:
    failed = account.get("failed") or []
    problems = "; ".join(
        f"{escape(str(f['region']))}: {escape(str(f.get('message') or f.get('error') or 'failed'))[:300]}"
        for f in failed
    )
    return (
        f'<tr class="account{" failed" if failed else ""}" data-account="{escape(str(account["account"]))}">'
        f"<td>{escape(str(account['account'] or ''))}</td><td>{escape(str(account.get('name') or ''))}</td>"
        f"<td>{escape(', '.join(account['regions']))}</td>"
        f"<td class='num'>{account['resources']}</td><td class='num'>{account['instances']}</td>"
        f"<td class='num'>{_money(account['monthly_cost_usd'])}</td><td class='num'>{account['findings']}</td>"
        f"<td class='num'>{_money(account['monthly_saving_usd'])}</td>"
        f"<td class='num'>{len(failed)}</td><td>{problems}</td></tr>"
    )


def _account_table(accounts: list[dict[str, Any]]) -> str:
    """Per account: shown when the report covers more than one (for one, it would repeat the totals)."""
    if len(accounts) < 2:
        return ""
    return (
        '<h2>By account</h2><table id="accounts"><tr><th>Account</th><th>Name</th><th>Regions</th>'
        '<th class="num">Resources</th><th class="num">Instances</th><th class="num">Monthly cost</th>'
        '<th class="num">Findings</th><th class="num">Monthly saving</th><th class="num">Failed</th>'
        f"<th>Errors</th></tr>{''.join(_account_row(a) for a in accounts)}</table>"
    )


def _region_row(region: dict[str, Any], several_accounts: bool) -> str:
    failed = region["status"] != "ok"
    message = region.get("message") or (f"{region.get('error') or ''} {region.get('cause') or ''}".strip())
    account = ""
    if several_accounts:
        name = region.get("account_name")
        account = f"<td>{escape(str(region.get('account') or ''))}{f' ({escape(name)})' if name else ''}</td>"
    return (
        f'<tr class="region {"failed" if failed else ""}">{account}<td>{escape(region["region"])}</td>'
        f"<td>{escape(region['status'])}</td><td class='num'>{region['resources']}</td>"
        f"<td class='num'>{region['findings']}</td>"
        f"<td>{escape(str(message))[:500] if failed else ''}</td></tr>"
    )


def _findings_table(report: dict[str, Any], labels: dict[str, str] | None) -> str:
    """The findings, largest saving first, sortable by the buttons above them (CSS: no script), with the legend."""
    totals = report["totals"]
    findings = sorted(
        report["findings"],
        key=lambda f: (f["monthly_saving_usd"] is None, -(f["monthly_saving_usd"] or 0.0)),
    )
    ranks = sort_ranks(findings)
    rows = "".join(
        _finding_row(f, report["window"].get("start"), labels, rank)
        for f, rank in zip(findings, ranks, strict=True)
    )
    if totals.get("insufficient_data"):
        empty = (
            '<p id="no-findings">Insufficient data: nothing could be judged, so nothing is said to be saved; the '
            "resources not judged are listed below.</p>"
        )
    else:
        empty = '<p id="no-findings">No recommendation.</p>' if not findings else ""
    table = (
        '<table id="findings" class="sortable"><tr><th>Resource</th><th>Rule</th><th>Now</th><th>Recommended</th>'
        '<th class="num">Projected p95 per GPU</th><th class="num">Saving</th><th>Busiest GPU</th><th>Why</th>'
        f"</tr>{rows}</table>"
    )
    return f"<h2>Findings, largest saving first</h2>{legend()}{empty}{sorter(table)}"


def _totals_html(report: dict[str, Any], accounts: list[dict[str, Any]]) -> str:
    totals = report["totals"]
    skipped_cost = f"{_money(totals.get('skipped_monthly_cost_usd', 0.0))}"
    if totals.get("skipped_unpriced", 0):
        skipped_cost += f", {totals['skipped_unpriced']} of unknown price"
    several = len(accounts) > 1
    return (
        '<div class="totals">'
        + headline(totals, bool(totals.get("insufficient_data")))
        + f'<div class="total">Findings<b id="total-findings">{totals["findings"]}</b></div>'
        + (f'<div class="total">Accounts<b id="total-accounts">{len(accounts)}</b></div>' if several else "")
        + f'<div class="total">Resources audited<b id="total-resources">{totals["resources"]}</b></div>'
        + cost_box(totals)
        + f'<div class="total">Not judged<b id="total-skipped">{totals.get("skipped", len(report.get("skipped", [])))}'
        f'</b><span class="muted">costing {skipped_cost}</span></div></div>'
    )


def _unoffered_html(unoffered: list[dict[str, Any]]) -> str:
    """The moves a rule would make to a type the resource's region does not offer: why no such recommendation."""
    if not unoffered:
        return ""
    rows = "".join(
        f"<tr><td>{escape(u['id'])}<div class='muted'>{escape(u['region'])}</div></td>"
        f"<td>{escape(u['instance_type'])}</td><td>{escape(u['target'])}</td><td>{escape(u['why'])}</td></tr>"
        for u in unoffered
    )
    return (
        '<h2>Not offered in the region</h2><table id="unoffered"><tr><th>Resource</th><th>Type</th>'
        f"<th>Would move to</th><th>Why</th></tr>{rows}</table>"
    )


def render_html(report: dict[str, Any]) -> str:
    window = report["window"]
    accounts = report.get("accounts") or []
    several = len(accounts) > 1
    labels = {str(a["account"]): a.get("name") or str(a["account"]) for a in accounts} if several else None
    skipped_rows = "".join(_skipped_row(s) for s in report.get("skipped", []))
    failed = failed_items(report)
    warning = (
        '<p class="failed" id="failed-regions">Not audited (failed): '
        + "; ".join(f"{escape(where)}: {escape(message)}" for where, message in failed)
        + "</p>"
        if failed
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>costguard right-sizing audit</title>
<style>{_STYLE}{SORT_STYLE}</style></head><body>
<h1>Right-sizing audit</h1>
<p class="muted">Run {escape(report["run"])}, generated {when(report["generated_at"])};
usage from {when(window["start"])} to {when(window["end"])} ({window["days"]:g} days).</p>
{warning}
{_totals_html(report, accounts)}
{comparison_html(report.get("comparison"), when)}
{_account_table(accounts)}
{_group_table("Savings by rule", "by-rule", report["by_rule"])}
{_team_table(report["by_team"])}
{_findings_table(report, labels)}
{_endpoints_html(report.get("endpoints"))}
{holdings_html(report)}
<h2>Not judged, costliest first</h2>
<table id="skipped"><tr><th>Resource</th><th>Type</th><th class="num">Hourly cost</th>
<th class="num">Cost</th><th>Why</th></tr>{skipped_rows}</table>
{_unoffered_html(report.get("unoffered") or [])}
<h2>{"Accounts and regions" if several else "Regions"}</h2>
<table id="regions"><tr>{"<th>Account</th>" if several else ""}<th>Region</th><th>Status</th>
<th class="num">Resources</th><th class="num">Findings</th><th>Error</th></tr>
{"".join(_region_row(r, several) for r in report["regions"])}</table>
</body></html>
"""
