"""The audit report: one JSON document with a stable schema (``costguard.audit/1``), built from the results of
each (account, region) the audit covered: totals, per account, per team, per rule, and every finding."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from costguard.audit.compare import compare
from costguard.audit.endpoints import endpoints_section
from costguard.audit.evaluate import RULE_ORDER, Skipped
from costguard.audit.finance import LEGEND, console_url, saving_totals, with_tier
from costguard.audit.holdings_report import holdings_sections, holdings_totals
from costguard.audit.model import NO_TEAM, AuditFinding, Subject
from costguard.audit.usage import CHART_HOURS

SCHEMA = "costguard.audit/1"


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
        "monthly_cost_usd": finding.monthly_cost_usd,  # None: cost unknown, never zero
        "monthly_saving_usd": finding.monthly_saving_usd,
        "cost_basis": finding.cost_basis,
        "cost_hours": finding.cost_hours,
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
    hours = hours_per_month if skipped.cost_hours is None else skipped.cost_hours
    return {
        "kind": subject.kind.value,
        "id": subject.id,
        "name": subject.name,
        "account": subject.account,
        "region": subject.region,
        "team": subject.tags.get(team_tag) or NO_TEAM,
        "instance_type": subject.instance_type,
        "instance_count": subject.instance_count,
        "hourly_usd": hourly,  # None: no price known, never zero
        "monthly_cost_usd": None if hourly is None else round(hourly * hours, 2),
        "cost_basis": skipped.cost_basis,
        "cost_hours": hours,
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


def team_totals(
    subjects: Sequence[Subject],
    prices: dict[str, float],
    team_tag: str,
    hours_per_month: float = 730,
    hours_of: Callable[[Subject], float] | None = None,
) -> dict[str, dict[str, Any]]:
    """What each team (the routing tag) runs in one account and region: resources, instances, and their cost
    over ``hours_of`` each (default: a month); ``unpriced``, when any, counts those of unknown price (not in the
    cost: never as $0)."""
    teams: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"resources": 0, "instances": 0, "monthly_cost_usd": 0.0}
    )
    for subject in subjects:
        team = teams[subject.tags.get(team_tag) or NO_TEAM]
        team["resources"] += 1
        team["instances"] += subject.instance_count
        hours = hours_per_month if hours_of is None else hours_of(subject)
        if subject.instance_type in prices:
            team["monthly_cost_usd"] += prices[subject.instance_type] * subject.instance_count * hours
        else:
            team["unpriced"] = team.get("unpriced", 0) + 1
    return {
        name: team | {"monthly_cost_usd": round(team["monthly_cost_usd"], 2)}
        for name, team in sorted(teams.items())
    }


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
    account: str | None = None,
    account_name: str | None = None,
    instances: int | None = None,
    teams: dict[str, dict[str, Any]] | None = None,
    costs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What one account and region's evaluation contributes to the report. ``costs``: its cost split by basis
    (``month_usd`` projected for what runs continuously, ``window_usd`` spent by the rest, ``unpriced``)."""
    rows = [finding_json(f, team_tag) for f in findings]
    if window_start is not None:
        for row in rows:
            row["chart_start"] = window_start.isoformat()
            row["chart_step_hours"] = CHART_HOURS
    return {
        "account": account,
        "account_name": account_name,
        "region": region,
        "status": "ok",
        "resources": audited,
        "instances": audited if instances is None else instances,
        "monthly_cost_usd": round(monthly_cost_usd, 2),
        "by_team": teams or {},
        "costs": costs or {},
        "findings": rows,
        "skipped": [skipped_json(s, team_tag, hours_per_month) for s in skipped],
    }


def _label(account: str | None, name: str | None) -> str:
    """An account as people read it: its name and id, or the id alone."""
    if not account:
        return name or "this account"
    return f"{name} ({account})" if name else account


def place(row: dict[str, Any], several_accounts: bool) -> str:
    """Where an item ran: the region alone in a one-account report (as before accounts), else account/region."""
    if not several_accounts:
        return str(row["region"])
    return f"{_label(row.get('account'), row.get('account_name'))}/{row['region']}"


def _add(bucket: dict[str, Any], key: str, value: float | None) -> None:
    """Add a figure to a total; an unknown one (None) is counted under ``unpriced``, never added as zero."""
    if value is None:
        unknown = "unpriced_findings" if key == "monthly_saving_usd" else "unpriced"
        bucket[unknown] = bucket.get(unknown, 0) + 1
        return
    bucket[key] = round(bucket[key] + value, 2)


