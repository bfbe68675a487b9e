"""Service Quotas: how many Metrics Insights alarms CloudWatch allows in an account and region.

GpuAlarms=on makes one Metrics Insights alarm per running GPU instance (aws/alarms.py). CloudWatch lists the quota
as "Number of Metrics Insights alarms" (service code ``monitoring``), 200 per account and region by default; it is
found by name among the account's applied quotas, else among AWS's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from costguard.aws import clients
from costguard.permissions import needs

SERVICE_CODE = "monitoring"  # CloudWatch's service code in Service Quotas
QUOTA_NAME = "Number of Metrics Insights alarms"
DOCUMENTED_DEFAULT = 200  # CloudWatch's service quotas page: 200 per account and region
PERMISSIONS = needs("servicequotas:ListServiceQuotas", "servicequotas:ListAWSDefaultServiceQuotas")


@dataclass(frozen=True)
class Quota:
    value: int
    source: str  # "applied to the account" or "AWS default"


def _is_metrics_insights_alarms(name: str) -> bool:
    text = name.lower()
    return "metrics insights" in text and "alarm" in text


def metrics_insights_alarm_quota(region: str) -> Quota | None:
    """The quota applied to the account, else AWS's default for it; None when Service Quotas lists neither (one
    walk of ListServiceQuotas, then of ListAWSDefaultServiceQuotas, for CloudWatch's quotas)."""
    quotas: Any = clients.client("service-quotas", region)
    for operation, source in (
        ("list_service_quotas", "applied to the account"),
        ("list_aws_default_service_quotas", "AWS default"),
    ):
        for page in quotas.get_paginator(operation).paginate(ServiceCode=SERVICE_CODE):
            for quota in page.get("Quotas", []):
                if _is_metrics_insights_alarms(str(quota.get("QuotaName", ""))) and "Value" in quota:
                    return Quota(int(quota["Value"]), source)
    return None
