"""The report's sections beside right-sizing, merged over the (account, region) results that succeeded:
commitments, orphaned storage, untagged GPU spend and the Compute Optimizer comparison, each with its totals."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from costguard.audit.holdings import by_cost


def _ok(regions: Sequence[dict[str, Any]], section: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(r, r[section]) for r in regions if r.get("status") == "ok" and isinstance(r.get(section), dict)]


def _money(rows: Sequence[dict[str, Any]], key: str = "monthly_cost_usd") -> float:
    return round(sum(r.get(key) or 0.0 for r in rows), 2)


def commitments_section(regions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    parts = _ok(regions, "commitments")
    rows = sorted((row for _, p in parts for row in p["rows"]), key=lambda r: -r["monthly_saving_usd"])
    notes = [
        {"account": r.get("account"), "region": r["region"], "note": p["coverage_note"]}
        for r, p in parts
        if p.get("coverage_note")
    ]
    left_out = [row for _, p in parts for row in p.get("left_out", [])]
    return {
        "rows": rows,
        "monthly_saving_usd": _money(rows, "monthly_saving_usd"),
        "commitment_usd_per_hour": round(sum(r["commitment_usd_per_hour"] for r in rows), 4),
        # Sized after the report's own advice: the steady instances it tells to stop, resize or move are not
        # committed for (a plan for them would pay for what the advice removes).
        "sized_after_advice": True,
        "left_out": left_out,
        "assumptions": parts[0][1].get("assumptions") if parts else None,
        "coverage_unknown": notes,
    }


def storage_section(regions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Rows, costliest first, with their total cost and size (the regions' results carry rows only), and what the
    unattached volumes no tag ties to GPU work cost."""
    parts = _ok(regions, "orphaned_storage")
    rows = sorted((row for _, p in parts for row in p["rows"]), key=by_cost)
    others = {"volumes": 0, "size_gib": 0, "monthly_cost_usd": 0.0}
    for _, part in parts:
        for key in others:
            others[key] = round(others[key] + (part.get("other_unattached_volumes") or {}).get(key, 0), 2)
    return {
        "rows": rows,
        "monthly_cost_usd": _money(rows),
        "size_gib": round(sum(r["size_gib"] for r in rows), 2),
        "volumes": sum(1 for r in rows if r["kind"] == "ebs_volume"),
        "prefixes": sum(1 for r in rows if r["kind"] != "ebs_volume"),
        "unlisted_prefixes": sum(1 for r in rows if r.get("error")),
        "other_unattached_volumes": others,
        "rates": parts[0][1].get("rates") if parts else None,
    }


def untagged_section(regions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Rows, the total, and the monthly cost per missing tag (a resource missing two counts under both) and per
    account."""
    parts = _ok(regions, "untagged")
    rows = sorted((row for _, p in parts for row in p["rows"]), key=by_cost)
    required: list[str] = next((p["required_tags"] for _, p in parts if p.get("required_tags")), [])
    by_tag: dict[str, dict[str, Any]] = {t: {"resources": 0, "monthly_cost_usd": 0.0} for t in required}
    by_account: dict[str, dict[str, Any]] = defaultdict(lambda: {"resources": 0, "monthly_cost_usd": 0.0})
    for row in rows:
        cost = row["monthly_cost_usd"] or 0.0
        for tag in row["missing_tags"]:
            bucket = by_tag.setdefault(tag, {"resources": 0, "monthly_cost_usd": 0.0})
            bucket["resources"] += 1
            bucket["monthly_cost_usd"] = round(bucket["monthly_cost_usd"] + cost, 2)
        account = by_account[str(row.get("account") or "")]
        account["resources"] += 1
        account["monthly_cost_usd"] = round(account["monthly_cost_usd"] + cost, 2)
    return {
        "required_tags": required,
        "checked": bool(required),
        "rows": rows,
        "monthly_cost_usd": _money(rows),
        "unpriced": sum(1 for r in rows if r["monthly_cost_usd"] is None),
        "by_missing_tag": by_tag,
        "by_account": dict(sorted(by_account.items(), key=lambda kv: -kv[1]["monthly_cost_usd"])),
    }


def optimizer_section(regions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    parts = _ok(regions, "compute_optimizer")
    rows = sorted(
        (row for _, p in parts for row in p["rows"]),
        key=lambda r: (r["verdict"] == "agree", r["region"], r["id"]),
    )
    verdicts = {"agree": 0, "same direction": 0, "disagree": 0}
    for row in rows:
        verdicts[row["verdict"]] += 1
    return {
        "rows": rows,
        "verdicts": verdicts,
        "without_recommendation": sorted(i for _, p in parts for i in p.get("without_recommendation", [])),
        "unavailable": [
            {"account": r.get("account"), "region": r["region"], "note": p["unavailable"]}
            for r, p in parts
            if p.get("unavailable")
        ],
    }


def holdings_sections(regions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {
        "commitments": commitments_section(regions),
        "orphaned_storage": storage_section(regions),
        "untagged_gpu_spend": untagged_section(regions),
        "compute_optimizer": optimizer_section(regions),
    }


def holdings_totals(sections: dict[str, Any]) -> dict[str, Any]:
    """The sections' totals as the report's totals carry them (apart from the right-sizing saving: a commitment
    bought after right-sizing covers less, so the two are never added)."""
    return {
        "commitment_monthly_saving_usd": sections["commitments"]["monthly_saving_usd"],
        "orphaned_storage_monthly_cost_usd": sections["orphaned_storage"]["monthly_cost_usd"],
        "untagged_monthly_cost_usd": sections["untagged_gpu_spend"]["monthly_cost_usd"],
        "compute_optimizer_disagreements": sections["compute_optimizer"]["verdicts"]["disagree"],
    }
