"""Seed what the training sweep's health checks read: each world job's MetricDefinitions and their values in the
embedded CloudWatch, its hosts' log streams in the embedded CloudWatch Logs, and the objects under its checkpoint
location in the embedded S3."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from costguard.detect.spot import CHECKPOINT_TAG
from costguard.detect.training_health import split_s3_uri
from costguard.local.buckets import put_object
from costguard.local.seed_metrics import datum, publish
from costguard.local.world import TrainingJob, TrainingMetric, World

NAMESPACE = "/aws/sagemaker/TrainingJobs"
LOOKBACK = timedelta(minutes=180)  # a job with no start time publishes from here


def metric_value(metric: TrainingMetric, minutes: float) -> float:
    """The value a world metric reads ``minutes`` into the run (before ``nan_from``)."""
    if metric.shape == "falling":
        return round(2.0 / (1 + minutes / 60), 4)
    if metric.shape == "rising":
        return round(0.5 + minutes / 100, 4)
    return 1.2


def metric_series(
    job: TrainingJob, metric: TrainingMetric, now: datetime, until: datetime
) -> list[tuple[datetime, float]]:
    """Every ``step_minutes`` from the job's start (or LOOKBACK before now) to ``until``, NaN from ``nan_from``."""
    start = job.started or now - LOOKBACK
    step = timedelta(minutes=metric.step_minutes)
    points = []
    at = start + step
    stops = [t for t in (job.silent_from, job.metrics_paused_from) if t is not None]
    while at <= max(now, until) and not any(at >= t for t in stops):
        nan = metric.nan_from is not None and at >= metric.nan_from
        points.append((at, float("nan") if nan else metric_value(metric, (at - start).total_seconds() / 60)))
        at += step
    return points


LOG_GROUP = "/aws/sagemaker/TrainingJobs"
STREAM_EPOCH = 1763600000  # the suffix of a host's stream name, as SageMaker appends one


def log_lines(job: TrainingJob, host: int, now: datetime, until: datetime) -> list[tuple[datetime, str]]:
    """Host ``host``'s log lines every ``log_every_minutes`` from the job's start (or LOOKBACK before now) to
    ``until``, none from ``silent_from``."""
    if job.log_every_minutes is None:
        return []
    start = job.started or now - LOOKBACK
    step = timedelta(minutes=job.log_every_minutes)
    lines, at, n = [], start + step, 1
    while at <= max(now, until) and (job.silent_from is None or at < job.silent_from):
        evaluating = job.metrics_paused_from is not None and at >= job.metrics_paused_from
        what = f"evaluation batch {n}" if evaluating else f"step {n * 50}: all-reduce done"
        lines.append((at, f"[{at:%Y-%m-%d %H:%M:%S}] algo-{host} {what}"))
        at, n = at + step, n + 1
    return lines


def seed_training_logs(world: World, until: datetime) -> None:
    """Each in-progress job's host streams in the embedded CloudWatch Logs, written straight into moto's backend:
    its PutLogEvents refuses events more than 14 days older than the machine's clock, as CloudWatch Logs does, and
    a world's day may be that old."""
    jobs = [j for j in world.training_jobs if j.status == "InProgress" and j.log_every_minutes]
    if not jobs:
        return
    from moto.logs.models import LogEvent, logs_backends  # the embedded AWS only

    backend = logs_backends[world.account][world.region]
    if LOG_GROUP not in backend.groups:
        backend.create_log_group(LOG_GROUP, {})
    group = backend.groups[LOG_GROUP]
    for job in jobs:
        for host in range(1, job.instance_count + 1):
            name = f"{job.name}/algo-{host}-{STREAM_EPOCH}"
            if name not in group.streams:
                group.create_log_stream(name)
            stream = group.streams[name]
            for at, message in log_lines(job, host, world.now, until):
                ms = int(at.timestamp() * 1000)
                stream.events.append(LogEvent(ms, {"timestamp": ms, "message": message}))


def checkpoint_uri(job: TrainingJob) -> str | None:
    tag = job.tags.get(CHECKPOINT_TAG, "")
    return tag if tag.lower().startswith("s3://") else job.checkpoint_s3_uri


def seed_training_health(world: World, until: datetime) -> None:
    """Every world job's MetricDefinitions (moto gives each job one of its own, which the world replaces), the
    values of those of its in-progress jobs, and their checkpoint objects."""
    if not world.training_jobs:
        return
    from moto.sagemaker.models import sagemaker_backends  # the embedded AWS only

    backend = sagemaker_backends[world.account][world.region]
    data: list[dict[str, Any]] = []
    for job in world.training_jobs:
        made: Any = backend.training_jobs[job.name]
        made.algorithm_specification["MetricDefinitions"] = [
            {"Name": m.name, "Regex": f"{m.name}=(\\S+)"} for m in job.metrics
        ]
        if job.status != "InProgress":
            continue
        dims = [{"Name": "TrainingJobName", "Value": job.name}]
        for metric in job.metrics:
            for at, value in metric_series(job, metric, world.now, until):
                data.append(datum(metric.name, dims, at, value, "None"))
        _write_checkpoints(world, job)
    publish(world.account, world.region, NAMESPACE, data)
    seed_training_logs(world, until)


def _write_checkpoints(world: World, job: TrainingJob) -> None:
    uri = checkpoint_uri(job)
    where = split_s3_uri(uri) if uri else None
    if where is None or not job.checkpoints_written:
        return
    bucket, prefix = where
    for n, written in enumerate(sorted(job.checkpoints_written)):
        # moto stamps the upload time: the world's write time replaces it.
        key = f"{prefix}checkpoint-{n:04d}.pt"
        put_object(world.account, world.region, bucket, key, modified=written, body=b"checkpoint")
