"""Seed the embedded CloudWatch with a world's series, straight into moto's backend.

Seeding goes around the API on purpose: serialising tens of thousands of datapoints through boto3 and moto's
request parser took most of a local stack's start-up, and it exercises none of costguard's code. What costguard
reads back still goes through the real boto3 client and moto's GetMetricData and ListMetrics.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from moto.cloudwatch.models import MetricDatum, cloudwatch_backends


def datum(name: str, dims: list[dict[str, str]], at: datetime, value: float, unit: str) -> dict[str, Any]:
    """One PutMetricData entry."""
    return {"MetricName": name, "Dimensions": dims, "Timestamp": at, "Value": value, "Unit": unit}


def publish(account: str, region: str, namespace: str, data: Iterable[dict[str, Any]]) -> None:
    """Store PutMetricData entries as moto does (naive UTC timestamps, float values)."""
    store(account, region, datums(namespace, data))


def datums(namespace: str, data: Iterable[dict[str, Any]]) -> list[MetricDatum]:
    """PutMetricData entries as moto keeps them."""
    return [
        MetricDatum(
            namespace=namespace,
            name=entry["MetricName"],
            value=float(entry["Value"]),
            dimensions=entry["Dimensions"],
            timestamp=naive_utc(entry["Timestamp"]),
            unit=entry.get("Unit"),
        )
        for entry in data
    ]


def store(account: str, region: str, data: Iterable[MetricDatum]) -> None:
    cloudwatch_backends[account][region].metric_data.extend(data)


# The series a world seeds depend on the world and the moment they run to alone: a process that starts the same
# world again (a test suite, the demo's modes) builds them once. moto only reads a datum once it is stored.
_REMEMBERED: OrderedDict[tuple[Any, ...], list[MetricDatum]] = OrderedDict()
_REMEMBER_AT_MOST = 32  # two keys a place: an organization world of six places and a few others


def remembered(key: tuple[Any, ...], build: Callable[[], list[MetricDatum]]) -> list[MetricDatum]:
    """The datums ``build`` gives for ``key``, built once per process (the latest few keys are kept)."""
    found = _REMEMBERED.get(key)
    if found is None:
        found = _REMEMBERED[key] = build()
        while len(_REMEMBERED) > _REMEMBER_AT_MOST:
            _REMEMBERED.popitem(last=False)
    else:
        _REMEMBERED.move_to_end(key)
    return found


def naive_utc(at: datetime) -> datetime:
    """``at`` as moto keeps its times: naive UTC (a naive ``at`` is taken to be UTC already)."""
    return at.astimezone(UTC).replace(tzinfo=None) if at.tzinfo else at
