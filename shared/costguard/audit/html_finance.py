"""The report page's figures as a reader acts on them: the headline's two totals and what the resources cost, the
legend for confidence and risk, the findings table's sorting (CSS only: the page has no script), console links,
and the comparison with the previous audit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape
from typing import Any

from costguard.audit.finance import LEGEND, SAFE, TIER_NAMES

# Sort keys of the findings table: the radio button's id, its label, and each row's rank under it (1 first).
SORTS: tuple[tuple[str, str], ...] = (
    ("saving", "saving"),
    ("safe", "safe to do now first"),
    ("cost", "cost"),
    ("confidence", "confidence"),
    ("risk", "risk"),
    ("resource", "resource"),
    ("team", "team"),
)
_LEVEL = {"high": 0, "medium": 1, "low": 2}
_RISK = {"low": 0, "medium": 1, "high": 2}
FINDING_COLUMNS = "minmax(10em,1.3fr) minmax(9em,1fr) auto auto auto auto auto minmax(14em,2fr)"
SORT_STYLE = (
    f"table.sortable{{display:grid;grid-template-columns:{FINDING_COLUMNS}}}"
    "table.sortable>tbody,table.sortable tr{display:contents}"
    "table.sortable tr.finding>td{order:var(--o)}"
    ".sorter label{margin-right:.8em}"
    + "".join(f"#sort-{key}:checked~table tr.finding{{--o:var(--by-{key})}}" for key, _ in SORTS)
    + "dl.legend dt{font-weight:600;margin-top:.3em} dl.legend dd{margin-left:1.2em}"
    ".total.safe{background:#e8f5ec} .total.conditional{background:#fdf3e6}"
)


def money(value: float | None) -> str:
    """A figure, or "cost unknown": never $0.00 for what has no price."""
    return "cost unknown" if value is None else f"${value:,.2f}"


def money_and_unknown(value: float | None, unknown: int = 0) -> str:
    """A total with the figures it could not add: "cost unknown" when it adds nothing known, never $0.00."""
    if not unknown:
        return money(value)
    if not value:
        return "cost unknown"
    return f"{money(value)} + {unknown} cost unknown"


def _rank(findings: Sequence[dict[str, Any]], key: Callable[[dict[str, Any]], Any]) -> list[int]:
    order = sorted(range(len(findings)), key=lambda n: (key(findings[n]), n))
    ranks = [0] * len(findings)
    for position, n in enumerate(order, start=1):
        ranks[n] = position
    return ranks


def sort_ranks(findings: Sequence[dict[str, Any]]) -> list[str]:
    """Each finding's rank under every sort key, as the CSS custom properties its row carries."""

    def saving(f: dict[str, Any]) -> tuple[bool, float]:
        return f.get("monthly_saving_usd") is None, -(f.get("monthly_saving_usd") or 0.0)

    def cost(f: dict[str, Any]) -> tuple[bool, float]:
        return f.get("monthly_cost_usd") is None, -(f.get("monthly_cost_usd") or 0.0)

    keys: dict[str, Callable[[dict[str, Any]], Any]] = {
        "saving": saving,
        "safe": lambda f: (f.get("tier") != SAFE, saving(f)),
        "cost": cost,
        "confidence": lambda f: (_LEVEL.get(str(f.get("confidence")), 3), saving(f)),
        "risk": lambda f: (_RISK.get(str(f.get("risk")), 3), saving(f)),
        "resource": lambda f: str(f["resource"].get("name") or f["resource"]["id"]).lower(),
        "team": lambda f: (str(f["resource"].get("team") or ""), saving(f)),
    }
    ranks = {name: _rank(findings, key) for name, key in keys.items()}
    return [";".join(f"--by-{name}:{ranks[name][n]}" for name, _ in SORTS) for n in range(len(findings))]


def sorter(table: str) -> str:
    """The findings table with its sort buttons before it (radio inputs: the CSS reorders the rows)."""
    buttons = "".join(
        f'<input type="radio" name="sort" id="sort-{key}"{" checked" if n == 0 else ""}>'
        f'<label for="sort-{key}">{escape(label)}</label>'
        for n, (key, label) in enumerate(SORTS)
    )
    return f'<div class="sorter"><span class="muted">Sort by: </span>{buttons}{table}</div>'


def linked(text: str, url: str | None) -> str:
    """``text`` (already escaped) as a link to the AWS console page, when there is one."""
    return f'<a href="{escape(url)}">{text}</a>' if url else text


def tier_line(finding: dict[str, Any]) -> str:
    if finding.get("tier") == SAFE:
        return "<div class='risk-low'>safe to do now</div>"
    needs = "; ".join(finding.get("needs") or []) or TIER_NAMES["needs_change"]
    return f"<div class='risk-medium'>needs {escape(needs)}</div>"


