"""What a backtest replays: the resources of a period, when each ran, its per-GPU series and its price."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from functools import cached_property
from operator import itemgetter

from costguard.detect.gpu import Series
from costguard.model import Ec2Instance, NotebookInstance, TrainingJob
from costguard.pricing import Price

Interval = tuple[datetime, datetime]

_time = itemgetter(0)


def runs_of(
    times: Iterable[datetime], period: timedelta, end: datetime, still_running: bool
) -> list[Interval]:
    """Running periods from the (sorted) times of a resource's datapoints, each covering [t, t + period): a
    missing datapoint is not a stop, a gap of more than one missing period is (its owner stopped it). With
    ``still_running`` the last run lasts until ``end``."""
    runs: list[Interval] = []
    for at in times:
        if runs and at - runs[-1][1] <= period:
            runs[-1] = (runs[-1][0], max(runs[-1][1], at + period))
        else:
            runs.append((at, at + period))
    if still_running and runs:
        runs[-1] = (runs[-1][0], max(runs[-1][1], end))
    return runs


def intersect(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """The spans two sorted lists of disjoint intervals have in common."""
    out: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] <= b[j][1]:
            i += 1
        else:
            j += 1
    return out


def overlap(a: Interval, b: Interval) -> timedelta:
    """How long two intervals share (zero when they do not meet)."""
    return max(timedelta(0), min(a[1], b[1]) - max(a[0], b[0]))


class SubjectKind(StrEnum):
    EC2_INSTANCE = "ec2_instance"
    TRAINING_JOB = "training_job"
    NOTEBOOK = "notebook_instance"


@dataclass
class GpuTrack:
    """One GPU's (or one training host's) series, with its times kept apart for bisection."""

    series: Series

    def __post_init__(self) -> None:
        self.series.sort(key=_time)  # itemgetter, not a lambda: a week of a fleet is millions of points
        self.times = list(map(_time, self.series))

    def within(self, start: datetime, end: datetime) -> Series:
        """The points in (start, end], as the detectors' own windows count them."""
        return self.series[bisect_right(self.times, start) : bisect_right(self.times, end)]

    def after(self, start: datetime) -> int:
        return bisect_right(self.times, start)

    def at_or_after(self, start: datetime) -> int:
        return bisect_left(self.times, start)


@dataclass
class Subject:
    """One resource of the period. ``tracks`` are keyed as the deployed reader keys them: the GPU index for
    an instance or a notebook, the host number N of ``algo-N`` for a training job (SageMaker's per-host
    sum over its GPUs, as published)."""

    kind: SubjectKind
    resource: Ec2Instance | TrainingJob | NotebookInstance
    tracks: dict[int, GpuTrack]
    running: list[Interval]  # when it ran (and was billed): outside these it was stopped by its owner or gone
    price: Price | None
    gpu_count: int  # GPUs per instance
    # A generated world's extras (backtest/generate.py): the CPU percent of each five-minute period by its start
    # (the adaptive policy reads the shape of the moment from it), and the labelled spans of work and of idle
    # time (running, nobody using it) within the period.
    cpu: dict[datetime, float] | None = None
    work: list[Interval] = field(default_factory=list)
    idle: list[Interval] = field(default_factory=list)
    labelled: bool = False

    @property
    def id(self) -> str:
        r = self.resource
        return r.id if isinstance(r, Ec2Instance) else r.name

    @property
    def instance_type(self) -> str:
        r = self.resource
        return r.type if isinstance(r, Ec2Instance) else r.instance_type

    @property
    def instances(self) -> int:
        return self.resource.instance_count if isinstance(self.resource, TrainingJob) else 1

    @cached_property
    def hourly_usd(self) -> float | None:
        return round(self.price.usd_per_hour * self.instances, 4) if self.price else None

    def running_at(self, at: datetime) -> Interval | None:
        for start, end in self.running:
            if start <= at < end:
                return start, end
        return None


@dataclass
class History:
    """The period [start, end) in steps of one metric period."""

    start: datetime
    end: datetime
    step: timedelta
    subjects: list[Subject] = field(default_factory=list)
    source: str = ""
    labelled: bool = False  # its subjects carry work and idle labels (a generated world)

    def steps(self) -> list[datetime]:
        count = int((self.end - self.start) / self.step)
        return [self.start + self.step * (n + 1) for n in range(count)]