def account_totals(
    regions: Sequence[dict[str, Any]], region_rows: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """One row per account: its name, regions, what was audited and its cost, what it could save, what failed.
    Largest saving first, then failures, then by id."""
    accounts: dict[str, dict[str, Any]] = {}
    for result, row in zip(regions, region_rows, strict=True):
        account = result.get("account") or ""
        entry = accounts.setdefault(
            account,
            {
                "account": result.get("account"),
                "name": None,
                "regions": [],
                "resources": 0,
                "instances": 0,
                "monthly_cost_usd": 0.0,
                "findings": 0,
                "monthly_saving_usd": 0.0,
                "failed": [],
            },
        )
        entry["name"] = entry["name"] or result.get("account_name")
        if result["region"] not in entry["regions"]:
            entry["regions"].append(result["region"])
        if row["status"] != "ok":
            entry["failed"].append(
                {"region": row["region"], "error": row.get("error"), "message": row.get("message")}
            )
            continue
        entry["resources"] += result.get("resources", 0)
        entry["instances"] += result.get("instances", result.get("resources", 0))
        _add(entry, "monthly_cost_usd", result.get("monthly_cost_usd", 0.0))
        for finding in result.get("findings", []):
            entry["findings"] += 1
            _add(entry, "monthly_saving_usd", finding["monthly_saving_usd"])
    return sorted(
        accounts.values(),
        key=lambda a: (-a["monthly_saving_usd"], -len(a["failed"]), a["account"] or ""),
    )


def _team_totals(regions: Sequence[dict[str, Any]], findings: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per team, across accounts and regions: what it runs (resources, instances, monthly cost) and what it
    could save (findings, monthly saving). Largest saving first, then largest cost."""
    by_team: dict[str, dict[str, Any]] = defaultdict(
        lambda: {
            "resources": 0,
            "instances": 0,
            "monthly_cost_usd": 0.0,
            "findings": 0,
            "monthly_saving_usd": 0.0,
        }
    )
    for result in regions:
        if result.get("status") != "ok":
            continue
        for name, team in (result.get("by_team") or {}).items():
            bucket = by_team[name]
            bucket["resources"] += team.get("resources", 0)
            bucket["instances"] += team.get("instances", 0)
            _add(bucket, "monthly_cost_usd", team.get("monthly_cost_usd", 0.0))
            if team.get("unpriced"):
                bucket["unpriced"] = bucket.get("unpriced", 0) + team["unpriced"]
    for finding in findings:
        bucket = by_team[finding["resource"]["team"]]
        bucket["findings"] += 1
        _add(bucket, "monthly_saving_usd", finding["monthly_saving_usd"])
    return dict(
        sorted(
            by_team.items(), key=lambda kv: (-kv[1]["monthly_saving_usd"], -kv[1]["monthly_cost_usd"], kv[0])
        )
    )


def build_report(
    *,
    run: str,
    generated_at: datetime,
    window_start: datetime,
    window_end: datetime,
    regions: Sequence[dict[str, Any]],
    previous: dict[str, Any] | None = None,
    previous_key: str | None = None,
    previous_note: str = "",
) -> dict[str, Any]:
    """Merge the (account, region) results, ok or failed, into the report, findings sorted by monthly saving,
    each with its tier and console link; compared with the ``previous`` report (None: there is none, and
    ``previous_note`` says why)."""
    findings = [with_tier(f) for f in _sorted_findings(regions)]
    region_rows = [_region_row(r) for r in regions]
    skipped = sorted(
        (
            s | {"console_url": console_url(s["kind"], s["id"], s["region"])}
            for r in regions
            if r.get("status") == "ok"
            for s in r.get("skipped", [])
        ),
        key=lambda s: (
            s.get("hourly_usd") is None,
            -(s.get("hourly_usd") or 0.0),
            s.get("region", ""),
            s["id"],
        ),
    )
    accounts = account_totals(regions, region_rows)
    failures = _failures(region_rows, several_accounts=len(accounts) > 1)
    sections = holdings_sections(regions)
    endpoints = endpoints_section(regions)
    return {
        "schema": SCHEMA,
        "run": run,
        "generated_at": generated_at.isoformat(),
        "window": {
            "start": window_start.isoformat(),
            "end": window_end.isoformat(),
            "days": round((window_end - window_start).total_seconds() / 86400, 2),
        },
        "totals": _totals(regions, accounts, findings, failures, skipped) | holdings_totals(sections),
        "regions": region_rows,
        "accounts": accounts,
        "failures": failures,
        "by_rule": _rule_totals(findings),
        "by_team": _team_totals(regions, findings),
        "findings": findings,
        "skipped": skipped,
        # Moves a rule would make to a type AWS does not offer in the resource's region (audit/evaluate.py).
        "unoffered": [
            u | {"account": r.get("account")}
            for r in regions
            if r.get("status") == "ok"
            for u in r.get("unoffered", [])
        ],
        # GPU endpoint variants by cost per 1,000 requests (audit/endpoints.py): their fits' savings are findings'.
        "endpoints": endpoints,
        **sections,
        # Against the previous report in the same bucket: new, resolved and changed findings (audit/compare.py).
        "comparison": compare(findings, previous, key=previous_key, note=previous_note),
        "legend": LEGEND,
    }


def _sorted_findings(regions: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every finding of the regions that succeeded: largest monthly saving first, then account, region, id."""
    return sorted(
        (f for r in regions if r.get("status") == "ok" for f in r.get("findings", [])),
        key=lambda f: (
            f["monthly_saving_usd"] is None,
            -(f["monthly_saving_usd"] or 0.0),
            f["resource"].get("account") or "",
            f["resource"]["region"],
            f["resource"]["id"],
        ),
    )


def _rule_totals(findings: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per rule (every rule, even one that found nothing): its findings and monthly saving, largest first."""
    by_rule: dict[str, dict[str, Any]] = {
        reason.value: {"findings": 0, "monthly_saving_usd": 0.0} for reason in RULE_ORDER
    }
    for finding in findings:
        bucket = by_rule[finding["reason"]]
        bucket["findings"] += 1
        _add(bucket, "monthly_saving_usd", finding["monthly_saving_usd"])
    return dict(sorted(by_rule.items(), key=lambda kv: -kv[1]["monthly_saving_usd"]))


def _region_row(result: dict[str, Any]) -> dict[str, Any]:
    """One (account, region) as the report lists it; a failed one with its error, cause and message."""
    failed = (
        {
            "error": result.get("error"),
            "cause": result.get("cause"),
            "message": failure_message(result.get("error"), result.get("cause")),
        }
        if result.get("status") != "ok"
        else {}
    )
    return {
        "account": result.get("account"),
        "account_name": result.get("account_name"),
        "region": result["region"],
        "status": result.get("status", "failed"),
        "resources": result.get("resources", 0),
        "findings": len(result.get("findings", [])),
        **failed,
    }


def _failures(region_rows: Sequence[dict[str, Any]], *, several_accounts: bool) -> list[dict[str, Any]]:
    """The failed items, each with where it ran (``place``) and its error and message."""
    return [
        {
            "account": r["account"],
            "account_name": r["account_name"],
            "region": r["region"],
            "place": place(r, several_accounts),
            "error": r.get("error"),
            "message": r.get("message"),
        }
        for r in region_rows
        if r["status"] != "ok"
    ]


def _totals(
    regions: Sequence[dict[str, Any]],
    accounts: Sequence[dict[str, Any]],
    findings: Sequence[dict[str, Any]],
    failures: Sequence[dict[str, Any]],
    skipped: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """The report's totals: what was audited and its cost, what could be saved, what failed, what was skipped."""
    ok = [r for r in regions if r.get("status") == "ok"]
    unpriced = [s for s in skipped if s.get("hourly_usd") is None]
    costs = [r.get("costs") or {} for r in ok]
    return {
        "accounts": len(accounts),
        "resources": sum(r.get("resources", 0) for r in ok),
        "instances": sum(r.get("instances", r.get("resources", 0)) for r in ok),
        "findings": len(findings),
        # What runs costs: a month for what runs continuously, plus what the rest spent over the window
        # (jobs, and what did not run the whole window, are never projected); the unpriced are counted apart.
        "monthly_cost_usd": round(sum(r.get("monthly_cost_usd", 0.0) for r in ok), 2),
        "continuous_monthly_cost_usd": round(sum(c.get("month_usd", 0.0) for c in costs), 2),
        "window_spend_usd": round(sum(c.get("window_usd", 0.0) for c in costs), 2),
        "unpriced_resources": sum(c.get("unpriced", 0) for c in costs),
        # Two totals: what is measured and safe to do now, and what needs a change of code, market or more data.
        # Together they are monthly_saving_usd; a finding of unknown price is in neither (unpriced_findings).
        "monthly_saving_usd": round(sum(f["monthly_saving_usd"] or 0.0 for f in findings), 2),
        **saving_totals(findings),
        # Each failed item where it ran: the region in a one-account report, else "<account>/<region>".
        "failed_regions": [f["place"] for f in failures],
        "failed_items": len(failures),
        # Resources the audit could not judge: their cost is outside the saving, not a saving of zero.
        "skipped": len(skipped),
        "skipped_monthly_cost_usd": round(sum(s.get("monthly_cost_usd") or 0.0 for s in skipped), 2),
        "skipped_unpriced": len(unpriced),
        "insufficient_data": not findings and bool(skipped),
    }


def failed_items(report: dict[str, Any]) -> list[tuple[str, str]]:
    """Each failed item of a report, where it ran and its error as text (a report made before the audit
    iterated accounts: its failed regions)."""
    if "failures" in report:
        return [
            (str(f["place"]), str(f.get("message") or f.get("error") or "failed")) for f in report["failures"]
        ]
    messages = {r["region"]: r.get("message") for r in report["regions"] if r["status"] != "ok"}
    return [(str(r), str(messages.get(r) or "failed")) for r in report["totals"]["failed_regions"]]
