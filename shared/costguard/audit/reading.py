"""The audit's metric reads: every subject's GPU, GPU memory and CPU series over the window, batched.

All queries of a region go through aws/metrics.get_metric_data, 500 to a call. The period is chosen so that a
full call (500 series) stays under GetMetricData's 100,800 datapoints, so no call needs a second page:
ceil(queries / 500) calls. CloudWatch percentile statistics are not asked for (the embedded AWS returns
nothing for them, and a percentile per period would hide the peaks); each period's Maximum is read and
p50/p95 are taken over those maxima in audit/usage.py.

The series are read and summarized a batch at a time (``BATCH_QUERIES``, four full calls): a subject's usage is
summed up as soon as a batch has brought its last series, and its datapoints are dropped, so memory holds one
batch's datapoints and the small summaries whatever the fleet (holding every series, the step peaked at 1.3 GiB
for 10,000 instances). Batches are whole calls: the call count stays ceil(queries / 500).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta

from costguard.audit.model import Subject, Usage
from costguard.audit.usage import summarize
from costguard.aws.metrics import (
    GPU_NAMESPACE,
    QUERIES_PER_CALL,
    MetricSet,
    Query,
    Series,
    get_metric_data,
    gpu_index,
    list_gpu_series,
)
from costguard.aws.sagemaker import ENDPOINT_NAMESPACE as INVOCATIONS_NAMESPACE
from costguard.aws.sagemaker import INVOCATIONS_METRIC, NOTEBOOK_DIMENSION, TRAINING_NAMESPACE
from costguard.model import ResourceKind

GPU_MEMORY_METRIC = "nvidia_smi_memory_used"  # MiB, per GPU
DATAPOINTS_PER_CALL = 100_800  # GetMetricData's limit per call
ENDPOINT_NAMESPACE = "/aws/sagemaker/Endpoints"
STAT = "Maximum"
INVOCATIONS_STAT = "Sum"  # each period's requests; their sum is the window's
BATCH_QUERIES = 4 * QUERIES_PER_CALL  # series read before the subjects they complete are summarized


def period_for(window: timedelta) -> int:
    """Whole hours, as few as keep 500 full series under the datapoint limit (2 hours for 14 days)."""
    per_series = DATAPOINTS_PER_CALL // QUERIES_PER_CALL
    return 3600 * max(1, math.ceil(window.total_seconds() / 3600 / per_series))


def queries_for(region: str, subjects: Sequence[Subject]) -> list[Query]:
    """One query per GPU series (utilization and memory), plus CPU, per subject; an endpoint variant's
    requests besides (its Invocations), in the same calls."""
    return [q for _, queries in subject_queries(region, subjects) for q in queries]


def subject_queries(region: str, subjects: Sequence[Subject]) -> list[tuple[Subject, list[Query]]]:
    """Each subject with its queries, in the subjects' order."""
    own: dict[str, list[Query]] = {s.key: [] for s in subjects}
    by_dimension: dict[str, list[Subject]] = defaultdict(list)
    for subject in subjects:
        queries = own[subject.key]
        if subject.kind is ResourceKind.EC2_INSTANCE:
            by_dimension["InstanceId"].append(subject)
            queries.append(
                Query(
                    (subject.key, "cpu", ""),
                    "AWS/EC2",
                    "CPUUtilization",
                    (("InstanceId", subject.id),),
                    STAT,
                )
            )
        elif subject.kind is ResourceKind.NOTEBOOK:
            by_dimension[NOTEBOOK_DIMENSION].append(subject)
        elif subject.kind is ResourceKind.TRAINING_JOB:
            # SageMaker sums GPU figures over a host's GPUs; the first host stands for the job.
            host = (("Host", f"{subject.id}/algo-1"),)
            for metric, measure in (("GPUUtilization", "host_gpu"), ("GPUMemoryUtilization", "host_memory")):
                queries.append(Query((subject.key, measure, ""), TRAINING_NAMESPACE, metric, host, STAT))
        elif subject.kind is ResourceKind.ENDPOINT:
            endpoint, variant = subject.id.split("/", 1)
            variant_dims = (("EndpointName", endpoint), ("VariantName", variant))
            for metric, measure in (("GPUUtilization", "host_gpu"), ("GPUMemoryUtilization", "host_memory")):
                queries.append(
                    Query((subject.key, measure, ""), ENDPOINT_NAMESPACE, metric, variant_dims, STAT)
                )
            queries += _request_queries(subject, variant_dims)
    for dimension, members in by_dimension.items():
        series = list_gpu_series(region, [s.id for s in members], dimension=dimension)
        for subject in members:
            for dims in series.get(subject.id, []):
                index = gpu_index(subject.key, dims)  # None: not a GPU number, logged, counted, skipped
                if index is None:
                    continue
                for metric, measure in (("nvidia_smi_utilization_gpu", "gpu"), (GPU_MEMORY_METRIC, "memory")):
                    own[subject.key].append(
                        Query((subject.key, measure, index), GPU_NAMESPACE, metric, dims, STAT)
                    )
    return [(s, own[s.key]) for s in subjects]


