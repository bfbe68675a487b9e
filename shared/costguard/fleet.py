"""What GPU and accelerator resources run now in one region, priced and with their verdicts, in batched reads.

Read by the budgets flow (the budget-breach playbook and cost anomalies): EC2 instances (aws/inventory.py), SageMaker
training jobs, notebooks and endpoints (aws/sagemaker.py), verdicts from the same readers and thresholds as
the GPU and SageMaker sweeps (detect/gpu.py, detect/sagemaker.py).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from costguard.aws import inventory, metrics, sagemaker
from costguard.aws.metrics import MetricSet, metric_queries
from costguard.aws.sagemaker import NOTEBOOK_DIMENSION
from costguard.aws.sagemaker_metrics import (
    ENDPOINT_PERIOD,
    gpu_queries,
    invocation_queries,
    invocations_of,
    job_key,
    notebook_key,
)
from costguard.detect.budgets import Running
from costguard.detect.gpu import PERIOD, Thresholds, instance_resource, read_gpus, thresholds_from
from costguard.detect.sagemaker import (
    endpoint_resource,
    job_resource,
    notebook_resource,
    read_training_job,
)
from costguard.model import Accelerators, Ec2Instance, Endpoint, NotebookInstance, ResourceKind, TrainingJob
from costguard.reads import Reads
from costguard.runtime import PRICES_PERMISSIONS, Runtime

# running_in: every kind's inventory, metrics and prices.
RUNNING_PERMISSIONS = (
    inventory.PERMISSIONS
    | sagemaker.INVENTORY_PERMISSIONS
    | metrics.READ_PERMISSIONS
    | metrics.LIST_PERMISSIONS
    | PRICES_PERMISSIONS
)

ALL_KINDS = frozenset(
    {ResourceKind.EC2_INSTANCE, ResourceKind.TRAINING_JOB, ResourceKind.NOTEBOOK, ResourceKind.ENDPOINT}
)


class _Price(Protocol):
    """The $/h of ``count`` of an instance type in the region; None when it has no price."""

    def __call__(self, instance_type: str | None, count: int = 1) -> float | None: ...


def _gpus(accelerators: Accelerators | None) -> str:
    return f"{accelerators.count} x {accelerators.model}" if accelerators else ""


@dataclass(frozen=True)
class _Fleet:
    """What runs in a region, of the kinds asked for: the GPU and accelerator resources only."""

    instances: list[Ec2Instance]
    jobs: list[TrainingJob]
    notebooks: list[NotebookInstance]
    endpoints: list[Endpoint]

    @property
    def nvidia_instances(self) -> list[Ec2Instance]:
        return [i for i in self.instances if i.accelerators and i.accelerators.is_nvidia]

    @property
    def nvidia_jobs(self) -> list[TrainingJob]:
        return [j for j in self.jobs if j.accelerators and j.accelerators.is_nvidia]

    @property
    def nvidia_notebooks(self) -> list[NotebookInstance]:
        return [n for n in self.notebooks if n.accelerators and n.accelerators.is_nvidia]


def running_in(
    region: str, runtime: Runtime, now: datetime, kinds: Collection[ResourceKind] = ALL_KINDS
) -> list[Running]:
    """Every running GPU or accelerator resource of these kinds, with $/h and verdict.

    One DescribeInstances walk, the SageMaker list walks, one ListMetrics walk per resource dimension, and
    GetMetricData for every GPU series at once (500 queries a call), plus one for endpoint invocations.
    """
    thresholds = thresholds_from(runtime.settings)
    reads = runtime.reads
    fleet = _running_fleet(region, kinds, reads)
    data = _gpu_metrics(region, fleet, now, max(thresholds.idle_window, thresholds.starved_window), reads)
    endpoint_window = timedelta(hours=runtime.settings.endpoint_idle_hours)
    calls = _endpoint_calls(region, fleet.endpoints, now, endpoint_window, reads)

    def price(instance_type: str | None, count: int = 1) -> float | None:
        found = runtime.prices.hourly(instance_type, region)
        return round(found.usd_per_hour * count, 4) if found else None

    return [
        *_instance_rows(fleet, data, now, thresholds, price),
        *_job_rows(fleet, data, now, thresholds, price),
        *_notebook_rows(fleet, data, now, thresholds, price),
        *(_endpoint_row(e, calls, now, endpoint_window, runtime, price) for e in fleet.endpoints),
    ]


def _running_fleet(region: str, kinds: Collection[ResourceKind], reads: Reads) -> _Fleet:
    """The list walks for the kinds asked for: notebooks with an accelerator, endpoints with a live variant
    that has one."""
    want, listed = set(kinds), reads.sagemaker
    instances = reads.inventory.describe_gpu_instances(region) if ResourceKind.EC2_INSTANCE in want else []
    jobs = listed.in_progress_training_jobs(region) if ResourceKind.TRAINING_JOB in want else []
    notebooks = [
        n
        for n in (listed.in_service_notebooks(region) if ResourceKind.NOTEBOOK in want else [])
        if n.accelerators
    ]
    endpoints = [
        e
        for e in (listed.in_service_endpoints(region) if ResourceKind.ENDPOINT in want else [])
        if any(v.accelerators is not None and v.instance_count > 0 for v in e.variants)
    ]
    return _Fleet(instances, jobs, notebooks, endpoints)


def _gpu_metrics(region: str, fleet: _Fleet, now: datetime, window: timedelta, reads: Reads) -> MetricSet:
    """Every NVIDIA GPU series of the fleet over ``window``: the series listed, then read in one batch."""
    nvidia_instances, nvidia_jobs, nvidia_notebooks = (
        fleet.nvidia_instances,
        fleet.nvidia_jobs,
        fleet.nvidia_notebooks,
    )
    queries = []
    if nvidia_instances:
        ids = [i.id for i in nvidia_instances]
        queries += metric_queries(nvidia_instances, reads.metrics.list_gpu_series(region, ids))
    if nvidia_jobs or nvidia_notebooks:
        series = (
            reads.metrics.list_gpu_series(region, [n.name for n in nvidia_notebooks], NOTEBOOK_DIMENSION)
            if nvidia_notebooks
            else {}
        )
        queries += gpu_queries(nvidia_jobs, nvidia_notebooks, series)
    if not queries:
        return MetricSet()
    return reads.metrics.get_metric_data(region, queries, now - window, now, int(PERIOD.total_seconds()))


def _endpoint_calls(
    region: str, endpoints: list[Endpoint], now: datetime, window: timedelta, reads: Reads
) -> MetricSet:
    """The endpoints' invocations over ``window``."""
    if not endpoints:
        return MetricSet()
    return reads.metrics.get_metric_data(
        region, invocation_queries(endpoints), now - window, now, int(ENDPOINT_PERIOD.total_seconds())
    )


