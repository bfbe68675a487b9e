"""A backtest's history from a real account, read only: the inventory now, and CloudWatch's history.

What AWS keeps without CloudTrail is the current inventory (DescribeInstances, stopped instances included;
the in-progress training jobs; the InService notebooks) and the metrics of the last 15 days at one-minute
resolution (63 days at five minutes). When each instance ran is read from EC2's own CPUUtilization series:
EC2 publishes it every period while an instance runs and never while it is stopped, so the runs of its
datapoints are the instance's running periods. Terminated instances have left the inventory and are not
replayed; training jobs that ended in the period are not either.

GetMetricData returns at most 500 series and 100,800 datapoints per call, so a week of five-minute points
(2,016 per series, plus the verdict window before the period) fills a call with 49 series: the reads are
batched that way, one call per batch, which is the floor of ``ceil(series * points / 100,800)`` to within
the rounding of the last batch.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from costguard.aws import clients
from costguard.aws.inventory import describe_gpu_instances
from costguard.aws.metrics import (
    GPU_METRIC,
    GPU_NAMESPACE,
    GPU_STAT,
    QUERIES_PER_CALL,
    MetricSet,
    Query,
    get_metric_data,
    gpu_index,
)
from costguard.aws.sagemaker import NOTEBOOK_DIMENSION, in_progress_training_jobs, in_service_notebooks
from costguard.aws.sagemaker_metrics import gpu_queries, job_key, notebook_key
from costguard.backtest.history import GpuTrack, History, Interval, Subject, SubjectKind
from costguard.backtest.history import runs_of as history_runs
from costguard.detect.gpu import Series
from costguard.pricing import PriceBook

LIVE_STEP = timedelta(minutes=5)
MAX_DATAPOINTS_PER_CALL = 100_800  # GetMetricData's limit per call, across all its series
STATES = ("pending", "running", "stopping", "stopped")


def points_per_series(start: datetime, end: datetime, step: timedelta) -> int:
    return math.ceil((end - start) / step)


def series_per_call(points: int) -> int:
    return max(1, min(QUERIES_PER_CALL, MAX_DATAPOINTS_PER_CALL // max(1, points)))


def calls_floor(series: int, points: int) -> int:
    """The fewest GetMetricData calls that can return ``series`` series of ``points`` datapoints each."""
    return max(math.ceil(series / QUERIES_PER_CALL), math.ceil(series * points / MAX_DATAPOINTS_PER_CALL))


def discover_gpu_series(
    region: str, names: Sequence[str], dimension: str = "InstanceId"
) -> dict[str, list[tuple[tuple[str, str], ...]]]:
    """The per-GPU series the CloudWatch agent published in the last two weeks (ListMetrics without
    RecentlyActive), by resource: an instance stopped days ago has none in the sweep's three-hour view."""
    wanted = set(names)
    found: dict[str, list[tuple[tuple[str, str], ...]]] = defaultdict(list)
    paginator = clients.cloudwatch(region).get_paginator("list_metrics")
    for page in paginator.paginate(Namespace=GPU_NAMESPACE, MetricName=GPU_METRIC):
        for metric in page["Metrics"]:
            dims = tuple(sorted((d["Name"], d["Value"]) for d in metric.get("Dimensions", [])))
            name = dict(dims).get(dimension)
            if name in wanted and dims not in found[name]:
                found[name].append(dims)
    return dict(found)


def read_history(
    region: str, queries: Sequence[Query], start: datetime, end: datetime, step: timedelta
) -> MetricSet:
    """Every series over [start, end), as many to a call as the datapoint limit allows."""
    per_call = series_per_call(points_per_series(start, end, step))
    merged = MetricSet()
    for offset in range(0, len(queries), per_call):
        part = get_metric_data(
            region, queries[offset : offset + per_call], start, end, int(step.total_seconds())
        )
        for resource, by_measure in part.series.items():
            merged.series[resource].update(by_measure)
    return merged


def runs_of(points: Series, step: timedelta, end: datetime, still_running: bool) -> list[Interval]:
    """Running periods from datapoint runs: a gap of more than two periods is a stop (history.runs_of)."""
    return history_runs([at for at, _ in points], step, end, still_running)


def live_history(
    region: str,
    start: datetime,
    end: datetime,
    prices: PriceBook,
    lookback: timedelta,
    step: timedelta = LIVE_STEP,
) -> History:
    """The account's GPU resources and their series over [start - lookback, end)."""
    instances = [
        i
        for i in describe_gpu_instances(region, states=STATES)
        if i.accelerators is not None and i.accelerators.is_nvidia
    ]
    jobs = [j for j in in_progress_training_jobs(region) if j.accelerators and j.accelerators.is_nvidia]
    notebooks = [n for n in in_service_notebooks(region) if n.accelerators and n.accelerators.is_nvidia]
    gpu_dims = discover_gpu_series(region, [i.id for i in instances]) if instances else {}
    notebook_dims = (
        discover_gpu_series(region, [n.name for n in notebooks], NOTEBOOK_DIMENSION) if notebooks else {}
    )
    queries: list[Query] = []
    for instance in instances:
        for dims in gpu_dims.get(instance.id, []):
            # As the deployed sweep reads them (aws/metrics.metric_queries): each period's Maximum, by GPU number.
            index = gpu_index(instance.id, dims)
            if index is not None:
                queries.append(Query((instance.id, "gpu", index), GPU_NAMESPACE, GPU_METRIC, dims, GPU_STAT))
        queries.append(
            Query((instance.id, "cpu", ""), "AWS/EC2", "CPUUtilization", (("InstanceId", instance.id),))
        )
    queries += gpu_queries(jobs, notebooks, notebook_dims)
    data = read_history(region, queries, start - lookback, end, step)

    def tracks(key: str) -> dict[int, GpuTrack]:
        return {index: GpuTrack(series) for index, series in data.gpus(key).items()}

    subjects: list[Subject] = []
    for instance in instances:
        count = instance.accelerators.count if instance.accelerators else 1
        running = runs_of(
            data.measure(instance.id, "cpu"), step, end, instance.state in ("pending", "running")
        )
        subjects.append(
            Subject(
                SubjectKind.EC2_INSTANCE,
                instance,
                tracks(instance.id),
                running,
                prices.hourly(instance.type, region),
                count,
            )
        )
    for job in jobs:
        began = job.started or start
        subjects.append(
            Subject(
                SubjectKind.TRAINING_JOB,
                job,
                tracks(job_key(job)),
                [(began, end)],
                prices.hourly(job.instance_type, region),
                job.accelerators.count if job.accelerators else 1,
            )
        )
    for notebook in notebooks:
        found = tracks(notebook_key(notebook))
        first = next(iter(found.values())).series if found else []
        subjects.append(
            Subject(
                SubjectKind.NOTEBOOK,
                notebook,
                found,
                runs_of(first, step, end, True) or [(start, end)],
                prices.hourly(notebook.instance_type, region),
                notebook.accelerators.count if notebook.accelerators else 1,
            )
        )
    return History(start, end, step, subjects, source=f"account in {region}")


def api_calls() -> dict[str, Any]:
    """What the read cost, for the report: API calls by operation, from the client factory's counter."""
    return {f"{service}:{operation}": n for (service, operation), n in sorted(clients.calls.items())}
