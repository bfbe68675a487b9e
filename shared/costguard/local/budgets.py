"""The world's budgets, created in the embedded AWS Budgets with their tag filters and spend."""

from __future__ import annotations

from typing import Any

from costguard.aws import clients
from costguard.local.world import World


def seed_budgets(world: World) -> None:
    """One monthly COST budget per world budget; its tag scope becomes a TagKeyValue cost filter, as the
    console writes it for a cost allocation tag (``user:<key>$<value>``)."""
    if not world.budgets:
        return
    budgets: Any = clients.client("budgets", "us-east-1")
    for spec in world.budgets:
        budget: dict[str, Any] = {
            "BudgetName": spec.name,
            "BudgetType": "COST",
            "TimeUnit": "MONTHLY",
            "BudgetLimit": {"Amount": f"{spec.limit_usd:.2f}", "Unit": "USD"},
            "CalculatedSpend": {
                "ActualSpend": {"Amount": f"{spec.actual_usd:.2f}", "Unit": "USD"},
                "ForecastedSpend": {"Amount": f"{spec.forecast_usd:.2f}", "Unit": "USD"},
            },
        }
        filters: dict[str, list[str]] = {}
        if spec.scope_tags:
            filters["TagKeyValue"] = [f"user:{k}${v}" for k, v in spec.scope_tags.items()]
        if spec.linked_accounts:
            filters["LinkedAccount"] = list(spec.linked_accounts)
        if filters:
            budget["CostFilters"] = filters
        budgets.create_budget(AccountId=world.account, Budget=budget)
