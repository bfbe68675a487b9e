"""SageMaker: the scheduled sweep over in-progress training jobs, InService notebooks and endpoints."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from costguard.act.aws import permissions_for
from costguard.aws import budgets, metrics, sagemaker
from costguard.aws.budgets import keep_budget_marks
from costguard.aws.metrics import (
    GPU_METRIC,
    GPU_NAMESPACE,
    GPU_STAT,
    MetricSet,
    Query,
    gpu_index,
)
from costguard.aws.sagemaker import (
    ENDPOINT_NAMESPACE,
    INVOCATIONS_METRIC,
    NOTEBOOK_DIMENSION,
    TRAINING_GPU_METRIC,
    TRAINING_NAMESPACE,
)
from costguard.detect.gpu import PERIOD, Thresholds, read_gpus, thresholds_from
from costguard.detect.sagemaker import (
    endpoint_findings,
    notebook_findings,
    read_training_job,
    training_job_findings,
)
from costguard.model import Endpoint, Finding, NotebookInstance, ResourceKind, TrainingJob
from costguard.pipeline import Report
from costguard.runtime import ACT_PERMISSIONS, PRICES_PERMISSIONS, Runtime

# handle_sweep: endpoints are only ever reported, never stopped.
SWEEP_PERMISSIONS = (
    sagemaker.INVENTORY_PERMISSIONS
    | metrics.READ_PERMISSIONS
    | metrics.LIST_PERMISSIONS
    | budgets.BREACH_LOG_PERMISSIONS
    | ACT_PERMISSIONS
    | PRICES_PERMISSIONS
    | permissions_for(ResourceKind.TRAINING_JOB, ResourceKind.NOTEBOOK)
)

ENDPOINT_PERIOD = timedelta(hours=1)


# Metric keys carry the resource kind: a job, a notebook and an endpoint may share a name.
def job_key(job: TrainingJob) -> str:
    return f"training-job/{job.name}"


def notebook_key(notebook: NotebookInstance) -> str:
    return f"notebook-instance/{notebook.name}"


def endpoint_key(endpoint: Endpoint) -> str:
    return f"endpoint/{endpoint.name}"


def gpu_queries(
    jobs: Sequence[TrainingJob],
    notebooks: Sequence[NotebookInstance],
    notebook_series: dict[str, list[tuple[tuple[str, str], ...]]],
) -> list[Query]:
    """One query per training-job host (Host = "<job>/algo-N", N from 1) and per notebook GPU series, each
    the per-minute Maximum (GPU_STAT: added datapoints can only make a resource look busier). A notebook
    series whose ``index`` is not a GPU number is logged, counted and skipped."""
    queries = [
        Query(
            (job_key(job), "gpu", str(host)),
            TRAINING_NAMESPACE,
            TRAINING_GPU_METRIC,
            (("Host", f"{job.name}/algo-{host}"),),
            GPU_STAT,
        )
        for job in jobs
        for host in range(1, job.instance_count + 1)
    ]
    for notebook in notebooks:
        key = notebook_key(notebook)
        for dims in notebook_series.get(notebook.name, []):
            index = gpu_index(key, dims)
            if index is not None:
                queries.append(Query((key, "gpu", index), GPU_NAMESPACE, GPU_METRIC, dims, GPU_STAT))
    return queries


def invocation_queries(endpoints: Sequence[Endpoint]) -> list[Query]:
    return [
        Query(
            (endpoint_key(endpoint), "invocations", variant.name),
            ENDPOINT_NAMESPACE,
            INVOCATIONS_METRIC,
            (("EndpointName", endpoint.name), ("VariantName", variant.name)),
            stat="Sum",
        )
        for endpoint in endpoints
        for variant in endpoint.variants
    ]


def invocations_of(endpoint: Endpoint, data: MetricSet) -> float | None:
    """Invocations over the window across the endpoint's variants; None when no datapoint came back."""
    values = [
        v
        for (measure, _), series in data.of(endpoint_key(endpoint)).items()
        if measure == "invocations"
        for _, v in series
    ]
    return sum(values) if values else None


def findings_for(
    region: str, runtime: Runtime, thresholds: Thresholds, now: datetime, event_id: str | None
) -> list[Finding]:
    listed, cloudwatch = runtime.reads.sagemaker, runtime.reads.metrics
    jobs = [
        j for j in listed.in_progress_training_jobs(region) if j.accelerators and j.accelerators.is_nvidia
    ]
    notebooks = [
        n for n in listed.in_service_notebooks(region) if n.accelerators and n.accelerators.is_nvidia
    ]
    endpoints = listed.in_service_endpoints(region)

    # Two batched reads for the whole sweep: per-minute GPU series over the verdict windows, and hourly
    # invocation sums over the endpoint window (GetMetricData takes one time range per call).
    gpu_data = MetricSet()
    if jobs or notebooks:
        series = (
            cloudwatch.list_gpu_series(region, [n.name for n in notebooks], NOTEBOOK_DIMENSION)
            if notebooks
            else {}
        )
        window = max(thresholds.idle_window, thresholds.starved_window)
        gpu_data = cloudwatch.get_metric_data(
            region, gpu_queries(jobs, notebooks, series), now - window, now, int(PERIOD.total_seconds())
        )
    endpoint_window = timedelta(hours=runtime.settings.endpoint_idle_hours)
    calls = MetricSet()
    if endpoints:
        calls = cloudwatch.get_metric_data(
            region,
            invocation_queries(endpoints),
            now - endpoint_window,
            now,
            int(ENDPOINT_PERIOD.total_seconds()),
        )

    findings: list[Finding] = []
    for job in jobs:
        findings += training_job_findings(
            job,
            read_training_job(gpu_data.gpus(job_key(job)), job, now, thresholds),
            price=runtime.prices.hourly(job.instance_type, region),
            thresholds=thresholds,
            now=now,
            event_id=event_id,
        )
    for notebook in notebooks:
        expected = notebook.accelerators.count if notebook.accelerators else 1
        findings += notebook_findings(
            notebook,
            read_gpus(gpu_data.gpus(notebook_key(notebook)), now, thresholds, expected),
            price=runtime.prices.hourly(notebook.instance_type, region),
            thresholds=thresholds,
            now=now,
            event_id=event_id,
        )
    for endpoint in endpoints:
        types = {v.instance_type for v in endpoint.variants if v.instance_type}
        findings += endpoint_findings(
            endpoint,
            invocations_of(endpoint, calls),
            prices={t: runtime.prices.hourly(t, region) for t in types},
            window=endpoint_window,
            now=now,
            event_id=event_id,
        )
    return findings


def evaluate(region: str, runtime: Runtime, now: datetime, event_id: str | None = None) -> Report:
    findings = findings_for(region, runtime, thresholds_from(runtime.settings), now, event_id)
    # A budget breach at stop_all marks busy jobs and notebooks on purpose: their marks are not cancelled here.
    return runtime.act(keep_budget_marks(findings, runtime.settings.state_table, now), now)


def handle_sweep(runtime: Runtime, now: datetime, default_region: str, event_id: str | None) -> Report:
    combined = Report()
    for region in runtime.settings.regions or (default_region,):
        combined.extend(evaluate(region, runtime, now, event_id))
    return combined
