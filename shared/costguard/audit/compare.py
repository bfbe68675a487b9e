"""This audit against the previous one in the same bucket (pure): findings that are new, resolved (no longer a
finding: changed, stopped or gone) and changed (another target, or a saving that grew or shrank), with the
dollars of each. The Report step finds the previous report through ``reports/latest.json``; locally, the
report.json already in the output folder is the previous one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

LATEST_KEY = (
    "reports/latest.json"  # {"latest": {run, key, generated_at}, "before": ...}: the last two reports
)
CENT = 0.005


def finding_key(finding: dict[str, Any]) -> str:
    resource = finding["resource"]
    return f"{resource.get('account') or ''}/{resource['region']}/{resource['kind']}/{resource['id']}"


def _row(change: str, now: dict[str, Any] | None, before: dict[str, Any] | None) -> dict[str, Any]:
    either = now or before
    assert either is not None
    resource = either["resource"]
    saving = None if now is None else now.get("monthly_saving_usd")
    earlier = None if before is None else before.get("monthly_saving_usd")
    delta = None if saving is None or earlier is None else saving - earlier  # both runs' findings only
    return {
        "change": change,
        "id": resource["id"],
        "name": resource.get("name"),
        "account": resource.get("account"),
        "region": resource["region"],
        "kind": resource["kind"],
        "reason": None if now is None else now["reason"],
        "recommended_type": None if now is None else now.get("recommended_type"),
        "previous_reason": None if before is None else before["reason"],
        "previous_recommended_type": None if before is None else before.get("recommended_type"),
        "monthly_saving_usd": saving,
        "previous_monthly_saving_usd": earlier,
        "delta_usd": None if delta is None else round(delta, 2),
        "console_url": either.get("console_url"),
    }


def _changed(now: dict[str, Any], before: dict[str, Any]) -> str | None:
    """How a finding of both runs changed: its advice, or its saving up or down; None: the same."""
    advice = ("reason", "recommended_type", "recommended_market")
    if any(now.get(k) != before.get(k) for k in advice):
        return "advice changed"
    saving, earlier = now.get("monthly_saving_usd"), before.get("monthly_saving_usd")
    if saving is None or earlier is None:
        return None if saving == earlier else "price changed"
    if saving - earlier > CENT:
        return "grown"
    if earlier - saving > CENT:
        return "shrunk"
    return None


def _total(rows: Sequence[dict[str, Any]], key: str) -> float:
    return round(sum(float(r[key]) for r in rows if r.get(key) is not None), 2)


def no_previous(note: str) -> dict[str, Any]:
    return {
        "previous": None,
        "note": note,
        "new": [],
        "resolved": [],
        "changed": [],
        "unchanged": 0,
        "totals": None,
    }


def compare(
    findings: Sequence[dict[str, Any]],
    previous: dict[str, Any] | None,
    *,
    key: str | None = None,
    note: str = "",
) -> dict[str, Any]:
    """The comparison section of a report whose findings are ``findings`` with the ``previous`` report (None: there
    is none, and ``note`` says why)."""
    if previous is None or not isinstance(previous.get("findings"), list):
        return no_previous(note or "no previous report: the next run compares with this one")
    before = {finding_key(f): f for f in previous["findings"]}
    now = {finding_key(f): f for f in findings}
    new = [_row("new", f, None) for k, f in now.items() if k not in before]
    resolved = [_row("resolved", None, f) for k, f in before.items() if k not in now]
    changed = []
    for k in now.keys() & before.keys():
        how = _changed(now[k], before[k])
        if how is not None:
            changed.append(_row(how, now[k], before[k]))
    ordered = sorted(changed, key=lambda r: -abs(r["delta_usd"] or 0.0))
    totals = previous.get("totals") or {}
    return {
        "previous": {
            "run": previous.get("run"),
            "generated_at": previous.get("generated_at"),
            "key": key,
            "monthly_saving_usd": totals.get("monthly_saving_usd"),
            "safe_monthly_saving_usd": totals.get("safe_monthly_saving_usd"),
            "conditional_monthly_saving_usd": totals.get("conditional_monthly_saving_usd"),
        },
        "note": note,
        "new": sorted(new, key=lambda r: -(r["monthly_saving_usd"] or 0.0)),
        "resolved": sorted(resolved, key=lambda r: -(r["previous_monthly_saving_usd"] or 0.0)),
        "changed": ordered,
        "unchanged": len(now.keys() & before.keys()) - len(changed),
        "totals": {
            "new": len(new),
            "new_monthly_saving_usd": _total(new, "monthly_saving_usd"),
            "resolved": len(resolved),
            "resolved_monthly_saving_usd": _total(resolved, "previous_monthly_saving_usd"),
            "changed": len(changed),
            "grown": sum(1 for r in changed if r["change"] == "grown"),
            "changed_delta_usd": _total(changed, "delta_usd"),
        },
    }
