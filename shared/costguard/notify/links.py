"""AWS console links for the resources costguard talks about."""

from __future__ import annotations

import re
from urllib.parse import quote

from costguard.model import Resource, ResourceKind

# The region becomes part of the host name: anything but a region's shape gets the global console instead.
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")


def is_region(region: str) -> bool:
    """Whether a region has a region's shape (it becomes part of a host name)."""
    return bool(_REGION.fullmatch(region))


def console_url(resource: Resource) -> str:
    # Budgets and Cost Anomaly Detection are global: their consoles take no region.
    if resource.kind is ResourceKind.BUDGET:
        return "https://console.aws.amazon.com/billing/home#/budgets"
    if resource.kind is ResourceKind.COST_ANOMALY:
        return "https://console.aws.amazon.com/cost-management/home#/anomaly-detection/overview"
    region = resource.region
    if not is_region(region):
        return "https://console.aws.amazon.com/console/home"
    base = f"https://{region}.console.aws.amazon.com"
    rid = quote(resource.id, safe="")
    match resource.kind:
        case ResourceKind.EC2_INSTANCE:
            return f"{base}/ec2/home?region={region}#InstanceDetails:instanceId={rid}"
        case ResourceKind.TRAINING_JOB:
            return f"{base}/sagemaker/home?region={region}#/jobs/{rid}"
        case ResourceKind.NOTEBOOK:
            return f"{base}/sagemaker/home?region={region}#/notebook-instances/{rid}"
        case ResourceKind.ENDPOINT:
            return f"{base}/sagemaker/home?region={region}#/endpoints/{rid}"
        case ResourceKind.CAPACITY_RESERVATION:
            return f"{base}/ec2/home?region={region}#CapacityReservationDetails:crId={rid}"
        case ResourceKind.JOB_FAMILY | ResourceKind.TRAINING_DIGEST:
            return f"{base}/sagemaker/home?region={region}#/jobs"
        case ResourceKind.BATCH_JOB:
            return f"{base}/batch/home?region={region}#jobs/detail/{rid}"
        case ResourceKind.BATCH_QUEUE:
            return f"{base}/batch/home?region={region}#queues/detail/{quote(resource.arn or resource.id, safe='')}"
        case ResourceKind.COSTGUARD_ALARM:
            return f"{base}/cloudwatch/home?region={region}#alarmsV2:alarm/{rid}"
        case ResourceKind.PROVISIONED_THROUGHPUT:
            return f"{base}/bedrock/home?region={region}#/provisioned-throughput"
    return f"{base}/console/home?region={region}"
