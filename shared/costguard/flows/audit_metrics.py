"""The audit's ReadMetrics step: the item's usage over the window, read from CloudWatch in its account."""

from __future__ import annotations

from typing import Any

from costguard.audit import store
from costguard.audit.reading import read_usage
from costguard.audit.runs import subjects_of, task_prefix
from costguard.audit.steps import RegionTask
from costguard.aws import clients
from costguard.aws import metrics as cloudwatch_metrics
from costguard.settings import Settings

# The usage reads, in a member account through its role; the subjects read and the usage written in the hub.
READ_REGION_METRICS_PERMISSIONS = (
    cloudwatch_metrics.READ_PERMISSIONS
    | cloudwatch_metrics.LIST_PERMISSIONS
    | store.READ_PERMISSIONS
    | store.WRITE_PERMISSIONS
    | clients.ASSUME_PERMISSIONS
)


def read_region_metrics(step: RegionTask, settings: Settings) -> dict[str, Any]:
    """The item's usage over the window, read from CloudWatch in its account."""
    subjects = subjects_of(settings.audit_bucket, step)
    with clients.acting_in(step.account):
        usage = read_usage(step.region, subjects, step.now, settings.audit_lookback_days)
    store.put_json(
        settings.audit_bucket,
        f"{task_prefix(step)}/usage.json",
        {key: u.model_dump(mode="json") for key, u in usage.items()},
    )
    return step.model_dump(mode="json")
