"""The audit's figures as a reader acts on them (pure): which findings are measured and safe to do now, which need
a change of code, market or more data first, the two totals, what "confidence" and "risk" mean, and where each
resource is in the AWS console.

A finding is **safe to do now** when it is high confidence and low risk: compute and memory measured with headroom
over a full window, projected at most 60% per GPU. Every other finding says what it needs first. The two totals
together are the findings' total; a saving of unknown price is in neither (counted, never summed as zero).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

SAFE = "safe_now"
CONDITIONAL = "needs_change"
TIER_NAMES = {
    SAFE: "safe to do now",
    CONDITIONAL: "needs a change of code, market or more data",
}
LEGEND = {
    "confidence": (
        "How sure the measurement is. High: compute and GPU memory both measured with headroom over the full "
        "window (95% of it with data). Medium: part of the window, a declared model size or an assumed spot "
        "discount. Low: the fit could not be measured, or the code must change (Trainium)."
    ),
    "risk": (
        "How likely the target cannot carry the work (Compute Optimizer's sense). Low: projected p95 at most 60% "
        "per GPU, memory checked against a measured peak, a full window. Medium: at most 80%, a partial window, or "
        "memory sized from a declared model; spot and Trainium always at least medium. High: nothing measured."
    ),
    SAFE: "Safe to do now: high confidence and low risk. Everything else says what it needs first.",
    "cost": (
        "Figures are a month (730 h) for what runs continuously over the whole window; a training job, and "
        "anything that did not run the whole window, is costed by what it spent over the window, not projected. "
        "'cost unknown': no price for the type in the region, never counted as $0.00."
    ),
}


def needs(finding: dict[str, Any]) -> list[str]:
    """What a finding needs before it can be done, in words; empty when it is safe to do now."""
    wanted: list[str] = []
    evidence = finding.get("evidence") or {}
    if finding.get("reason") == "trainium_candidate":
        wanted.append("a change of code (port to the Neuron SDK and validate)")
    if finding.get("recommended_market") == "spot" and finding.get("current_market") != "spot":
        wanted.append("a change of market (spot: interruptions, an assumed discount)")
    observed, window = evidence.get("hours_observed"), evidence.get("window_hours")
    if observed is None:
        wanted.append("measurements (nothing measured shows the fit)")
    elif window and observed < 0.95 * window:
        wanted.append(f"more data ({observed:g} h measured of {window:g} h)")
    if evidence.get("model_params_billion") is not None and finding.get("confidence") != "high":
        wanted.append("the declared model size confirmed (memory sized from a tag, not measured)")
    if finding.get("risk") not in ("low", None) and not wanted:
        projected = finding.get("projected_gpu_p95_percent")
        shown = "unknown" if projected is None else f"{projected:g}%"
        wanted.append(f"a load test on the target (projected p95 {shown} per GPU, {finding['risk']} risk)")
    if finding.get("confidence") != "high" and not wanted:
        wanted.append(f"more data ({finding.get('confidence')} confidence)")
    return wanted


def tier(finding: dict[str, Any]) -> str:
    return SAFE if finding.get("confidence") == "high" and finding.get("risk") == "low" else CONDITIONAL


def with_tier(finding: dict[str, Any]) -> dict[str, Any]:
    """A finding with its tier, what it needs first, and its console link."""
    resource = finding["resource"]
    return finding | {
        "tier": tier(finding),
        "needs": [] if tier(finding) == SAFE else needs(finding),
        "console_url": console_url(resource["kind"], resource["id"], resource["region"]),
    }


def _sum(findings: Sequence[dict[str, Any]]) -> float:
    return round(
        sum(float(f["monthly_saving_usd"]) for f in findings if f.get("monthly_saving_usd") is not None), 2
    )


def saving_totals(findings: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The headline's two totals (together the findings' total) and the findings whose saving is unknown."""
    safe = [f for f in findings if f.get("tier", tier(f)) == SAFE]
    other = [f for f in findings if f.get("tier", tier(f)) != SAFE]
    return {
        "safe_monthly_saving_usd": _sum(safe),
        "safe_findings": len(safe),
        "safe_unpriced": sum(1 for f in safe if f.get("monthly_saving_usd") is None),
        "conditional_monthly_saving_usd": _sum(other),
        "conditional_findings": len(other),
        "conditional_unpriced": sum(1 for f in other if f.get("monthly_saving_usd") is None),
        "unpriced_findings": sum(1 for f in findings if f.get("monthly_saving_usd") is None),
    }


def _console_host(region: str) -> str:
    if region.startswith("cn-"):
        return "console.amazonaws.cn"
    if region.startswith("us-gov-"):
        return "console.amazonaws-us-gov.com"
    return f"{region}.console.aws.amazon.com"


def console_url(kind: str, resource_id: str, region: str) -> str | None:
    """Where a person opens the resource in the AWS console; None for a kind without a page."""
    base = f"https://{_console_host(region)}"
    region_q = quote(region, safe="")
    if kind == "ec2_instance":
        return f"{base}/ec2/home?region={region_q}#InstanceDetails:instanceId={quote(resource_id, safe='')}"
    pages = {"training_job": "jobs", "notebook_instance": "notebook-instances", "endpoint": "endpoints"}
    if kind not in pages:
        return None
    name = (
        resource_id.split("/", 1)[0] if kind == "endpoint" else resource_id
    )  # an endpoint's variant: its endpoint
    return f"{base}/sagemaker/home?region={region_q}#/{pages[kind]}/{quote(name, safe='')}"