def _request_queries(subject: Subject, variant_dims: tuple[tuple[str, str], ...]) -> list[Query]:
    """An endpoint variant's requests, where SageMaker publishes them for its kind: Invocations per variant
    (real-time), InvocationsProcessed per variant (asynchronous: it publishes no Invocations), Invocations per
    inference component the endpoint hosts (none per variant). Each component's sum adds to the variant's."""
    if subject.serving == "components":
        return [
            Query(
                (subject.key, "invocations", f"component/{name}"),
                INVOCATIONS_NAMESPACE,
                INVOCATIONS_METRIC,
                (("InferenceComponentName", name),),
                INVOCATIONS_STAT,
            )
            for name in subject.components
        ]
    metric = "InvocationsProcessed" if subject.serving == "async" else INVOCATIONS_METRIC
    return [
        Query((subject.key, "invocations", ""), INVOCATIONS_NAMESPACE, metric, variant_dims, INVOCATIONS_STAT)
    ]


def read_usage(
    region: str, subjects: Sequence[Subject], now: datetime, lookback_days: int
) -> dict[str, Usage]:
    """Usage by subject key over the ``lookback_days`` before ``now``, read a batch of series at a time."""
    window = timedelta(days=lookback_days)
    start = now - window
    period = period_for(window)
    return {
        subject.key: _usage_of(subject, found, start, window, period)
        for subject, found in _series_by_subject(region, subjects, start, now, period)
    }


def _series_by_subject(
    region: str, subjects: Sequence[Subject], start: datetime, end: datetime, period: int
) -> Iterator[tuple[Subject, dict[tuple[str, str], Series]]]:
    """Each subject with its series, as soon as a batch has brought the last of them; then they are dropped."""
    planned = subject_queries(region, subjects)
    queries = [q for _, own in planned for q in own]
    pending = MetricSet()
    read = 0
    ends = 0
    for subject, own in planned:
        ends += len(own)  # just past this subject's last query
        while read < ends:
            batch = queries[read : read + BATCH_QUERIES]
            _merge(pending, get_metric_data(region, batch, start, end, period))
            read += len(batch)
        yield subject, pending.series.pop(subject.key, {})


def _merge(into: MetricSet, batch: MetricSet) -> None:
    """A batch's series into what is pending; a GPU read under two series in two batches keeps, per period,
    the larger value (as one call does with its own duplicates)."""
    for resource, by_measure in batch.series.items():
        mine = into.series.setdefault(resource, {})
        for key, points in by_measure.items():
            if key in mine:
                merged: dict[datetime, float] = {}
                for at, value in [*mine[key], *points]:
                    merged[at] = max(value, merged.get(at, value))
                mine[key] = sorted(merged.items())
            else:
                mine[key] = points


def _usage_of(
    subject: Subject, found: dict[tuple[str, str], Series], start: datetime, window: timedelta, period: int
) -> Usage:
    """A subject's usage from its series: per GPU, or a SageMaker host's sum spread back over its GPUs."""
    gpu: dict[int, list[tuple[datetime, float]]] = {}
    memory: dict[int, list[tuple[datetime, float]]] = {}
    for (measure, sub), points in found.items():
        if measure == "gpu":
            gpu[int(sub)] = points
        elif measure == "memory":
            memory[int(sub)] = points
    count = subject.facts.accelerator_count if subject.facts else 0
    if ("host_gpu", "") in found and count:
        # Summed over the host's GPUs: back to a per-GPU figure, the same on each GPU.
        per_gpu = [(at, value / count) for at, value in found[("host_gpu", "")]]
        gpu = dict.fromkeys(range(count), per_gpu)
        per_memory = subject.facts.accelerator_memory_mib if subject.facts else 0
        if ("host_memory", "") in found and per_memory:
            used = [(at, value / count / 100 * per_memory) for at, value in found[("host_memory", "")]]
            memory = dict.fromkeys(range(count), used)
    summary = summarize(
        start=start,
        window_hours=window.total_seconds() / 3600,
        period_hours=period / 3600,
        gpu=gpu,
        memory_used_mib=memory,
        cpu=found.get(("cpu", ""), []),
    )
    if subject.kind is not ResourceKind.ENDPOINT:
        return summary
    requests = [
        point for (measure, _), points in found.items() if measure == "invocations" for point in points
    ]
    return summary.model_copy(update={"invocations": sum(v for _, v in requests) if requests else None})
