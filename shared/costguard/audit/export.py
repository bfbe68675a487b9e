"""The audit's findings as CSV (pure): one row per finding with the report's columns, for a spreadsheet or a
ticket. An unknown figure is an empty cell (never 0), and ``cost_note`` says why."""

from __future__ import annotations

import csv
import io
from typing import Any

COLUMNS = (
    "run",
    "tier",
    "needs",
    "resource",
    "id",
    "kind",
    "account",
    "region",
    "team",
    "reason",
    "confidence",
    "risk",
    "current_type",
    "instance_count",
    "current_market",
    "current_hourly_usd",
    "recommended_type",
    "recommended_market",
    "recommended_hourly_usd",
    "projected_gpu_p95_percent",
    "cost_basis",
    "cost_hours",
    "monthly_cost_usd",
    "monthly_saving_usd",
    "cost_note",
    "summary",
    "console_url",
)


def _cell(value: Any) -> Any:
    return "" if value is None else value


def finding_row(run: str, finding: dict[str, Any]) -> dict[str, Any]:
    resource = finding["resource"]
    unknown = finding.get("monthly_saving_usd") is None
    return {
        "run": run,
        "tier": finding.get("tier", ""),
        "needs": "; ".join(finding.get("needs") or []),
        "resource": resource.get("name") or resource["id"],
        "id": resource["id"],
        "kind": resource["kind"],
        "account": _cell(resource.get("account")),
        "region": resource["region"],
        "team": resource.get("team", ""),
        "reason": finding["reason"],
        "confidence": finding["confidence"],
        "risk": finding.get("risk", ""),
        "current_type": finding["current_type"],
        "instance_count": finding["instance_count"],
        "current_market": finding.get("current_market", ""),
        "current_hourly_usd": _cell(finding.get("current_hourly_usd")),
        "recommended_type": finding.get("recommended_type") or "stop",
        "recommended_market": finding.get("recommended_market", ""),
        "recommended_hourly_usd": _cell(finding.get("recommended_hourly_usd")),
        "projected_gpu_p95_percent": _cell(finding.get("projected_gpu_p95_percent")),
        "cost_basis": finding.get("cost_basis", "month"),
        "cost_hours": _cell(finding.get("cost_hours")),
        "monthly_cost_usd": _cell(finding.get("monthly_cost_usd")),
        "monthly_saving_usd": _cell(finding.get("monthly_saving_usd")),
        "cost_note": "cost unknown: " + str((finding.get("evidence") or {}).get("price", "no price"))
        if unknown
        else "",
        "summary": finding["summary"],
        "console_url": _cell(finding.get("console_url")),
    }


def findings_csv(report: dict[str, Any]) -> str:
    """The report's findings, in its order (largest saving first), one CSV row each under a header."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for finding in report["findings"]:
        writer.writerow(finding_row(str(report["run"]), finding))
    return out.getvalue()
