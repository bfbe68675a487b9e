"""Batched CloudWatch reads: every series a sweep needs, in ceil(queries / 500) GetMetricData calls."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from costguard.aws import clients
from costguard.permissions import needs

GPU_NAMESPACE = "CWAgent"
GPU_METRIC = "nvidia_smi_utilization_gpu"
QUERIES_PER_CALL = 500  # GetMetricData's limit
LIST_METRICS_PAGE = 500

READ_PERMISSIONS = needs("cloudwatch:GetMetricData")  # get_metric_data
LIST_PERMISSIONS = needs("cloudwatch:ListMetrics")  # list_gpu_series

Series = list[tuple[datetime, float]]


@dataclass(frozen=True)
class Query:
    """One series to read; ``key`` says whose it is and what it is."""

    key: tuple[str, str, str]  # (resource id, measure, sub-key such as the GPU index)
    namespace: str
    metric: str
    dimensions: tuple[tuple[str, str], ...]
    stat: str = "Average"


@dataclass
class MetricSet:
    """Series by resource, then by measure and sub-key."""

    series: dict[str, dict[tuple[str, str], Series]] = field(default_factory=lambda: defaultdict(dict))

    def of(self, resource_id: str) -> dict[tuple[str, str], Series]:
        return self.series.get(resource_id, {})

    def gpus(self, resource_id: str) -> dict[int, Series]:
        return {int(sub): s for (measure, sub), s in self.of(resource_id).items() if measure == "gpu"}

    def measure(self, resource_id: str, measure: str) -> Series:
        return self.of(resource_id).get((measure, ""), [])


def get_metric_data(
    region: str, queries: Sequence[Query], start: datetime, end: datetime, period: int
) -> MetricSet:
    """Read every query, 500 to a call, following NextToken; series come back oldest first."""
    cloudwatch = clients.cloudwatch(region)
    result = MetricSet()
    for offset in range(0, len(queries), QUERIES_PER_CALL):
        chunk = queries[offset : offset + QUERIES_PER_CALL]
        request: dict[str, Any] = {
            "MetricDataQueries": [
                {
                    "Id": f"q{n}",
                    "MetricStat": {
                        "Metric": {
                            "Namespace": q.namespace,
                            "MetricName": q.metric,
                            "Dimensions": [{"Name": k, "Value": v} for k, v in q.dimensions],
                        },
                        "Period": period,
                        "Stat": q.stat,
                    },
                    "ReturnData": True,
                }
                for n, q in enumerate(chunk)
            ],
            "StartTime": start,
            "EndTime": end,
            "ScanBy": "TimestampAscending",
        }
        while True:
            response = cloudwatch.get_metric_data(**request)
            for item in response["MetricDataResults"]:
                query = chunk[int(item["Id"][1:])]
                points = list(zip(item.get("Timestamps", []), item.get("Values", []), strict=False))
                resource, measure, sub = query.key
                merged = result.series[resource].setdefault((measure, sub), [])
                merged.extend(points)
            token = response.get("NextToken")
            if not token:
                break
            request["NextToken"] = token
    for by_measure in result.series.values():
        for points in by_measure.values():
            points.sort(key=lambda p: p[0])
    return result


def list_gpu_series(
    region: str, instance_ids: Sequence[str], dimension: str = "InstanceId"
) -> dict[str, list[tuple[tuple[str, str], ...]]]:
    """The per-GPU series the CloudWatch agent publishes, with their exact dimensions, by instance.

    ``dimension`` names the resource: ``InstanceId`` for EC2, ``NotebookInstanceName`` for notebook
    instances (which the agent's nvidia_gpu section appends through its own append_dimensions).

    The agent's dimension set varies with its configuration (host, name, index, InstanceId...), so the
    series are discovered rather than guessed: one ListMetrics call for a single instance, or one walk
    over all recently active GPU series (500 to a page) for a sweep.
    """
    cloudwatch = clients.cloudwatch(region)
    wanted = set(instance_ids)
    request: dict[str, Any] = {"Namespace": GPU_NAMESPACE, "MetricName": GPU_METRIC, "RecentlyActive": "PT3H"}
    if len(wanted) == 1:
        request["Dimensions"] = [{"Name": dimension, "Value": next(iter(wanted))}]
    found: dict[str, list[tuple[tuple[str, str], ...]]] = defaultdict(list)
    for page in cloudwatch.get_paginator("list_metrics").paginate(**request):
        for metric in page["Metrics"]:
            dims = tuple(sorted((d["Name"], d["Value"]) for d in metric.get("Dimensions", [])))
            instance = dict(dims).get(dimension)
            if instance in wanted and dims not in found[instance]:
                found[instance].append(dims)
    return dict(found)
