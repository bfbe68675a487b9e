"""The Slack summary of an audit: the total, the top items, failed regions and the report's link."""

from __future__ import annotations

from typing import Any

from costguard.notify.message import clip, escape

TOP_ITEMS = 5


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
    else:
        title = f"Right-sizing audit: ${totals['monthly_saving_usd']:,.2f}/month to save"
    lines = []
    for finding in report["findings"][:TOP_ITEMS]:
        resource = finding["resource"]
        target = finding["recommended_type"] or "stop"
        if finding["recommended_market"] == "spot":
            target += " on spot"
        lines.append(
            f"• *${finding['monthly_saving_usd']:,.2f}/mo* `{escape(finding['reason'])}` "
            f"{escape(resource['name'] or resource['id'])} ({escape(resource['region'])}): "
            f"{escape(finding['current_type'])} → {escape(target)}{_projection(finding)}"
        )
    body = (
        f"{totals['findings']} findings over {totals['resources']} resources costing "
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
    if totals["failed_regions"]:
        failed = ", ".join(escape(r) for r in totals["failed_regions"])
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": f":warning: Not audited: {failed}"}}
        )
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
