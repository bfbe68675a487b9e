"""The demo's headline figures: each resource's dollars counted once, context figures never added in. Pure.

Findings overlap on purpose: a job warned at 80% of its ceiling and stopped at 100% is one job; a failure loop
sums jobs that have their own ``training_job_failed`` findings; a budget's month-to-date spend and an anomaly's
impact are the account's spend, not a flagged resource's. Adding every finding's ``cost_usd`` would count the
same dollars two, three or four times.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from costguard.model import Reason, ResourceKind

# Figures about many resources or the whole account: shown as context, never added to what flagged resources spent.
AGGREGATES = frozenset(
    {
        Reason.BUDGET_BREACH.value,  # the budget's month-to-date spend
        Reason.COST_ANOMALY.value,  # the anomaly's impact on the account's spend
        Reason.JOB_FAILURE_LOOP.value,  # the family's failed jobs, each its own training_job_failed
        Reason.TRAINING_DIGEST.value,  # the day's finished runs, flagged or not
        Reason.LEDGER_DAILY.value,  # what stops kept off the bill: a saving, never a spend
        Reason.LEDGER_WEEKLY.value,
    }
)
# Whole-queue findings of batch_retry_loop count jobs that have their own job-level findings.
_AGGREGATE_KINDS = frozenset(
    kind.value
    for kind in (
        ResourceKind.BATCH_QUEUE,
        ResourceKind.JOB_FAMILY,
        ResourceKind.TRAINING_DIGEST,
        ResourceKind.BUDGET,
        ResourceKind.COST_ANOMALY,
        ResourceKind.SAVINGS_LEDGER,
    )
)
# Decisions that mean costguard would stop (or has marked to stop) the resource.
_STOPPING = frozenset({"mark", "stop"})


@dataclass(frozen=True)
class Headline:
    """What the demo's summary line says, with the per-resource figures it adds up."""

    spent_by_resource: dict[tuple[str, str], float] = field(default_factory=dict)  # (kind, id) -> USD so far
    hourly_by_resource: dict[tuple[str, str], float] = field(default_factory=dict)  # would be stopped: USD/h
    context: list[tuple[str, str, float]] = field(
        default_factory=list
    )  # (reason, resource id, USD): not added
    names: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, id) -> what it is called

    @property
    def spent_usd(self) -> float:
        return round(sum(self.spent_by_resource.values()), 2)

    @property
    def hourly_usd(self) -> float:
        return round(sum(self.hourly_by_resource.values()), 2)


def headline(findings: Iterable[dict[str, Any]], decisions: Iterable[dict[str, Any]]) -> Headline:
    """Findings and decisions in the order they happened (replay order).

    Spent: per resource, its latest figure (a running job's cost only grows, so the latest is the whole of it).
    Hourly: per resource whose latest decision marks or stops it, its price per hour.
    """
    spent: dict[tuple[str, str], float] = {}
    context: list[tuple[str, str, float]] = []
    for finding in findings:
        cost = finding.get("cost_usd")
        if cost is None:
            continue
        key = (str(finding.get("resource_kind")), str(finding.get("resource_id")))
        if finding.get("reason") in AGGREGATES or key[0] in _AGGREGATE_KINDS:
            context.append((str(finding.get("reason")), key[1], float(cost)))
            continue
        spent[key] = float(cost)  # the latest figure stands
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for decision in decisions:
        latest[(str(decision.get("resource_kind")), str(decision.get("resource_id")))] = decision
    hourly = {
        key: float(d["hourly_usd"])
        for key, d in latest.items()
        if d.get("action") in _STOPPING and d.get("hourly_usd") is not None
    }
    names = {key: str(d.get("resource_name") or key[1]) for key, d in latest.items()}
    return Headline(spent, hourly, context, names)


def summary_lines(head: Headline) -> list[str]:
    """The summary as printed: the two totals, then the context figures that are not part of them."""
    lines = [
        f"${head.spent_usd:,.2f} already spent by the {len(head.spent_by_resource)} flagged resources with a known "
        f"cost (each counted once, at its latest figure); ${head.hourly_usd:,.2f}/h on the "
        f"{len(head.hourly_by_resource)} resources costguard would stop."
    ]
    if head.hourly_by_resource:
        stopping = sorted(head.hourly_by_resource.items(), key=lambda item: -item[1])
        lines.append(
            "Would stop (in remediate mode): "
            + ", ".join(f"{head.names.get(key, key[1])} (${hourly:,.2f}/h)" for key, hourly in stopping)
            + "."
        )
    if head.context:
        lines.append("Not added to those (about many resources or the whole account):")
        seen: set[tuple[str, str]] = set()
        for reason, resource, cost in reversed(head.context):  # the latest figure of each
            if (reason, resource) in seen:
                continue
            seen.add((reason, resource))
            lines.append(f"  {reason} {resource}: ${cost:,.2f}")
    return lines
