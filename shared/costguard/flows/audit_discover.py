"""The audit's Discover step: the item's resources and what GPU work left behind, found in its account (through the
member role in an organization deployment), written to the audit bucket."""

from __future__ import annotations

from typing import Any

from costguard.audit import store
from costguard.audit.discover import DISCOVER_PERMISSIONS, discover
from costguard.audit.gather import PERMISSIONS as GATHER_PERMISSIONS
from costguard.audit.gather import gather
from costguard.audit.runs import audit_rules, task_prefix
from costguard.audit.steps import RegionTask
from costguard.aws import clients
from costguard.settings import Settings

# The watched services' reads, in a member account through its role, and what GPU work left behind
# (audit/gather.py), with the rules' age read first.
DISCOVER_REGION_PERMISSIONS = (
    DISCOVER_PERMISSIONS
    | GATHER_PERMISSIONS
    | store.READ_OPTIONAL_PERMISSIONS
    | store.WRITE_PERMISSIONS
    | clients.ASSUME_PERMISSIONS
)


def discover_region(step: RegionTask, settings: Settings) -> dict[str, Any]:
    """The item's resources, found in its account (through the member role in an organization deployment)."""
    rules = audit_rules(settings)
    with clients.acting_in(step.account):
        subjects = discover(step.region, step.now)
        holdings = gather(step.region, step.now, rules)
    store.put_json(
        settings.audit_bucket,
        f"{task_prefix(step)}/subjects.json",
        [s.model_dump(mode="json") for s in subjects],
    )
    store.put_json(
        settings.audit_bucket, f"{task_prefix(step)}/holdings.json", holdings.model_dump(mode="json")
    )
    return step.model_copy(update={"subjects": len(subjects)}).model_dump(mode="json")
