"""The CloudWatch queries behind a training job's own metrics (its MetricDefinitions), read by the training sweep
in one batched GetMetricData walk per read group (``read_groups``: the jobs whose runs call for the same period).

SageMaker publishes each defined metric under ``/aws/sagemaker/TrainingJobs`` with the single dimension
``TrainingJobName`` (the instance metrics such as GPUUtilization carry ``Host`` instead): one query per metric
per job, whatever its instance count. For a job that may be stopped on divergence, each of its losses is also
read as its ``SampleCount`` per period, in the same walk: how many samples each period holds, which shows
datapoints added by someone other than the job (detect.training_cadence).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from costguard.aws.metrics import MetricSet, Query, Series
from costguard.aws.sagemaker import TRAINING_NAMESPACE
from costguard.aws.sagemaker_metrics import training_job_key

JOB_DIMENSION = "TrainingJobName"
# Each period's Minimum: the job's best reading of the period. That alone does not make added datapoints
# harmless: anyone allowed cloudwatch:PutMetricData can add a low reading that no later one beats (a plateau),
# or low readings that climb (a rising loss). What stops a job is judged on levels no one reading sets, and only
# on a series whose sample counts (COUNT_STAT) show no datapoint added. A NaN reading still comes back as NaN.
METRIC_STAT = "Minimum"
COUNT_STAT = "SampleCount"
MAX_POINTS = 1440  # readings per series at most: the period grows with the span read
LOOKBACK = timedelta(days=14)  # CloudWatch keeps one-minute data for 15 days


def metric_queries(jobs: Sequence[tuple[str, Sequence[str]]]) -> list[Query]:
    """One query per (job name, metric name)."""
    return [
        Query(
            (training_job_key(name), "metric", metric),
            TRAINING_NAMESPACE,
            metric,
            ((JOB_DIMENSION, name),),
            METRIC_STAT,
        )
        for name, metrics in jobs
        for metric in metrics
    ]


def count_queries(jobs: Sequence[tuple[str, Sequence[str]]]) -> list[Query]:
    """One SampleCount query per (job name, metric name): how many samples each period of the series holds."""
    return [
        Query(
            (training_job_key(name), "count", metric),
            TRAINING_NAMESPACE,
            metric,
            ((JOB_DIMENSION, name),),
            COUNT_STAT,
        )
        for name, metrics in jobs
        for metric in metrics
    ]


def read_span(starts: Sequence[datetime], now: datetime) -> tuple[datetime, int]:
    """Where the walk starts (the oldest job's start, at most LOOKBACK back) and its period in seconds: a whole
    number of minutes giving at most MAX_POINTS readings per series."""
    start = max(min(starts), now - LOOKBACK)
    minutes = max(1, math.ceil((now - start).total_seconds() / 60 / MAX_POINTS))
    return start, minutes * 60


def read_groups(starts: Mapping[str, datetime], now: datetime) -> list[tuple[datetime, int, list[str]]]:
    """The walks that read the jobs' metrics: (start, period, job names), the jobs whose own runs call for the
    same period (read_span) in one walk from the oldest start among them. A young job is read at its own
    period, never at the coarser one a long run needs, and the walks number at most the distinct periods (one
    for every job younger than MAX_POINTS minutes, 14 at most over LOOKBACK)."""
    by_period: dict[int, list[str]] = {}
    for name, started in starts.items():
        by_period.setdefault(read_span([started], now)[1], []).append(name)
    return [
        (read_span([starts[name] for name in names], now)[0], period, names)
        for period, names in sorted(by_period.items())
    ]


@dataclass(frozen=True)
class Readings:
    """One job's own metrics as one walk read them, oldest first: each metric's value per period (METRIC_STAT),
    and, for the metrics whose counts were asked for, each period's sample count."""

    values: dict[str, Series]
    counts: dict[str, Series]
    period: timedelta


def readings_of(data: MetricSet, name: str, period: int) -> Readings:
    """A job's readings out of a walk at ``period`` seconds."""
    by_measure = data.of(training_job_key(name)).items()
    return Readings(
        values={sub: points for (measure, sub), points in by_measure if measure == "metric"},
        counts={sub: points for (measure, sub), points in by_measure if measure == "count"},
        period=timedelta(seconds=period),
    )
