"""Seed the embedded CloudWatch with a world's series, straight into moto's backend.

Seeding goes around the API on purpose: serialising tens of thousands of datapoints through boto3 and moto's
request parser took most of a local stack's start-up, and it exercises none of costguard's code. What costguard
reads back still goes through the real boto3 client and moto's GetMetricData and ListMetrics.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from moto.cloudwatch.models import MetricDatum, cloudwatch_backends


def datum(name: str, dims: list[dict[str, str]], at: datetime, value: float, unit: str) -> dict[str, Any]:
    """One PutMetricData entry."""
    return {"MetricName": name, "Dimensions": dims, "Timestamp": at, "Value": value, "Unit": unit}


def publish(account: str, region: str, namespace: str, data: Iterable[dict[str, Any]]) -> None:
    """Store PutMetricData entries as moto does (naive UTC timestamps, float values)."""
    backend = cloudwatch_backends[account][region]
    backend.metric_data.extend(
        MetricDatum(
            namespace=namespace,
            name=entry["MetricName"],
            value=float(entry["Value"]),
            dimensions=entry["Dimensions"],
            timestamp=_naive_utc(entry["Timestamp"]),
            unit=entry.get("Unit"),
        )
        for entry in data
    )


def _naive_utc(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(tzinfo=None) if at.tzinfo else at
