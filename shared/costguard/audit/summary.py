"""The Slack summary of an audit: the total, the top items, the accounts (several) and teams, what failed and
why, and the report's link."""

from __future__ import annotations

from typing import Any

from costguard.audit.report import failed_items
from costguard.notify.text import clip, escape

TOP_ITEMS = 5
TOP_ACCOUNTS = 10
TOP_TEAMS = 5
TOP_FAILURES = 10


def _projection(finding: dict[str, Any]) -> str:
    if finding.get("recommended_type") is None:
        return ""
    projected = finding.get("projected_gpu_p95_percent")
    shown = "unknown" if projected is None else f"{projected:g}%"
    return f" (projected p95 {shown} per GPU, {escape(str(finding.get('risk') or 'high'))} risk)"


def summary_message(report: dict[str, Any], link: str | None) -> dict[str, Any]:
    totals = report["totals"]
    if totals.get("insufficient_data"):
        title = "Right-sizing audit: insufficient data, nothing judged"
    elif "safe_monthly_saving_usd" in totals:
        title = (
            f"Right-sizing audit: ${totals['safe_monthly_saving_usd']:,.2f}/month safe to do now, "
            f"${totals['conditional_monthly_saving_usd']:,.2f}/month more after a change of code, market or data"
        )
    else:  # a report made before the two totals
        title = f"Right-sizing audit: ${totals['monthly_saving_usd']:,.2f}/month to save"
    accounts = report.get("accounts") or []
    several = len(accounts) > 1
    names = {str(a["account"]): a.get("name") or str(a["account"]) for a in accounts}
    lines = []
    for finding in report["findings"][:TOP_ITEMS]:
        resource = finding["resource"]
        target = finding["recommended_type"] or "stop"
        if finding["recommended_market"] == "spot":
            target += " on spot"
        where = resource["region"]
        if several:
            account = str(resource.get("account") or "")
            where = f"{names.get(account, account)}/{where}"
        saving = finding["monthly_saving_usd"]
        lines.append(
            f"• *{'cost unknown' if saving is None else f'${saving:,.2f}/mo'}* `{escape(finding['reason'])}` "
            f"{escape(resource['name'] or resource['id'])} ({escape(where)}): "
            f"{escape(finding['current_type'])} → {escape(target)}{_projection(finding)}"
            + ("" if finding.get("tier", "safe_now") == "safe_now" else " _(needs a change first)_")
        )
    body = (
        (f"{len(accounts)} accounts: " if several else "")
        + f"{totals['findings']} findings over {totals['resources']} resources costing "
        f"${totals['monthly_cost_usd']:,.2f}/month ({report['window']['days']:g}-day window)."
    )
    if totals.get("skipped"):
        unpriced = totals.get("skipped_unpriced", 0)
        body += (
            f" {totals['skipped']} not judged (too little data or no price), costing "
            f"${totals.get('skipped_monthly_cost_usd', 0.0):,.2f}/month"
            + (f" plus {unpriced} of unknown price" if unpriced else "")
            + "."
        )
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": clip(title, 150)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": body}},
    ]
    if lines:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": clip("\n".join(lines), 3000)}})
    if several:  # one account: the totals above are its row
        rows = [_account_line(a) for a in accounts[:TOP_ACCOUNTS]]
        if len(accounts) > TOP_ACCOUNTS:
            rows.append(f"… and {len(accounts) - TOP_ACCOUNTS} more accounts in the report")
        blocks.append(_section("*By account*\n" + "\n".join(rows)))
    also = holdings_line(totals)
    if also:
        blocks.append(_section(also))
    teams = [(name, t) for name, t in (report.get("by_team") or {}).items()][:TOP_TEAMS]
    if teams:
        blocks.append(_section("*By team*\n" + "\n".join(_team_line(name, t) for name, t in teams)))
    failures = failed_items(report)
    if failures:
        lines = [f"• {escape(where)}: {escape(message)[:300]}" for where, message in failures[:TOP_FAILURES]]
        if len(failures) > TOP_FAILURES:
            lines.append(f"… and {len(failures) - TOP_FAILURES} more in the report")
        blocks.append(_section(":warning: *Not audited:*\n" + "\n".join(lines)))
    if link:
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    {"type": "button", "text": {"type": "plain_text", "text": "Open the report"}, "url": link}
                ],
            }
        )
    return {"text": title, "blocks": blocks}


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, 3000)}}


def _account_line(account: dict[str, Any]) -> str:
    name = account.get("name")
    label = f"{escape(name)} ({escape(str(account['account']))})" if name else escape(str(account["account"]))
    failed = len(account.get("failed") or [])
    return (
        f"• {label}: *${account['monthly_saving_usd']:,.2f}/mo* to save, {account['findings']} findings over "
        f"{account['resources']} resources (${account['monthly_cost_usd']:,.2f}/mo)"
        + (f", :warning: {failed} failed" if failed else "")
    )


def _team_line(name: str, team: dict[str, Any]) -> str:
    return (
        f"• {escape(name)}: *${team['monthly_saving_usd']:,.2f}/mo* to save, {team['findings']} findings over "
        f"{team.get('resources', 0)} resources (${team.get('monthly_cost_usd', 0.0):,.2f}/mo)"
    )


def holdings_line(totals: dict[str, Any]) -> str | None:
    """The sections beside right-sizing in one line, those with something to say (a report made before them
    has none)."""
    parts = []
    if totals.get("commitment_monthly_saving_usd"):
        parts.append(f"Savings Plans *${totals['commitment_monthly_saving_usd']:,.2f}/mo* (estimate)")
    if totals.get("orphaned_storage_monthly_cost_usd"):
        parts.append(f"orphaned storage ${totals['orphaned_storage_monthly_cost_usd']:,.2f}/mo")
    if totals.get("untagged_monthly_cost_usd"):
        parts.append(f"untagged GPU spend ${totals['untagged_monthly_cost_usd']:,.2f}/mo")
    if totals.get("compute_optimizer_disagreements"):
        parts.append(f"Compute Optimizer disagrees on {totals['compute_optimizer_disagreements']}")
    return "*Also:* " + "; ".join(parts) if parts else None
