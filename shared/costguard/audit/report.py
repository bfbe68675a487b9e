"""The audit report: one JSON document with a stable schema (``costguard.audit/1``), built from region results."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from costguard.audit.evaluate import RULE_ORDER, Skipped
from costguard.audit.model import AuditFinding
from costguard.audit.usage import CHART_HOURS

SCHEMA = "costguard.audit/1"
NO_TEAM = "(untagged)"


def finding_json(finding: AuditFinding, team_tag: str) -> dict[str, Any]:
    subject = finding.subject
    return {
        "reason": finding.reason.value,
        "resource": {
            "kind": subject.kind.value,
            "id": subject.id,
            "name": subject.name,
            "account": subject.account,
            "region": subject.region,
            "team": subject.tags.get(team_tag) or NO_TEAM,
        },
        "current_type": subject.instance_type,
        "instance_count": subject.instance_count,
        "current_market": "spot" if subject.spot else "on-demand",
        "current_hourly_usd": finding.current_hourly_usd,
        "recommended_type": finding.recommended_type,
        "recommended_market": finding.recommended_market,
        "recommended_hourly_usd": finding.recommended_hourly_usd,
        "monthly_cost_usd": finding.monthly_cost_usd,
        "monthly_saving_usd": finding.monthly_saving_usd,
        "confidence": finding.confidence,
        "risk": finding.risk,
        "projected_gpu_p95_percent": finding.projected_gpu_percent,
        "projection_basis": finding.evidence.get("projection_basis"),
        "summary": finding.summary,
        "evidence": finding.evidence,
        "alternatives": list(finding.alternatives),
        "chart": list(finding.chart),
    }


def skipped_json(skipped: Skipped, team_tag: str = "team", hours_per_month: float = 730) -> dict[str, Any]:
    subject = skipped.subject
    hourly = skipped.hourly_usd
    return {
        "kind": subject.kind.value,
        "id": subject.id,
        "name": subject.name,
        "region": subject.region,
        "team": subject.tags.get(team_tag) or NO_TEAM,
        "instance_type": subject.instance_type,
        "instance_count": subject.instance_count,
        "hourly_usd": hourly,  # None: no price known, never zero
        "monthly_cost_usd": None if hourly is None else round(hourly * hours_per_month, 2),
        "why": skipped.why,
    }


def failure_message(error: str | None, cause: str | None) -> str:
    """A failed region's error as a person reads it: Lambda's JSON error payload unpacked to type and message."""
    text = (cause or "").strip()
    try:
        payload = json.loads(text) if text.startswith("{") else None
    except json.JSONDecodeError:
        payload = None
    if isinstance(payload, dict) and ("errorMessage" in payload or "errorType" in payload):
        kind = str(payload.get("errorType") or error or "Error")
        message = str(payload.get("errorMessage") or "").strip()
        return f"{kind}: {message}" if message else kind
    if error and text:
        return f"{error}: {text}"
    return error or text or "failed"


def region_result(
    region: str,
    findings: Sequence[AuditFinding],
    skipped: Sequence[Skipped],
    *,
    audited: int,
    monthly_cost_usd: float,
    team_tag: str,
    hours_per_month: float = 730,
    window_start: datetime | None = None,
) -> dict[str, Any]:
    """What one region's evaluation contributes to the report."""
    rows = [finding_json(f, team_tag) for f in findings]
    if window_start is not None:
        for row in rows:
            row["chart_start"] = window_start.isoformat()
            row["chart_step_hours"] = CHART_HOURS
    return {
        "region": region,
        "status": "ok",
        "resources": audited,
        "monthly_cost_usd": round(monthly_cost_usd, 2),
        "findings": rows,
        "skipped": [skipped_json(s, team_tag, hours_per_month) for s in skipped],
    }


def build_report(
    *,
    run: str,
    generated_at: datetime,
    window_start: datetime,
    window_end: datetime,
    regions: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """Merge region results (ok or failed) into the report, findings sorted by monthly saving."""
    findings = sorted(
        (f for r in regions if r.get("status") == "ok" for f in r.get("findings", [])),
        key=lambda f: (-f["monthly_saving_usd"], f["resource"]["region"], f["resource"]["id"]),
    )
    by_rule: dict[str, dict[str, Any]] = {
        reason.value: {"findings": 0, "monthly_saving_usd": 0.0} for reason in RULE_ORDER
    }
    by_team: dict[str, dict[str, Any]] = defaultdict(lambda: {"findings": 0, "monthly_saving_usd": 0.0})
    for finding in findings:
        for bucket in (by_rule[finding["reason"]], by_team[finding["resource"]["team"]]):
            bucket["findings"] += 1
            bucket["monthly_saving_usd"] = round(
                bucket["monthly_saving_usd"] + finding["monthly_saving_usd"], 2
            )
    region_rows = [
        {
            "region": r["region"],
            "status": r.get("status", "failed"),
            "resources": r.get("resources", 0),
            "findings": len(r.get("findings", [])),
            **(
                {
                    "error": r.get("error"),
                    "cause": r.get("cause"),
                    "message": failure_message(r.get("error"), r.get("cause")),
                }
                if r.get("status") != "ok"
                else {}
            ),
        }
        for r in regions
    ]
    skipped = sorted(
        (s for r in regions if r.get("status") == "ok" for s in r.get("skipped", [])),
        key=lambda s: (-(s.get("hourly_usd") or 0.0), s.get("region", ""), s.get("id", "")),
    )
    unpriced = [s for s in skipped if s.get("hourly_usd") is None]
    return {
        "schema": SCHEMA,
        "run": run,
        "generated_at": generated_at.isoformat(),
        "window": {
            "start": window_start.isoformat(),
            "end": window_end.isoformat(),
            "days": round((window_end - window_start).total_seconds() / 86400, 2),
        },
        "totals": {
            "resources": sum(r.get("resources", 0) for r in regions if r.get("status") == "ok"),
            "findings": len(findings),
            "monthly_cost_usd": round(
                sum(r.get("monthly_cost_usd", 0.0) for r in regions if r.get("status") == "ok"), 2
            ),
            "monthly_saving_usd": round(sum(f["monthly_saving_usd"] for f in findings), 2),
            "failed_regions": [r["region"] for r in region_rows if r["status"] != "ok"],
            # Resources the audit could not judge: their cost is outside the saving, not a saving of zero.
            "skipped": len(skipped),
            "skipped_monthly_cost_usd": round(sum(s.get("monthly_cost_usd") or 0.0 for s in skipped), 2),
            "skipped_unpriced": len(unpriced),
            "insufficient_data": not findings and bool(skipped),
        },
        "regions": region_rows,
        "by_rule": dict(sorted(by_rule.items(), key=lambda kv: -kv[1]["monthly_saving_usd"])),
        "by_team": dict(sorted(by_team.items(), key=lambda kv: -kv[1]["monthly_saving_usd"])),
        "findings": findings,
        "skipped": skipped,
    }