def headline(totals: dict[str, Any], insufficient: bool) -> str:
    """The two totals, never one figure: what is safe to do now, and what needs a change first."""
    if insufficient:
        safe = conditional = together = "Insufficient data"
    else:
        safe = money_and_unknown(
            totals.get("safe_monthly_saving_usd", totals["monthly_saving_usd"]),
            totals.get("safe_unpriced", 0),
        )
        conditional = money_and_unknown(
            totals.get("conditional_monthly_saving_usd", 0.0), totals.get("conditional_unpriced", 0)
        )
        together = money_and_unknown(totals["monthly_saving_usd"], totals.get("unpriced_findings", 0))
    return (
        f'<div class="total safe">Safe to do now: measured, high confidence, low risk<b id="total-safe">{safe}</b>'
        f'<span class="muted">a month, {totals.get("safe_findings", 0)} findings</span></div>'
        f'<div class="total conditional">Needs a change of code, market or more data first'
        f'<b id="total-conditional">{conditional}</b><span class="muted">a month, '
        f"{totals.get('conditional_findings', 0)} findings</span></div>"
        f'<div class="total">Both together<b id="total-saving">{together}</b>'
        '<span class="muted">not one figure to act on</span></div>'
    )


def cost_box(totals: dict[str, Any]) -> str:
    """What the audited resources cost: a month for what runs continuously, the window's spend for the rest."""
    parts = []
    if "continuous_monthly_cost_usd" in totals:
        parts.append(f"{money(totals['continuous_monthly_cost_usd'])} a month for what runs continuously")
        parts.append(
            f"{money(totals['window_spend_usd'])} spent over the window by jobs and what did not run all of it"
        )
    if totals.get("unpriced_resources"):
        parts.append(f"{totals['unpriced_resources']} of unknown price, in neither")
    return (
        f'<div class="total">What they cost<b id="total-cost">'
        f"{money_and_unknown(totals['monthly_cost_usd'], totals.get('unpriced_resources', 0))}</b>"
        f'<span class="muted">{escape("; ".join(parts))}</span></div>'
    )


def legend() -> str:
    items = (("Confidence", "confidence"), ("Risk", "risk"), ("Safe to do now", SAFE), ("Costs", "cost"))
    rows = "".join(f"<dt>{escape(title)}</dt><dd>{escape(LEGEND[key])}</dd>" for title, key in items)
    return f'<dl class="legend muted" id="legend">{rows}</dl>'


def _advice(reason: str | None, target: str | None) -> str:
    if reason is None:
        return "no finding"
    return f"<code>{escape(reason)}</code> &rarr; {escape(target or 'stop')}"


def _change_row(row: dict[str, Any]) -> str:
    name = linked(escape(str(row.get("name") or row["id"])), row.get("console_url"))
    delta = row.get("delta_usd")
    shown = "" if delta is None else f"{'+' if delta >= 0 else '-'}${abs(delta):,.2f}"
    return (
        f'<tr class="change" data-change="{escape(row["change"])}"><td>{escape(row["change"])}</td>'
        f"<td>{name}<div class='muted'>{escape(row['id'])} · {escape(row['region'])}</div></td>"
        f"<td>{_advice(row['previous_reason'], row['previous_recommended_type'])}"
        f"<div class='muted'>{money(row['previous_monthly_saving_usd']) if row['previous_reason'] else ''}</div></td>"
        f"<td>{_advice(row['reason'], row['recommended_type'])}"
        f"<div class='muted'>{money(row['monthly_saving_usd']) if row['reason'] else ''}</div></td>"
        f"<td class='num'>{shown}</td></tr>"
    )


def comparison_html(section: dict[str, Any] | None, when: Callable[[Any], str]) -> str:
    """Since the previous audit in the same bucket: new, resolved and changed findings, with their dollars."""
    if not section:
        return ""
    previous = section.get("previous")
    if previous is None:
        return (
            '<h2 id="comparison">Since the previous audit</h2>'
            f'<p class="muted" id="comparison-note">{escape(section.get("note") or "no previous report")}.</p>'
        )
    t = section["totals"]
    rows = "".join(_change_row(r) for r in [*section["new"], *section["resolved"], *section["changed"]])
    return (
        '<h2 id="comparison">Since the previous audit</h2>'
        f'<p id="comparison-summary">Against run {escape(str(previous.get("run")))} of '
        f"{when(previous.get('generated_at'))}: <b>{t['new']} new</b> ({money(t['new_monthly_saving_usd'])}), "
        f"<b>{t['resolved']} resolved</b> ({money(t['resolved_monthly_saving_usd'])}), <b>{t['changed']} "
        f"changed</b> ({t['grown']} grown; {_signed(t['changed_delta_usd'])}), {section['unchanged']} unchanged. "
        f"It said {money(previous.get('monthly_saving_usd'))} a month then.</p>"
        '<table id="comparison-rows"><tr><th>Change</th><th>Resource</th><th>Before</th><th>Now</th>'
        f'<th class="num">Difference a month</th></tr>{rows}</table>'
    )


def _signed(value: float) -> str:
    return f"{'+' if value >= 0 else '-'}${abs(value):,.2f} a month"
