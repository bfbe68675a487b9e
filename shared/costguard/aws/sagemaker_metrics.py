"""The CloudWatch queries that read SageMaker resources: training-job hosts' and notebooks' GPU series, and
endpoint invocations, keyed by resource kind (the sweep and the fleet view read them alike)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from costguard.aws.metrics import GPU_METRIC, GPU_NAMESPACE, GPU_STAT, MetricSet, Query, gpu_index
from costguard.aws.sagemaker import (
    ENDPOINT_NAMESPACE,
    INVOCATIONS_METRIC,
    TRAINING_GPU_METRIC,
    TRAINING_NAMESPACE,
)
from costguard.model import Endpoint, NotebookInstance, TrainingJob

ENDPOINT_PERIOD = timedelta(hours=1)  # endpoint invocations are read as hourly sums


# Metric keys carry the resource kind: a job, a notebook and an endpoint may share a name.
def training_job_key(name: str) -> str:
    """The key of a training job's series, by job name: its hosts' GPUs here, its own metrics in
    training_metrics."""
    return f"training-job/{name}"


def job_key(job: TrainingJob) -> str:
    return training_job_key(job.name)


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
