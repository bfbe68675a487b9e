"""The audit's Evaluate step: the item's subjects and usage judged by the rules, with the hub's prices and offerings,
and its commitments, orphaned storage and Compute Optimizer comparison."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from functools import cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from costguard.audit import store
from costguard.audit.discover import PRICED_OPTIONS_PERMISSIONS, priced_options
from costguard.audit.endpoints import endpoint_rows
from costguard.audit.evaluate import Catalog, cost_hours, evaluate, unoffered_moves
from costguard.audit.holdings import Holdings, region_sections
from costguard.audit.model import AuditFinding, Subject, Usage, family_of
from costguard.audit.report import region_result, team_totals
from costguard.audit.rules import Rules
from costguard.audit.runs import audit_rules, subjects_of, task_prefix
from costguard.audit.steps import RegionTask
from costguard.aws import compute_optimizer, savings_plans
from costguard.model import ResourceKind
from costguard.observability import metrics
from costguard.pricing import bundled_regions, price_book, region_prices
from costguard.settings import Settings

# evaluate_region, with audit_rules reading an override that may be missing.
EVALUATE_REGION_PERMISSIONS = (
    store.READ_PERMISSIONS
    | store.READ_OPTIONAL_PERMISSIONS
    | PRICED_OPTIONS_PERMISSIONS
    | store.WRITE_PERMISSIONS
    | savings_plans.PERMISSIONS
    | compute_optimizer.PERMISSIONS
)

# An item's result at most this large (serialized) travels in its outcome as well as in S3: the report then reads
# no object for it. Most items of an organization (no GPU at all) are a few hundred bytes.
INLINE_RESULT_BYTES = 4096


def evaluate_region(step: RegionTask, settings: Settings) -> dict[str, Any]:
    """The item's findings: its subjects and usage judged by the rules, with the hub's prices and offerings."""
    subjects = subjects_of(settings.audit_bucket, step)
    raw = store.get_json(settings.audit_bucket, f"{task_prefix(step)}/usage.json")
    usage = {key: Usage.model_validate(u) for key, u in raw.items()}
    holdings = Holdings.model_validate(
        store.get_json(settings.audit_bucket, f"{task_prefix(step)}/holdings.json")
    )
    result, found = judge_region(step, settings, subjects, usage, holdings, audit_rules(settings))
    key = store.put_json(settings.audit_bucket, f"{task_prefix(step)}/result.json", result)
    metrics.add_metric(name="AuditFindings", unit=MetricUnit.Count, value=found)
    # The outcome is the child execution's output, which the Map's ResultWriter writes to S3: a small result
    # rides along, a large one is read from its key.
    outcome: dict[str, Any] = {
        "account": step.account,
        "account_name": step.account_name,
        "region": step.region,
        "status": "ok",
        "result_key": key,
        "findings": found,
    }
    if len(json.dumps(result, separators=(",", ":"), default=str)) <= INLINE_RESULT_BYTES:
        outcome["result"] = result
    return outcome


def judge_region(
    step: RegionTask,
    settings: Settings,
    subjects: list[Subject],
    usage: dict[str, Usage],
    holdings: Holdings,
    rules: Rules,
) -> tuple[dict[str, Any], int]:
    """The item's result (what the report merges) and its number of findings, from what Discover and ReadMetrics
    read: judged by the rules, with the hub's prices and offerings; its endpoint variants by cost per 1,000
    requests, and its holdings' sections."""
    options, prices = priced_options(
        step.region, price_book(settings.price_source == "live"), {s.instance_type for s in subjects}
    )
    window_hours = settings.audit_lookback_days * 24.0
    catalog = Catalog(options, prices)
    findings, skipped = evaluate(subjects, usage, catalog, rules, window_hours=window_hours)

    def hours_of(subject: Subject) -> float:
        return cost_hours(subject, window_hours, rules)[0]

    costs = region_costs(subjects, prices, window_hours, rules)
    result = region_result(
        step.region,
        findings,
        skipped,
        audited=len(subjects),
        monthly_cost_usd=costs["month_usd"] + costs["window_usd"],
        team_tag=settings.routing_tag_key,
        hours_per_month=rules.hours_per_month,
        window_start=step.now - timedelta(days=settings.audit_lookback_days),
        account=step.account,
        account_name=step.account_name,
        instances=sum(s.instance_count for s in subjects),
        teams=team_totals(subjects, prices, settings.routing_tag_key, rules.hours_per_month, hours_of),
        costs=costs,
    )
    # A rule's move to a type AWS does not offer in the region: named, so its absence is explained.
    result["unoffered"] = unoffered_moves(subjects, findings, catalog, rules, step.region)
    result["endpoints"] = endpoint_rows(
        subjects,
        usage,
        findings,
        skipped,
        prices,
        window_hours=settings.audit_lookback_days * 24.0,
        team_tag=settings.routing_tag_key,
    )
    result |= region_holdings(step, settings, subjects, findings, prices, rules, holdings, hours_of)
    return result, len(findings)


def region_costs(
    subjects: list[Subject], prices: dict[str, float], window_hours: float, rules: Rules
) -> dict[str, Any]:
    """What the item's resources cost, by basis: a month for what runs continuously (``month_usd``), what the
    rest spent over the window (``window_usd``: jobs, and what did not run the whole window), and how many have
    no price (``unpriced``: in neither, never as $0)."""
    costs: dict[str, Any] = {"month_usd": 0.0, "window_usd": 0.0, "unpriced": 0}
    for subject in subjects:
        price = prices.get(subject.instance_type)
        if price is None:
            costs["unpriced"] += 1
            continue
        hours, basis = cost_hours(subject, window_hours, rules)
        costs[f"{basis}_usd"] += price * subject.instance_count * hours
    return costs | {"month_usd": round(costs["month_usd"], 2), "window_usd": round(costs["window_usd"], 2)}


def accelerated(instance_type: str) -> bool:
    """A GPU or accelerator type: its family is one the bundled price table holds (only such families)."""
    return family_of(instance_type) in _accelerated_families()


@cache
def _accelerated_families() -> frozenset[str]:
    return frozenset(family_of(t) for r in bundled_regions() for t in region_prices(r, "ec2"))


def region_holdings(
    step: RegionTask,
    settings: Settings,
    subjects: list[Subject],
    findings: list[AuditFinding],
    prices: dict[str, float],
    rules: Rules,
    holdings: Holdings,
    hours_of: Callable[[Subject], float] | None = None,
) -> dict[str, Any]:
    """The item's commitments, orphaned storage, untagged GPU spend and Compute Optimizer comparison: what
    Discover gathered (``holdings``), Savings Plans coverage and Compute Optimizer's recommendations read here,
    the sections built by audit/holdings.py."""
    member = step.account if settings.organization else None
    start = (step.now - timedelta(days=settings.audit_lookback_days)).date()
    coverage = savings_plans.covered_shares(step.region, start, step.now.date(), member)
    arns = [
        compute_optimizer.instance_arn(s.region, s.account, s.id)
        for s in subjects
        if s.kind is ResourceKind.EC2_INSTANCE
    ]
    recommendations = compute_optimizer.instance_recommendations(step.region, arns, member)
    return region_sections(
        holdings,
        subjects,
        findings,
        prices,
        region=step.region,
        account=step.account,
        now=step.now,
        window_hours=settings.audit_lookback_days * 24.0,
        rules=rules,
        coverage=coverage,
        recommendations=recommendations,
        required_tags=settings.required_tags,
        team_tag=settings.routing_tag_key,
        accelerated=accelerated,
        hours_of=hours_of,
    )
