"""The audit's Plan step: the run's items, one per (account, region), written where the Map's ItemReader reads them."""

from __future__ import annotations

import re
from typing import Any

from costguard.audit import store
from costguard.audit.steps import AuditItem, PlanInput
from costguard.aws import organization
from costguard.events.common import to_datetime
from costguard.observability import logger
from costguard.settings import Settings

# plan: an organization deployment with no accounts named lists the organization's accounts; plan_run writes the
# items where the Map's ItemReader reads them.
PLAN_PERMISSIONS = organization.LIST_PERMISSIONS | store.WRITE_PERMISSIONS

_ACCOUNT = re.compile(r"^[0-9]{12}$")


def account_of_arn(arn: str | None) -> str | None:
    """The account field of an ARN (a state machine's, a function's), or None."""
    parts = (arn or "").split(":")
    return parts[4] if len(parts) > 5 and _ACCOUNT.match(parts[4]) else None


def _named_accounts(value: Any) -> list[str]:
    """The execution input's ``accounts``: a list of ids, or one comma-separated string."""
    if value is None or value == [] or value == "":
        return []
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, list):
        raise ValueError(f"input accounts: a list of 12-digit account ids, not {type(value).__name__}")
    accounts = [str(a).strip() for a in names if str(a).strip()]
    bad = [a for a in accounts if not _ACCOUNT.match(a)]
    if bad:
        raise ValueError(f"input accounts: not AWS account ids (12 digits): {bad[:5]}")
    return list(dict.fromkeys(accounts))


def plan_accounts(
    step: PlanInput, settings: Settings, hub: str | None = None
) -> list[tuple[str, str | None]]:
    """The accounts to audit, with their names where known: the execution input's, else the settings', else
    (an organization deployment) every ACTIVE account of the organization, else the hub's own.

    Only the organization case calls Organizations: named accounts need no management or delegated-admin hub,
    and a single-account deployment never asks. The hub is ``settings.home_account``, else the account of the
    state machine's ARN (in the execution's context), else ``hub`` (the function's own ARN's)."""
    home = settings.home_account or account_of_arn(step.state_machine) or hub
    named = _named_accounts(step.input.get("accounts")) or list(settings.accounts)
    if not settings.organization:
        others = [a for a in named if a != home]
        if others:
            raise ValueError(
                f"accounts {others[:5]} asked for, but this is a single-account deployment "
                "(COSTGUARD_MEMBER_ROLE_NAME is empty): only the hub's own account can be audited"
            )
        if not home:
            raise ValueError("the hub's account is unknown: set COSTGUARD_HOME_ACCOUNT")
        return [(home, None)]
    if named:
        return [(a, None) for a in named]
    return [(a.id, a.name) for a in organization.directory().active()]


def plan(
    step: PlanInput, settings: Settings, home_region: str, home_account: str | None = None
) -> dict[str, Any]:
    """The run's name, its moment and its items: every (account, region) to audit. Regions: the execution
    input's, else the settings', else the home region."""
    wanted = step.input.get("regions") or list(settings.regions) or [home_region]
    regions = list(dict.fromkeys(wanted))
    now = to_datetime(step.input["now"]) if step.input.get("now") else step.started
    accounts = plan_accounts(step, settings, home_account)
    items = [
        AuditItem(account=account, region=region, account_name=name).model_dump(mode="json")
        for account, name in accounts
        for region in regions
    ]
    logger.info("audit planned", extra={"accounts": len(accounts), "regions": regions, "items": len(items)})
    return {
        "run": step.execution,
        "now": now.isoformat(),
        "regions": regions,
        "accounts": len(accounts),
        "items": items,
    }


def plan_run(
    step: PlanInput, settings: Settings, home_region: str, home_account: str | None = None
) -> dict[str, Any]:
    """``plan``, its items written to ``runs/<run>/items.json`` (the JSON array the Map's ItemReader reads): the
    state carries their key and count, never the list (17,000 items would pass Step Functions' 256 KB)."""
    planned = plan(step, settings, home_region, home_account)
    key = store.put_json(settings.audit_bucket, f"runs/{planned['run']}/items.json", planned["items"])
    return planned | {"items": {"key": key, "count": len(planned["items"])}}
