"""Bedrock Provisioned Throughput behind one adapter. moto implements none of these calls, so the local stack
serves this class from the world file (local/bedrock.py); the real calls are tested with botocore's Stubber
against the Bedrock service model (tests/unit/test_bedrock_adapter.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from costguard.aws import clients
from costguard.detect.bedrock import committed
from costguard.events.common import to_datetime
from costguard.model import ProvisionedThroughput
from costguard.permissions import needs

PAGE = 1000  # ListProvisionedModelThroughputs' maxResults
IN_SERVICE = "InService"
METRIC_NAMESPACE = "AWS/Bedrock"
INVOCATIONS_METRIC = "Invocations"
MODEL_DIMENSION = "ModelId"

# in_service (one list call per 1,000), tags_of (one call per throughput asked about).
READ_PERMISSIONS = needs("bedrock:ListProvisionedModelThroughputs", "bedrock:ListTagsForResource")
# published_model_ids: one ListMetrics walk (500 series a page) per region and sweep.
SERIES_PERMISSIONS = needs("cloudwatch:ListMetrics")
# delete (read again first), tag, untag: what AwsRemediator does to a throughput.
REMEDIATE_PERMISSIONS = needs(
    "bedrock:GetProvisionedModelThroughput",
    "bedrock:DeleteProvisionedModelThroughput",
    "bedrock:TagResource",
    "bedrock:UntagResource",
)


class CommittedThroughput(RuntimeError):
    """AWS refuses to delete a throughput before the end of its commitment term; costguard refuses first."""


def from_api(
    item: dict[str, Any], account: str, region: str, tags: dict[str, str] | None = None
) -> ProvisionedThroughput:
    """A ListProvisionedModelThroughputs summary or a GetProvisionedModelThroughput answer."""
    return ProvisionedThroughput(
        arn=item["provisionedModelArn"],
        name=item["provisionedModelName"],
        account=_account_of(item["provisionedModelArn"]) or account,
        region=region,
        model_arn=item.get("modelArn", ""),
        foundation_model_arn=item.get("foundationModelArn", ""),
        model_units=int(item.get("modelUnits", 0)),
        status=item.get("status", ""),
        created=_aware(item.get("creationTime")),
        commitment=item.get("commitmentDuration") or None,
        commitment_expires=_aware(item.get("commitmentExpirationTime")),
        tags=dict(tags or {}),
    )


def _account_of(arn: str) -> str | None:
    parts = arn.split(":")
    return parts[4] if len(parts) > 4 and parts[4] else None


def _aware(value: datetime | str | None) -> datetime | None:
    return to_datetime(value) if value is not None else None


def published_model_ids(region: str) -> set[str]:
    """Every ModelId value AWS/Bedrock ``Invocations`` has a series under in the region: what CloudWatch lists
    (a series that received data in the last two weeks), on-demand models included. One paginated ListMetrics
    walk per region and sweep, whatever the number of throughputs: the evidence that a throughput's silence is
    its series having no datapoints, not costguard reading a ModelId AWS does not publish under."""
    cloudwatch: Any = clients.cloudwatch(region)
    found: set[str] = set()
    for page in cloudwatch.get_paginator("list_metrics").paginate(
        Namespace=METRIC_NAMESPACE, MetricName=INVOCATIONS_METRIC
    ):
        for metric in page.get("Metrics", []):
            found |= {d["Value"] for d in metric.get("Dimensions", []) if d.get("Name") == MODEL_DIMENSION}
    return found


class ProvisionedThroughputs:
    """ListProvisionedModelThroughputs, their tags, and the delete and mark tag of one."""

    def in_service(self, region: str, account: str) -> list[ProvisionedThroughput]:
        """Every InService throughput of the region, without tags (``tags_of`` reads them where needed)."""
        bedrock: Any = clients.client("bedrock", region, account or None)
        found: list[ProvisionedThroughput] = []
        for page in bedrock.get_paginator("list_provisioned_model_throughputs").paginate(
            statusEquals=IN_SERVICE, maxResults=PAGE
        ):
            found += [from_api(i, account, region) for i in page.get("provisionedModelSummaries", [])]
        return found

    def tags_of(self, region: str, account: str, arns: Sequence[str]) -> dict[str, dict[str, str]]:
        """Each throughput's tags: one ListTagsForResource per ARN (Bedrock has no batched read of tags)."""
        bedrock: Any = clients.client("bedrock", region, account or None)
        return {
            arn: {
                t["key"]: t["value"] for t in bedrock.list_tags_for_resource(resourceARN=arn).get("tags", [])
            }
            for arn in arns
        }

    def describe(self, region: str, account: str, arn: str) -> ProvisionedThroughput:
        bedrock: Any = clients.client("bedrock", region, account or None)
        return from_api(bedrock.get_provisioned_model_throughput(provisionedModelId=arn), account, region)

    def delete(self, region: str, account: str, arn: str, now: datetime) -> None:
        """Delete a throughput, read again first: one under a commitment still running is refused here,
        whatever the caller decided (AWS would refuse it too)."""
        current = self.describe(region, account, arn)
        if committed(current, now):
            until = current.commitment_expires.isoformat() if current.commitment_expires else "unknown"
            raise CommittedThroughput(
                f"{current.name} has a {current.commitment} commitment until {until}: AWS does not allow "
                "deleting it before then"
            )
        self._delete(region, account, arn)

    def _delete(self, region: str, account: str, arn: str) -> None:
        bedrock: Any = clients.client("bedrock", region, account or None)
        bedrock.delete_provisioned_model_throughput(provisionedModelId=arn)

    def tag(self, region: str, account: str, arn: str, key: str, value: str) -> None:
        bedrock: Any = clients.client("bedrock", region, account or None)
        bedrock.tag_resource(resourceARN=arn, tags=[{"key": key, "value": value}])

    def untag(self, region: str, account: str, arn: str, key: str) -> None:
        bedrock: Any = clients.client("bedrock", region, account or None)
        bedrock.untag_resource(resourceARN=arn, tagKeys=[key])


def provisioned_throughputs() -> ProvisionedThroughputs:
    return ProvisionedThroughputs()
