"""The report page's sections beside right-sizing: commitments, orphaned storage, untagged GPU spend, and
Compute Optimizer's recommendations beside costguard's."""

from __future__ import annotations

from html import escape
from typing import Any

from costguard.audit.holdings import PLAN_NAMES


def _money(value: float | None, suffix: str = "") -> str:
    return "unknown" if value is None else f"${value:,.2f}{suffix}"


def _where(row: dict[str, Any]) -> str:
    account = row.get("account")
    return escape(f"{account} · {row['region']}" if account else str(row["region"]))


def _notes(notes: list[dict[str, Any]]) -> str:
    """A list item per note of an account and region (what could not be read there)."""
    return "".join(
        f"<li>{escape(str(n.get('account') or ''))} {escape(n['region'])}: {escape(n['note'])}</li>"
        for n in notes
    )


def commitments_html(section: dict[str, Any] | None) -> str:
    if not section:
        return ""
    rows = "".join(
        f'<tr class="commitment" data-saving="{r["monthly_saving_usd"]:.2f}"><td>{escape(r["instance_type"])}'
        f"<div class='muted'>{_where(r)} · {escape(', '.join(r['resources']))}</div></td>"
        f"<td class='num'>{r['average_instances']:g}</td><td class='num'>{_covered(r)}</td>"
        f"<td class='num'>{_money(r['on_demand_usd_per_hour'], '/h')}</td>"
        f"<td>{escape(PLAN_NAMES.get(r['plan'], r['plan']))}, {escape(r['term'])}, {escape(r['payment'])}"
        f"<div class='muted'>{_money(r['rate_usd_per_hour'], '/h')} an instance-hour; commit "
        f"{_money(r['commitment_usd_per_hour'], '/h')}</div></td>"
        f"<td class='num'>{_money(r['monthly_saving_usd'])}</td><td>{_options(r['options'])}</td></tr>"
        for r in section["rows"]
    )
    assumptions = section.get("assumptions") or {}
    unknown = _notes(section.get("coverage_unknown", []))
    return (
        f'<h2 id="commitments">Commitments: <span id="commitment-saving">'
        f"{_money(section['monthly_saving_usd'])}</span>/month (estimate)</h2>"
        f"<p class='muted'>EC2 usage that ran steadily over the window, less what Savings Plans already cover "
        f"(Cost Explorer). Rates: {escape(str(assumptions.get('rates', '')))}, "
        f"{escape(str(assumptions.get('payment', '')))}, {escape(str(assumptions.get('operating_system', '')))}"
        f" (as of {escape(str(assumptions.get('as_of', '')))}). Commit "
        f"{_money(section['commitment_usd_per_hour'], '/h')} in all.</p>"
        + _after_advice(section)
        + (f"<ul class='failed'>{unknown}</ul>" if unknown else "")
        + '<table id="commitment-rows"><tr><th>Type</th><th class="num">Steady instances</th>'
        '<th class="num">Covered</th><th class="num">On demand</th><th>Plan</th>'
        f'<th class="num">Monthly saving</th><th>Other plans</th></tr>{rows}</table>'
    )


def _after_advice(section: dict[str, Any]) -> str:
    """What the commitments leave out: the steady instances this report tells to stop, resize or move."""
    if not section.get("sized_after_advice"):
        return ""
    left = section.get("left_out") or []
    items = "".join(
        f"<li>{escape(str(r.get('name') or r['id']))} ({escape(r['instance_type'])}, "
        f"{_money(r.get('on_demand_usd_per_hour'), '/h')}): <code>{escape(r['reason'])}</code> &rarr; "
        f"{escape(r['advice'])}</li>"
        for r in left
    )
    return (
        '<p id="commitments-after-advice">Sized on the fleet as it would be after this report\'s own stop and '
        "resize advice: "
        + (
            f"{len(left)} steady instance{'s' if len(left) != 1 else ''} it tells to stop, resize or move "
            f"{'are' if len(left) != 1 else 'is'} left out; commit for the new type once it has run steadily.</p>"
            f'<ul class="muted" id="commitments-left-out">{items}</ul>'
            if left
            else "no steady instance had to be left out.</p>"
        )
    )


def _covered(row: dict[str, Any]) -> str:
    return f"{row['covered_share']:.0%}" if row.get("coverage_known", True) else "unknown"


def _options(options: list[dict[str, Any]]) -> str:
    return "<br>".join(
        f"{escape(PLAN_NAMES.get(o['plan'], o['plan']))} {escape(o['term'])}: {_money(o['monthly_saving_usd'])}"
        for o in options
    )


