"""Batched CloudWatch reads: every series a sweep needs, in ceil(queries / 500) GetMetricData calls."""

from __future__ import annotations

import logging
import re
import sys
from collections import defaultdict
from collections.abc import Container, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from costguard.aws import clients
from costguard.model import Ec2Instance
from costguard.permissions import needs

# A child of powertools' "costguard" logger (POWERTOOLS_SERVICE_NAME), which formats and ships its records.
# costguard.observability itself is not imported here: powertools reads its settings when it is first imported,
# and this module is imported early by the local tools, before the local stack has set them.
logger = logging.getLogger(__name__)

GPU_NAMESPACE = "CWAgent"
GPU_METRIC = "nvidia_smi_utilization_gpu"
# GPU utilization is read as each period's Maximum, never its Average: anyone allowed cloudwatch:PutMetricData
# can add datapoints to any series, and with Average 99 zeros a minute turn a 94% GPU into a 0.94% one. With
# Maximum an added datapoint can only make a GPU look busier.
GPU_STAT = "Maximum"
QUERIES_PER_CALL = 500  # GetMetricData's limit
LIST_METRICS_PAGE = 500

READ_PERMISSIONS = needs("cloudwatch:GetMetricData")  # get_metric_data
LIST_PERMISSIONS = needs("cloudwatch:ListMetrics")  # list_gpu_series

Series = list[tuple[datetime, float]]
Dimensions = tuple[tuple[str, str], ...]

# What the CloudWatch agent writes in a GPU series' ``index`` dimension: nvidia-smi's GPU number.
_GPU_INDEX = re.compile(r"[0-9]{1,4}")
UNREADABLE_SERIES_METRIC = "UnreadableGpuSeries"


def gpu_index(resource_id: str, dims: Dimensions) -> str | None:
    """The GPU a per-GPU series is about, as a plain decimal (``"0"`` when it has no ``index`` dimension).

    None for a series whose ``index`` is not a GPU number (``gpu0``, say): anyone allowed PutMetricData can
    publish one, and it must not stop the judging of everything else. Such a series is logged with the
    resource and the value, counted (``UnreadableGpuSeries``) and skipped.
    """
    raw = dict(dims).get("index", "0")
    if _GPU_INDEX.fullmatch(raw):
        return str(int(raw))
    logger.warning(
        "unreadable GPU series skipped",
        extra={
            "resource": resource_id,
            "index": raw[:100],
            "dimensions": {k[:100]: v[:100] for k, v in dims[:10]},
        },
    )
    _count(UNREADABLE_SERIES_METRIC)
    return None


def _count(name: str) -> None:
    """One more of ``name`` in the running handler's metrics (flushed by its ``log_metrics``). Outside any
    handler (a backtest, a benchmark) costguard.observability is not loaded, and the log line alone says it."""
    observability = sys.modules.get("costguard.observability")
    if observability is not None:
        observability.metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)


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
        """Per-GPU series by GPU number; a sub-key that is not one is skipped (queries built with
        ``gpu_index`` never have one), never raised out of the whole read."""
        found: dict[int, Series] = {}
        for (measure, sub), series in self.of(resource_id).items():
            if measure != "gpu":
                continue
            if not _GPU_INDEX.fullmatch(sub):
                logger.warning(
                    "unreadable GPU series skipped", extra={"resource": resource_id, "index": sub[:100]}
                )
                continue
            index = int(sub)
            # "07" and "7" are one GPU: merged, oldest first.
            found[index] = sorted(found[index] + series, key=lambda p: p[0]) if index in found else series
        return found

    def measure(self, resource_id: str, measure: str) -> Series:
        return self.of(resource_id).get((measure, ""), [])

    def add(self, other: MetricSet) -> None:
        """Take in the series of another read (of other measures of the same resources)."""
        for resource, by_measure in other.series.items():
            self.series.setdefault(resource, {}).update(by_measure)


def get_metric_data(
    region: str, queries: Sequence[Query], start: datetime, end: datetime, period: int
) -> MetricSet:
    """Read every query, 500 to a call, following NextToken; series come back oldest first."""
    cloudwatch = clients.cloudwatch(region)
    result = MetricSet()
    writers: dict[tuple[str, str, str], set[int]] = defaultdict(set)  # the queries behind each key
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
                number = int(item["Id"][1:])
                query = chunk[number]
                writers[query.key].add(offset + number)
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
    # Two series for one GPU (the agent's dimension set changed, or someone published under another one):
    # one point per period, their Maximum, so that neither counts a minute twice nor pulls a mean down.
    for (resource, measure, sub), numbers in writers.items():
        if len(numbers) > 1 and all(queries[n].stat == "Maximum" for n in numbers):
            points = result.series[resource][(measure, sub)]
            points[:] = _max_per_timestamp(points)
    return result


def _max_per_timestamp(points: Series) -> Series:
    """Sorted points with one per timestamp, the largest."""
    kept: Series = []
    for at, value in points:
        if kept and kept[-1][0] == at:
            if value > kept[-1][1]:
                kept[-1] = (at, value)
        else:
            kept.append((at, value))
    return kept


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


def metric_queries(
    instances: Sequence[Ec2Instance], gpu_series: dict[str, list[tuple[tuple[str, str], ...]]]
) -> list[Query]:
    """One query per published GPU series (its per-minute Maximum), plus CPU and network per instance (the
    starvation evidence). A series whose ``index`` is not a GPU number is logged, counted and skipped."""
    return gpu_queries(instances, gpu_series) + evidence_queries(instances)


def gpu_queries(
    instances: Sequence[Ec2Instance], gpu_series: dict[str, list[tuple[tuple[str, str], ...]]]
) -> list[Query]:
    """One query per published GPU series of these instances (its per-minute Maximum)."""
    queries = []
    for instance in instances:
        for dims in gpu_series.get(instance.id, []):
            index = gpu_index(instance.id, dims)
            if index is not None:
                queries.append(Query((instance.id, "gpu", index), GPU_NAMESPACE, GPU_METRIC, dims, GPU_STAT))
    return queries


def evidence_queries(
    instances: Sequence[Ec2Instance],
    *,
    network: Container[str] | None = None,
    outbound: Container[str] = (),
) -> list[Query]:
    """CPU per instance, network in for the instances in ``network`` (every one when None) and network out for
    those in ``outbound``: what a starved verdict states, and what EC2 itself says of an instance whose GPU
    series read idle (detect/host_evidence.py: CPU, network in and out), read for those only."""
    queries = []
    for instance in instances:
        ec2_dims = (("InstanceId", instance.id),)
        queries.append(Query((instance.id, "cpu", ""), "AWS/EC2", "CPUUtilization", ec2_dims))
        if network is None or instance.id in network or instance.id in outbound:
            queries.append(
                Query((instance.id, "network_in", ""), "AWS/EC2", "NetworkIn", ec2_dims, stat="Sum")
            )
        if instance.id in outbound:
            queries.append(
                Query((instance.id, "network_out", ""), "AWS/EC2", "NetworkOut", ec2_dims, stat="Sum")
            )
    return queries
