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
from costguard.detect.sagemaker import VariantUse
from costguard.model import Endpoint, NotebookInstance, TrainingJob

ENDPOINT_PERIOD = timedelta(hours=1)  # endpoint invocations are read as hourly sums
# An endpoint variant's instance metrics: 0-100 per GPU, summed over an instance's GPUs (0-400 on four).
ENDPOINT_INSTANCE_NAMESPACE = "/aws/sagemaker/Endpoints"
ENDPOINT_GPU_METRICS = {"gpu_util": "GPUUtilization", "gpu_memory": "GPUMemoryUtilization"}


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


# An asynchronous endpoint publishes no Invocations: what it processed, and what waits (AWS's async-inference
# monitoring page). An endpoint hosting inference components publishes Invocations per InferenceComponentName.
ASYNC_PROCESSED_METRIC = "InvocationsProcessed"  # per EndpointName + VariantName
ASYNC_BACKLOG_METRIC = "ApproximateBacklogSize"  # per EndpointName
COMPONENT_DIMENSION = "InferenceComponentName"


def invocation_queries(endpoints: Sequence[Endpoint]) -> list[Query]:
    """The "invocations" each endpoint served, under the metric and dimensions AWS documents for its kind:
    Invocations per variant (real-time), InvocationsProcessed per variant and the backlog's Maximum (asynchronous),
    Invocations per inference component (an endpoint hosting them)."""
    queries = []
    for endpoint in endpoints:
        key = endpoint_key(endpoint)
        if endpoint.inference_components:
            queries += [
                Query(
                    (key, "invocations", f"component/{name}"),
                    ENDPOINT_NAMESPACE,
                    INVOCATIONS_METRIC,
                    ((COMPONENT_DIMENSION, name),),
                    stat="Sum",
                )
                for name in endpoint.inference_components
            ]
            continue
        metric = ASYNC_PROCESSED_METRIC if endpoint.asynchronous else INVOCATIONS_METRIC
        queries += [
            Query(
                (key, "invocations", variant.name),
                ENDPOINT_NAMESPACE,
                metric,
                (("EndpointName", endpoint.name), ("VariantName", variant.name)),
                stat="Sum",
            )
            for variant in endpoint.variants
        ]
        if endpoint.asynchronous:
            queries.append(
                Query(
                    (key, "backlog", ""),
                    ENDPOINT_NAMESPACE,
                    ASYNC_BACKLOG_METRIC,
                    (("EndpointName", endpoint.name),),
                    stat="Maximum",
                )
            )
    return queries


def backlog_of(endpoint: Endpoint, data: MetricSet) -> float | None:
    """An asynchronous endpoint's largest backlog over the window; None when no datapoint came back."""
    values = [v for _, v in data.of(endpoint_key(endpoint)).get(("backlog", ""), [])]
    return max(values) if values else None


def invocations_of(endpoint: Endpoint, data: MetricSet) -> float | None:
    """Invocations over the window across the endpoint's variants; None when no datapoint came back."""
    values = [
        v
        for (measure, _), series in data.of(endpoint_key(endpoint)).items()
        if measure == "invocations"
        for _, v in series
    ]
    return sum(values) if values else None


def endpoint_gpu_queries(endpoints: Sequence[Endpoint]) -> list[Query]:
    """GPUUtilization and GPUMemoryUtilization per GPU variant, each hour's Maximum over its instances: read in the
    same hourly walk as the invocations (one time range, one period), so they add no GetMetricData call below 500
    queries."""
    return [
        Query(
            (endpoint_key(endpoint), measure, variant.name),
            ENDPOINT_INSTANCE_NAMESPACE,
            metric,
            (("EndpointName", endpoint.name), ("VariantName", variant.name)),
            stat="Maximum",
        )
        for endpoint in endpoints
        for variant in endpoint.variants
        if variant.has_gpu and variant.instance_count > 0
        for measure, metric in ENDPOINT_GPU_METRICS.items()
    ]


def variant_uses(endpoint: Endpoint, data: MetricSet) -> dict[str, VariantUse]:
    """Each variant's invocations, busiest hour's GPU and GPU memory (summed over an instance's GPUs), and the
    hours that had traffic, from the sweep's hourly walk."""
    series = data.of(endpoint_key(endpoint))
    uses = {}
    for variant in endpoint.variants:
        calls = series.get(("invocations", variant.name), [])
        gpu = series.get(("gpu_util", variant.name), [])
        memory = series.get(("gpu_memory", variant.name), [])
        uses[variant.name] = VariantUse(
            invocations=sum(v for _, v in calls) if calls else None,
            gpu_percent=max(v for _, v in gpu) if gpu else None,
            gpu_memory_percent=max(v for _, v in memory) if memory else None,
            active_hours=sum(1 for _, v in calls if v > 0),
        )
    return uses