def storage_html(section: dict[str, Any] | None) -> str:
    if not section:
        return ""
    rows = "".join(
        f'<tr class="orphaned" data-kind="{escape(r["kind"])}"><td>{escape(r["id"])}<div class="muted">'
        f"{_where(r)}</div></td><td>{escape(r['kind'].replace('_', ' '))}</td>"
        f"<td class='num'>{r['size_gib']:,g} GiB</td><td class='num'>{'' if r['age_days'] is None else r['age_days']}"
        f"</td><td class='num'>{_money(r['monthly_cost_usd'])}</td><td>{escape(r['summary'])}</td></tr>"
        for r in section["rows"]
    )
    others = section.get("other_unattached_volumes") or {}
    other = (
        f"<p class='muted'>Other unattached volumes (no tag ties them to a GPU instance, or newer): "
        f"{others['volumes']}, {others['size_gib']:,g} GiB, {_money(others['monthly_cost_usd'])}/month.</p>"
        if others.get("volumes")
        else ""
    )
    return (
        f'<h2 id="orphaned-storage">Orphaned storage: <span id="orphaned-cost">'
        f"{_money(section['monthly_cost_usd'])}</span>/month</h2>"
        f"<p class='muted'>{section['volumes']} volumes and {section['prefixes']} S3 prefixes, "
        f"{section['size_gib']:,g} GiB, left by GPU instances and finished training jobs. costguard never "
        "deletes them.</p>"
        + other
        + '<table id="orphaned-rows"><tr><th>Where</th><th>What</th><th class="num">Size</th>'
        f'<th class="num">Age (days)</th><th class="num">Monthly cost</th><th>Why</th></tr>{rows}</table>'
    )


def untagged_html(section: dict[str, Any] | None) -> str:
    if not section:
        return ""
    if not section.get("checked"):
        return (
            '<h2 id="untagged">Untagged GPU spend</h2><p class="muted">Not checked: no required tags are set '
            "(COSTGUARD_REQUIRED_TAGS).</p>"
        )
    rows = "".join(
        f'<tr class="untagged-row"><td>{escape(str(r.get("name") or r["id"]))}<div class="muted">'
        f"{escape(r['id'])} · {_where(r)}</div></td><td>{escape(r['instance_type'])} &times; "
        f"{r['instance_count']}</td><td>{escape(', '.join(r['missing_tags']))}</td>"
        f"<td class='num'>{_money(r['monthly_cost_usd'])}</td></tr>"
        for r in section["rows"]
    )
    by_tag = "".join(
        f'<tr class="untagged-tag"><td>{escape(tag)}</td><td class="num">{t["resources"]}</td>'
        f'<td class="num">{_money(t["monthly_cost_usd"])}</td></tr>'
        for tag, t in section["by_missing_tag"].items()
    )
    return (
        f'<h2 id="untagged">Untagged GPU spend: <span id="untagged-cost">{_money(section["monthly_cost_usd"])}'
        f"</span>/month</h2><p class='muted'>GPU and accelerator resources without one of the required tags "
        f"({escape(', '.join(section['required_tags']))}), at their current price.</p>"
        '<table id="untagged-by-tag"><tr><th>Missing tag</th><th class="num">Resources</th>'
        f'<th class="num">Monthly cost</th></tr>{by_tag}</table>'
        '<table id="untagged-rows"><tr><th>Resource</th><th>Type</th><th>Missing</th>'
        f'<th class="num">Monthly cost</th></tr>{rows}</table>'
    )


def _side(view: dict[str, Any]) -> str:
    target = view.get("recommended_type")
    shown = {"keep": "keep", "stop": "stop", "larger": "larger"}.get(view["direction"], target or "change")
    saving = view.get("monthly_saving_usd")
    return f"{escape(str(shown))}<div class='muted'>{_money(saving)}/month</div>"


def optimizer_html(section: dict[str, Any] | None) -> str:
    if not section or not (section["rows"] or section["unavailable"]):
        return ""
    rows = "".join(
        f'<tr class="optimizer" data-verdict="{escape(r["verdict"])}"><td>{escape(str(r.get("name") or r["id"]))}'
        f"<div class='muted'>{escape(r['id'])} · {_where(r)}</div></td><td>{escape(r['current_type'])}</td>"
        f"<td>{_side(r['costguard'])}</td><td>{_side(r['compute_optimizer'])}"
        f"<div class='muted'>{escape(str(r['compute_optimizer'].get('finding') or ''))}</div></td>"
        f"<td>{escape(r['verdict'])}<div class='muted'>{escape(r['why'])}</div></td></tr>"
        for r in section["rows"]
    )
    verdicts = section["verdicts"]
    unavailable = _notes(section["unavailable"])
    return (
        '<h2 id="compute-optimizer">Compute Optimizer alongside</h2>'
        f"<p class='muted'>{verdicts['agree']} agree, {verdicts['same direction']} same direction, "
        f"<span id='optimizer-disagree'>{verdicts['disagree']}</span> disagree; "
        f"{len(section['without_recommendation'])} GPU instances without a Compute Optimizer recommendation.</p>"
        + (f"<ul class='failed'>{unavailable}</ul>" if unavailable else "")
        + '<table id="optimizer-rows"><tr><th>Instance</th><th>Now</th><th>costguard</th>'
        f"<th>Compute Optimizer</th><th>Verdict</th></tr>{rows}</table>"
    )


def holdings_html(report: dict[str, Any]) -> str:
    return "\n".join(
        (
            commitments_html(report.get("commitments")),
            storage_html(report.get("orphaned_storage")),
            untagged_html(report.get("untagged_gpu_spend")),
            optimizer_html(report.get("compute_optimizer")),
        )
    )
