"""How much of each instance family's spend Savings Plans already cover: Cost Explorer GetSavingsPlansCoverage.

Cost Explorer is the hub's (the management account sees its linked accounts): one walk per (account, region) and
window, grouped by instance family, filtered to the region and, for another account, to that linked account.
moto has no GetSavingsPlansCoverage: tests/unit/test_holdings_adapters.py holds this to the service model with
botocore's Stubber.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from costguard.aws import clients
from costguard.permissions import needs

CE_REGION = "us-east-1"  # Cost Explorer's one endpoint
# ce:GetSavingsPlansCoverage takes no resource narrowing.
PERMISSIONS = needs("ce:GetSavingsPlansCoverage")


@dataclass(frozen=True)
class Coverage:
    """One family's spend over the window: what Savings Plans covered and what ran on demand."""

    family: str
    covered_usd: float
    on_demand_usd: float

    @property
    def share(self) -> float:
        total = self.covered_usd + self.on_demand_usd
        return self.covered_usd / total if total > 0 else 0.0


def _amount(coverage: dict[str, Any], key: str) -> float:
    try:
        return float(coverage.get(key) or 0.0)
    except ValueError:
        return 0.0


def coverage_by_family(
    region: str, start: date, end: date, account: str | None = None
) -> dict[str, Coverage]:
    """Each EC2 instance family's covered and on-demand spend in ``region`` over [start, end), summed over the
    periods Cost Explorer returns. ``account``: filter to that linked account (the hub's view of a member)."""
    dimensions: list[dict[str, Any]] = [{"Dimensions": {"Key": "REGION", "Values": [region]}}]
    if account:
        dimensions.append({"Dimensions": {"Key": "LINKED_ACCOUNT", "Values": [account]}})
    request: dict[str, Any] = {
        "TimePeriod": {"Start": start.isoformat(), "End": end.isoformat()},
        "Granularity": "MONTHLY",
        "GroupBy": [{"Type": "DIMENSION", "Key": "INSTANCE_FAMILY"}],
        "Filter": {"And": dimensions} if len(dimensions) > 1 else dimensions[0],
    }
    ce = clients.client("ce", CE_REGION)
    sums: dict[str, list[float]] = {}
    while True:
        answer = ce.get_savings_plans_coverage(**request)
        for item in answer.get("SavingsPlansCoverages", []):
            family = (item.get("Attributes") or {}).get("INSTANCE_FAMILY")
            if not family:
                continue
            coverage = item.get("Coverage") or {}
            bucket = sums.setdefault(family, [0.0, 0.0])
            bucket[0] += _amount(coverage, "SpendCoveredBySavingsPlans")
            bucket[1] += _amount(coverage, "OnDemandCost")
        token = answer.get("NextToken")
        if not token:
            break
        request["NextToken"] = token
    return {family: Coverage(family, covered, on_demand) for family, (covered, on_demand) in sums.items()}


# Cost Explorer answers these when it cannot say (not enabled yet, no data for the period, denied): the coverage
# is unknown, which the audit states, rather than a failure of the audit.
NOT_AVAILABLE = frozenset({"DataUnavailableException", "AccessDeniedException", "AccessDenied"})


def covered_shares(
    region: str, start: date, end: date, account: str | None = None
) -> tuple[dict[str, float] | None, str | None]:
    """Each family's covered share of spend (``coverage_by_family``), or None and why Cost Explorer could not
    say."""
    ce = clients.client("ce", CE_REGION)
    try:
        found = coverage_by_family(region, start, end, account)
    except ce.exceptions.ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        if code not in NOT_AVAILABLE:
            raise
        return None, f"Cost Explorer did not answer ({code}): nothing is taken as covered"
    return {family: c.share for family, c in found.items()}, None
