"""What GPU and accelerator resources run now in one region, priced and with their verdicts, in batched reads.

Shared by the budget-breach playbook and cost anomalies: EC2 instances (aws/inventory.py), SageMaker
training jobs, notebooks and endpoints (aws/sagemaker.py), verdicts from the same readers and thresholds as
the GPU and SageMaker sweeps (detect/gpu.py, detect/sagemaker.py).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from costguard.aws import inventory, metrics, sagemaker
from costguard.aws.inventory import describe_gpu_instances
from costguard.aws.metrics import MetricSet, get_metric_data, list_gpu_series, metric_queries
from costguard.aws.sagemaker import (
    NOTEBOOK_DIMENSION,
    in_progress_training_jobs,
    in_service_endpoints,
    in_service_notebooks,
)
from costguard.detect.budgets import Running
from costguard.detect.gpu import PERIOD, instance_resource, read_gpus, thresholds_from
from costguard.detect.sagemaker import (
    endpoint_resource,
    job_resource,
    notebook_resource,
    read_training_job,
)
from costguard.flows.sagemaker import (
    ENDPOINT_PERIOD,
    gpu_queries,
    invocation_queries,
    invocations_of,
    job_key,
    notebook_key,
)
from costguard.model import Accelerators, ResourceKind
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


def _gpus(accelerators: Accelerators | None) -> str:
    return f"{accelerators.count} x {accelerators.model}" if accelerators else ""


def running_in(
    region: str, runtime: Runtime, now: datetime, kinds: Collection[ResourceKind] = ALL_KINDS
) -> list[Running]:
    """Every running GPU or accelerator resource of these kinds, with $/h and verdict.

    One DescribeInstances walk, the SageMaker list walks, one ListMetrics walk per resource dimension, and
    GetMetricData for every GPU series at once (500 queries a call), plus one for endpoint invocations.
    """
    thresholds = thresholds_from(runtime.settings)
    want = set(kinds)
    instances = describe_gpu_instances(region) if ResourceKind.EC2_INSTANCE in want else []
    jobs = in_progress_training_jobs(region) if ResourceKind.TRAINING_JOB in want else []
    notebooks = [
        n for n in (in_service_notebooks(region) if ResourceKind.NOTEBOOK in want else []) if n.accelerators
    ]
    endpoints = [
        e
        for e in (in_service_endpoints(region) if ResourceKind.ENDPOINT in want else [])
        if any(v.accelerators is not None and v.instance_count > 0 for v in e.variants)
    ]

    nvidia_instances = [i for i in instances if i.accelerators and i.accelerators.is_nvidia]
    nvidia_jobs = [j for j in jobs if j.accelerators and j.accelerators.is_nvidia]
    nvidia_notebooks = [n for n in notebooks if n.accelerators and n.accelerators.is_nvidia]
    queries = []
    if nvidia_instances:
        queries += metric_queries(nvidia_instances, list_gpu_series(region, [i.id for i in nvidia_instances]))
    if nvidia_jobs or nvidia_notebooks:
        series = (
            list_gpu_series(region, [n.name for n in nvidia_notebooks], NOTEBOOK_DIMENSION)
            if nvidia_notebooks
            else {}
        )
        queries += gpu_queries(nvidia_jobs, nvidia_notebooks, series)
    window = max(thresholds.idle_window, thresholds.starved_window)
    data = (
        get_metric_data(region, queries, now - window, now, int(PERIOD.total_seconds()))
        if queries
        else MetricSet()
    )
    endpoint_window = timedelta(hours=runtime.settings.endpoint_idle_hours)
    calls = (
        get_metric_data(
            region,
            invocation_queries(endpoints),
            now - endpoint_window,
            now,
            int(ENDPOINT_PERIOD.total_seconds()),
        )
        if endpoints
        else MetricSet()
    )

    def price(instance_type: str | None, count: int = 1) -> float | None:
        found = runtime.prices.hourly(instance_type, region)
        return round(found.usd_per_hour * count, 4) if found else None

    judged = {i.id for i in nvidia_instances}
    judged_jobs = {j.name for j in nvidia_jobs}
    judged_notebooks = {n.name for n in nvidia_notebooks}
    running: list[Running] = []
    for instance in instances:
        verdict = "unknown"  # Neuron and other accelerators publish other metrics: not judged
        if instance.id in judged and instance.accelerators:
            reading = read_gpus(data.gpus(instance.id), now, thresholds, instance.accelerators.count)
            verdict = reading.verdict.value
        running.append(
            Running(instance_resource(instance), price(instance.type), verdict, _gpus(instance.accelerators))
        )
    for job in jobs:
        verdict = "unknown"
        if job.name in judged_jobs:
            verdict = read_training_job(data.gpus(job_key(job)), job, now, thresholds).verdict.value
        running.append(
            Running(
                job_resource(job),
                price(job.instance_type, job.instance_count),
                verdict,
                f"{job.instance_count} host(s) of {_gpus(job.accelerators)}",
            )
        )
    for notebook in notebooks:
        verdict = "unknown"
        if notebook.name in judged_notebooks and notebook.accelerators:
            gpus = data.gpus(notebook_key(notebook))
            verdict = read_gpus(gpus, now, thresholds, notebook.accelerators.count).verdict.value
        running.append(
            Running(
                notebook_resource(notebook),
                price(notebook.instance_type),
                verdict,
                _gpus(notebook.accelerators),
            )
        )
    for endpoint in endpoints:
        live = [v for v in endpoint.variants if v.instance_type and v.instance_count > 0]
        costs = [price(v.instance_type, v.instance_count) for v in live]
        invocations = invocations_of(endpoint, calls)
        young = endpoint.created is not None and now - endpoint.created < endpoint_window
        verdict = "busy" if (invocations or 0) > 0 else ("too_early" if young else "idle")
        running.append(
            Running(
                endpoint_resource(endpoint),
                round(sum(c for c in costs if c is not None), 4)
                if all(c is not None for c in costs)
                else None,
                verdict,
                f"{invocations or 0:g} invocations in {runtime.settings.endpoint_idle_hours} h",
            )
        )
    return running