def _instance_rows(
    fleet: _Fleet, data: MetricSet, now: datetime, thresholds: Thresholds, price: _Price
) -> list[Running]:
    """The EC2 instances; an NVIDIA one with its GPU verdict (Neuron and other accelerators publish other
    metrics: not judged, "unknown")."""
    judged = {i.id for i in fleet.nvidia_instances}
    rows = []
    for instance in fleet.instances:
        verdict = "unknown"
        if instance.id in judged and instance.accelerators:
            reading = read_gpus(data.gpus(instance.id), now, thresholds, instance.accelerators.count)
            verdict = reading.verdict.value
        rows.append(
            Running(instance_resource(instance), price(instance.type), verdict, _gpus(instance.accelerators))
        )
    return rows


def _job_rows(
    fleet: _Fleet, data: MetricSet, now: datetime, thresholds: Thresholds, price: _Price
) -> list[Running]:
    """The training jobs, priced for all their hosts; an NVIDIA one with its GPU verdict."""
    judged = {j.name for j in fleet.nvidia_jobs}
    rows = []
    for job in fleet.jobs:
        verdict = "unknown"
        if job.name in judged:
            verdict = read_training_job(data.gpus(job_key(job)), job, now, thresholds).verdict.value
        rows.append(
            Running(
                job_resource(job),
                price(job.instance_type, job.instance_count),
                verdict,
                f"{job.instance_count} host(s) of {_gpus(job.accelerators)}",
            )
        )
    return rows


def _notebook_rows(
    fleet: _Fleet, data: MetricSet, now: datetime, thresholds: Thresholds, price: _Price
) -> list[Running]:
    """The notebooks; an NVIDIA one with its GPU verdict."""
    judged = {n.name for n in fleet.nvidia_notebooks}
    rows = []
    for notebook in fleet.notebooks:
        verdict = "unknown"
        if notebook.name in judged and notebook.accelerators:
            gpus = data.gpus(notebook_key(notebook))
            verdict = read_gpus(gpus, now, thresholds, notebook.accelerators.count).verdict.value
        rows.append(
            Running(
                notebook_resource(notebook),
                price(notebook.instance_type),
                verdict,
                _gpus(notebook.accelerators),
            )
        )
    return rows


def _endpoint_row(
    endpoint: Endpoint, calls: MetricSet, now: datetime, window: timedelta, runtime: Runtime, price: _Price
) -> Running:
    """An endpoint, priced for its live variants (unknown if any is unpriced): busy when it was called in the
    window, idle when not, too early while younger than the window."""
    live = [v for v in endpoint.variants if v.instance_type and v.instance_count > 0]
    costs = [price(v.instance_type, v.instance_count) for v in live]
    invocations = invocations_of(endpoint, calls)
    young = endpoint.created is not None and now - endpoint.created < window
    verdict = "busy" if (invocations or 0) > 0 else ("too_early" if young else "idle")
    return Running(
        endpoint_resource(endpoint),
        round(sum(c for c in costs if c is not None), 4) if all(c is not None for c in costs) else None,
        verdict,
        f"{invocations or 0:g} invocations in {runtime.settings.endpoint_idle_hours} h",
    )
