"""The world's budgets, created in the embedded AWS Budgets with their tag filters and spend."""

from __future__ import annotations

from typing import Any

from costguard.aws import clients
from costguard.events.budgets import budget_definition
from costguard.local.world import World


def seed_budgets(world: World) -> None:
    """One monthly COST budget per world budget; its tag scope becomes a TagKeyValue cost filter, as the
    console writes it for a cost allocation tag (``user:<key>$<value>``)."""
    if not world.budgets:
        return
    budgets: Any = clients.client("budgets", "us-east-1")
    for spec in world.budgets:
        definition = budget_definition(
            spec.name,
            limit_usd=spec.limit_usd,
            actual_usd=spec.actual_usd,
            forecast_usd=spec.forecast_usd,
            scope_tags=spec.scope_tags,
            linked_accounts=spec.linked_accounts,
        )
        budgets.create_budget(AccountId=world.account, Budget=definition)
