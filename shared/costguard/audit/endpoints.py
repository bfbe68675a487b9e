"""The audit's endpoints section: each in-service GPU endpoint variant with what its requests cost, ranked by cost
per 1,000 requests, and the cheaper fit the right-sizing rules found for it. Pure.

The fit is never worked out here: it is the variant's own right-sizing finding (audit/evaluate.py: the same
compute and memory fit rules as for instances), priced again per 1,000 requests. Its saving is already in the
right-sizing total, so the section's figures are never added to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from costguard.audit.evaluate import Skipped
from costguard.audit.model import NO_TEAM, AuditFinding, Subject, Usage
from costguard.detect.sagemaker import cost_per_1000
from costguard.model import ResourceKind

MIB_PER_GIB = 1024
# Where a row ranks: spend that served no request first (its cost per request has no bound), then by cost per
# 1,000 requests, largest first; a variant of unknown price last (never ranked as if it cost nothing).
_NO_REQUESTS, _PRICED, _UNPRICED = 0, 1, 2


def _hours(subject: Subject, window_hours: float) -> float:
    """The hours of the window the variant ran: the whole window, or since it was created."""
    if 0 < subject.running_hours < window_hours:
        return subject.running_hours
    return window_hours


def _fit(
    finding: AuditFinding | None, subject: Subject, hours: float, requests: float
) -> dict[str, Any] | None:
    """The cheaper type the rules found, priced per 1,000 of the same requests; None when they found none to move
    to (a stop is no fit: it serves nothing, and spot does not exist for endpoints)."""
    if (
        finding is None
        or finding.recommended_type is None
        or finding.recommended_hourly_usd is None
        or finding.recommended_market != "on-demand"
    ):
        return None
    hourly = round(finding.recommended_hourly_usd * subject.instance_count, 4)
    return {
        "instance_type": finding.recommended_type,
        "reason": finding.reason.value,
        "hourly_usd": hourly,
        "window_cost_usd": round(hourly * hours, 2),
        "cost_per_1000_requests_usd": cost_per_1000(hourly, hours, requests),
        "monthly_saving_usd": finding.monthly_saving_usd,
        "projected_gpu_p95_percent": finding.projected_gpu_percent,
        "risk": finding.risk,
        "confidence": finding.confidence,
        "summary": finding.summary,
    }


def _why_no_fit(finding: AuditFinding | None, skipped: str | None, hourly: float | None) -> str:
    if skipped is not None:
        return skipped
    if hourly is None:
        return "no price known for its type: not judged"
    if finding is not None and finding.recommended_type is None:
        return f"{finding.reason.value}: {finding.summary}"
    return "the right-sizing rules found no cheaper type that carries its GPU load and holds its GPU memory"


def endpoint_row(
    subject: Subject,
    used: Usage | None,
    finding: AuditFinding | None,
    price: float | None,
    *,
    window_hours: float,
    team_tag: str,
    skipped: str | None = None,
) -> dict[str, Any]:
    """One endpoint variant as the section lists it."""
    endpoint, _, variant = subject.id.partition("/")
    hours = _hours(subject, window_hours)
    requests = used.invocations if used is not None else None
    hourly = round(price * subject.instance_count, 4) if price is not None else None
    fit = _fit(finding, subject, hours, requests or 0.0)
    facts = subject.facts
    memory = used.memory_peak_mib if used is not None else None
    return {
        "kind": subject.kind.value,
        "id": subject.id,
        "endpoint": endpoint,
        "variant": variant,
        "account": subject.account,
        "region": subject.region,
        "team": subject.tags.get(team_tag) or NO_TEAM,
        "instance_type": subject.instance_type,
        "instance_count": subject.instance_count,
        "gpus_per_instance": facts.accelerator_count if facts else None,
        "gpu_model": facts.accelerator_model if facts else None,
        "hours": round(hours, 1),
        "requests": round(requests) if requests is not None else 0,
        # Per GPU: SageMaker sums a variant's GPUUtilization over an instance's GPUs; ReadMetrics divides it.
        "gpu_p95_percent": used.gpu_p95 if used is not None else None,
        "gpu_max_percent": used.gpu_max if used is not None else None,
        "gpu_memory_peak_gib": round(memory / MIB_PER_GIB, 1) if memory is not None else None,
        "hourly_usd": hourly,  # None: no price known, never zero
        "window_cost_usd": round(hourly * hours, 2) if hourly is not None else None,
        "cost_per_1000_requests_usd": cost_per_1000(hourly, hours, requests or 0.0)
        if hourly is not None
        else None,
        "fit": fit,
        "why_no_fit": None if fit is not None else _why_no_fit(finding, skipped, hourly),
    }


def endpoint_rows(
    subjects: Sequence[Subject],
    usage: Mapping[str, Usage],
    findings: Sequence[AuditFinding],
    skipped: Sequence[Skipped],
    prices: Mapping[str, float],
    *,
    window_hours: float,
    team_tag: str,
) -> list[dict[str, Any]]:
    """The endpoint variants of one account and region, ranked (``rank``)."""
    found = {f.subject.key: f for f in findings}
    not_judged = {s.subject.key: s.why for s in skipped}
    rows = [
        endpoint_row(
            s,
            usage.get(s.key),
            found.get(s.key),
            prices.get(s.instance_type),
            window_hours=window_hours,
            team_tag=team_tag,
            skipped=not_judged.get(s.key),
        )
        for s in subjects
        if s.kind is ResourceKind.ENDPOINT
    ]
    return sorted(rows, key=rank)


def rank(row: Mapping[str, Any]) -> tuple[int, float, str, str, str]:
    """By cost per 1,000 requests, largest first: priced spend that served no request before all, a variant of
    unknown price after all."""
    per_1000 = row.get("cost_per_1000_requests_usd")
    if row.get("hourly_usd") is None:
        group = _UNPRICED
    elif per_1000 is None:
        group = _NO_REQUESTS
    else:
        group = _PRICED
    return (group, -(per_1000 or 0.0), str(row.get("account") or ""), str(row["region"]), str(row["id"]))


def endpoints_section(regions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The rows of the (account, region) results that succeeded, ranked across them, with their totals."""
    rows = sorted(
        (row for r in regions if r.get("status") == "ok" for row in r.get("endpoints") or []), key=rank
    )
    fits = [r["fit"] for r in rows if r.get("fit")]
    return {
        "ranked_by": "cost_per_1000_requests_usd",
        "rows": rows,
        "requests": sum(r["requests"] for r in rows),
        "window_cost_usd": round(sum(r["window_cost_usd"] or 0.0 for r in rows), 2),
        "unpriced": sum(1 for r in rows if r["hourly_usd"] is None),
        "with_cheaper_fit": len(fits),
        # Already in the right-sizing total (each is a finding's): never added to it again.
        "fit_monthly_saving_usd": round(sum(f["monthly_saving_usd"] or 0.0 for f in fits), 2),
    }
