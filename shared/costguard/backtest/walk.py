"""The walk: step through a past period and run the deployed detectors and policy at each step. Pure.

At each metric-period step every resource that ran gets the reading, the findings and the decision the
scheduled sweep would have given it (detect/gpu.py, detect/sagemaker.py, policy.decide_all, looked up
on their modules at each call so a test can watch them), with the
policy of remediate mode: the marks a live run would have written to the tags are kept here, so grace
periods run their course and stops come due.

No look-ahead: a datapoint stamped t covers [t, t + period) and is known only once that period has ended, so
the reading at ``now`` is of the whole periods before it (datapoints stamped ``now - window`` to
``now - period``), never of the one starting at ``now``.

A stop at ``now`` is then played forward against what really happened (``play_forward``): it saves the
resource's price from ``now`` until the first of: the next activity (a datapoint at or over the idle
threshold not yet known at ``now``, that is stamped after ``now - period``: its owner would have started it
again then), its owner's own stop (the end of the running period: a world's timeline, or a gap in its data),
a gap in its GPU data (what it would have done is not known: nothing is credited past it), the end of the
period. Time the resource was not running is never credited. The stop is a near-miss when that activity
comes strictly within the horizon after it (``activity - stop < horizon``; activity exactly at the horizon
is not one): work the stop would have interrupted.
"""

from __future__ import annotations

import gc
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, NamedTuple

from costguard import ledger
from costguard import policy as policy_rules
from costguard.act.limits import MemoryStopLimiter
from costguard.backtest.history import History, Interval, Subject, SubjectKind, overlap
from costguard.detect import adaptive, idle_priors, read_schedule
from costguard.detect import gpu as gpu_detect
from costguard.detect import sagemaker as sagemaker_detect
from costguard.detect.gpu import GpuReading, Series, Thresholds, Verdict
from costguard.model import (
    MARK_TAG_KEY,
    Action,
    Decision,
    Ec2Instance,
    Finding,
    NotebookInstance,
    Resource,
    TrainingJob,
)
from costguard.notify.dedupe import MemoryRepeatGate
from costguard.pipeline import ALERT_ONCE, ONCE_WINDOW
from costguard.policy import Policy
from costguard.settings import Settings

Progress = Callable[[int, int], None]

# Steps each subject is read ahead by (an hour of five-minute steps).
READ_AHEAD = 12


@dataclass(frozen=True)
class Params:
    """The settings a backtest runs with: the deployed ones, with any overridden by the command line."""

    idle_percent: float = 5.0
    idle_window: timedelta = timedelta(minutes=30)
    starved_percent: float = 70.0
    starved_window: timedelta = timedelta(hours=2)
    grace: timedelta = timedelta(minutes=15)
    near_miss_horizon: timedelta = timedelta(minutes=60)
    protect_tag_key: str = "costguard:protect"
    max_stops_per_run: int = 5
    max_stops_per_hour: int = 20
    # The episode gap (COSTGUARD_DEDUPE_WINDOW_MINUTES): the same news of the same resource is posted once per
    # episode, as pipeline.act_on does; the notices counted are those that would be posted.
    repeat_window: timedelta = timedelta(minutes=240)
    # The idle policy (COSTGUARD_IDLE_POLICY): fixed, or adaptive with its knobs (detect/adaptive.py).
    idle_policy: str = "fixed"
    interruption_cost_usd: float = adaptive.AdaptiveParams.interruption_cost_usd
    adaptive_floor: timedelta = adaptive.AdaptiveParams.floor
    adaptive_horizon: timedelta = adaptive.AdaptiveParams.horizon
    # The sweep's read schedule (COSTGUARD_READ_SCHEDULE, detect/read_schedule.py): instances read only when a
    # finding could have come. The fixed idle policy only: the adaptive one observes every sweep.
    read_schedule: bool = True
    # What remediate would act on, as deployed (policy.Policy): ReasonModes (COSTGUARD_REASON_MODES) and
    # RemediateScope (COSTGUARD_REMEDIATE_SCOPE). A stop they hold is told, never played as a stop.
    reason_modes: str = ""
    remediate_scope: str = ""

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> Params:
        base = cls(
            idle_percent=settings.idle_threshold_percent,
            idle_window=timedelta(minutes=settings.idle_window_minutes),
            starved_percent=settings.starved_threshold_percent,
            starved_window=timedelta(minutes=settings.starved_window_minutes),
            grace=timedelta(minutes=settings.grace_minutes),
            protect_tag_key=settings.protect_tag_key,
            max_stops_per_run=settings.max_stops_per_run,
            max_stops_per_hour=settings.max_stops_per_hour,
            repeat_window=timedelta(minutes=settings.dedupe_window_minutes),
            idle_policy=settings.idle_policy,
            interruption_cost_usd=settings.interruption_cost_usd,
            adaptive_floor=timedelta(minutes=settings.adaptive_floor_minutes),
            adaptive_horizon=timedelta(minutes=settings.adaptive_horizon_minutes),
            read_schedule=settings.read_schedule,
            reason_modes=settings.reason_modes,
            remediate_scope=settings.remediate_scope,
        )
        return replace(base, **{k: v for k, v in overrides.items() if v is not None})

    def thresholds(self, period: timedelta) -> Thresholds:
        # The period is the history's step: coverage counts the datapoints of the period actually read.
        return Thresholds(
            idle_percent=self.idle_percent,
            idle_window=self.idle_window,
            starved_percent=self.starved_percent,
            starved_window=self.starved_window,
            period=period,
        )

    def policy(self) -> Policy:
        return Policy(
            dry_run=True,
            protect_tag_key=self.protect_tag_key,
            grace=self.grace,
            max_stops=self.max_stops_per_run,
        )

    @cached_property
    def remediate(self) -> Policy:
        """The policy the backtest previews: remediate mode, with the deployed ReasonModes and RemediateScope."""
        return Policy(
            dry_run=False,
            protect_tag_key=self.protect_tag_key,
            grace=self.grace,
            max_stops=self.max_stops_per_run,
            modes=policy_rules.parse_reason_modes(self.reason_modes),
            scope=policy_rules.parse_scope(self.remediate_scope),
        )

    def adaptive(self) -> adaptive.AdaptiveParams:
        return adaptive.AdaptiveParams(
            idle_window=self.idle_window,
            grace=self.grace,
            floor=self.adaptive_floor,
            horizon=self.adaptive_horizon,
            interruption_cost_usd=self.interruption_cost_usd,
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "idle_policy": self.idle_policy,
            "interruption_cost_usd": self.interruption_cost_usd,
            "adaptive_floor_minutes": _minutes(self.adaptive_floor),
            "adaptive_horizon_minutes": _minutes(self.adaptive_horizon),
            "idle_threshold_percent": self.idle_percent,
            "idle_window_minutes": _minutes(self.idle_window),
            "starved_threshold_percent": self.starved_percent,
            "starved_window_minutes": _minutes(self.starved_window),
            "grace_minutes": _minutes(self.grace),
            "near_miss_horizon_minutes": _minutes(self.near_miss_horizon),
            "protect_tag_key": self.protect_tag_key,
            "max_stops_per_run": self.max_stops_per_run,
            "max_stops_per_hour": self.max_stops_per_hour,
            "repeat_window_minutes": _minutes(self.repeat_window),
            "read_schedule": self.scheduled,
            "reason_modes": self.reason_modes,
            "remediate_scope": self.remediate_scope,
        }

    @property
    def scheduled(self) -> bool:
        """Whether the walk reads by the schedule, as the deployed sweep would with these settings."""
        return self.read_schedule and self.idle_policy == "fixed"


@dataclass(frozen=True)
class Event:
    """One would-be decision on one resource (repeats of the same notification are folded into the first)."""

    at: datetime
    action: str  # mark | unmark | stop | notify
    reason: str
    note: str
    saved_usd: float | None = None
    stopped_until: datetime | None = None
    ended_by: str | None = None  # busy | owner_stopped | no_data | period_end
    near_miss: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(),
            "action": self.action,
            "reason": self.reason,
            "note": self.note,
            "saved_usd": self.saved_usd,
            "stopped_until": self.stopped_until.isoformat() if self.stopped_until else None,
            "ended_by": self.ended_by,
            "near_miss": self.near_miss,
        }


@dataclass
class Outcome:
    """What the backtest found for one resource."""

    subject: Subject
    events: list[Event] = field(default_factory=list)
    saved_usd: float = 0.0
    idle_usd: float = 0.0
    reclaimed_idle_usd: float = 0.0
    running_hours: float = 0.0
    stopped: list[tuple[datetime, datetime]] = field(default_factory=list)
    # By reason: the findings of every reading, and the notices that would have been posted (after the
    # episode gap): a verdict that is noisy shows here.
    findings: Counter[str] = field(default_factory=Counter)
    notices: Counter[str] = field(default_factory=Counter)
    reads: int = 0  # the readings the sweep would have made of it (its metrics read), by the read schedule
    # The CPU and network metrics read for the messages of its idle (CPU) and starved (CPU, network) verdicts
    # that are news: not a standing finding's repeat, not a marked instance waiting out its grace period
    # (read_schedule.evidence_metrics).
    evidence_metrics: int = 0
    # By reason: the stops remediate would have made but ReasonModes or RemediateScope holds (told, not made), once
    # an episode (the held stop is decided again at each step, as notify mode would decide it).
    held: Counter[str] = field(default_factory=Counter)

    @property
    def near_misses(self) -> int:
        return sum(1 for e in self.events if e.near_miss)

    @property
    def stops(self) -> int:
        return sum(1 for e in self.events if e.action == Action.STOP)

    @property
    def unclaimed_usd(self) -> float:
        return max(0.0, self.idle_usd - self.reclaimed_idle_usd)


@dataclass
class Result:
    history: History
    params: Params
    outcomes: list[Outcome]

    @property
    def reclaimable_usd(self) -> float:
        return round(sum(o.saved_usd for o in self.outcomes), 2)

    @property
    def unclaimed_usd(self) -> float:
        return round(sum(o.unclaimed_usd for o in self.outcomes), 2)

    @property
    def idle_usd(self) -> float:
        return round(sum(o.idle_usd for o in self.outcomes), 2)

    @property
    def near_misses(self) -> int:
        return sum(o.near_misses for o in self.outcomes)

    @property
    def stops(self) -> int:
        return sum(o.stops for o in self.outcomes)

    @property
    def ledger(self) -> list[ledger.Entry]:
        """The savings ledger these would-be stops write (notify mode's, priced as remediate's are)."""
        return [
            stop_entry(o.subject, e.at, e.stopped_until, back=e.ended_by == "busy", reason=e.reason)
            for o in self.outcomes
            for e in o.events
            if e.action == Action.STOP and e.stopped_until is not None
        ]

    @property
    def held(self) -> dict[str, int]:
        """The stops ReasonModes or RemediateScope held (told in notify, not made), by reason, most first."""
        return _by_count(sum((o.held for o in self.outcomes), Counter()))

    @property
    def labelled(self) -> Labelled | None:
        """Against a generated world's labels: the reclaimable idle dollars, those the stops reclaimed, the
        stops of labelled work."""
        return labelled_figures(self) if self.history.labelled else None

    @property
    def notices(self) -> dict[str, int]:
        """The notices that would have been posted, by reason (verdict), most first."""
        return _by_count(sum((o.notices for o in self.outcomes), Counter()))

    @property
    def findings(self) -> dict[str, int]:
        """The findings of all readings, by reason, most first."""
        return _by_count(sum((o.findings for o in self.outcomes), Counter()))


@dataclass(frozen=True)
class Labelled:
    reclaimable_usd: float  # idle time (labelled) of unprotected instances that publish GPU metrics
    reclaimed_usd: float  # of it, what the would-be stops covered
    work_stops: int  # stops made while the instance was in labelled work (a dip, a pause, serving)

    @property
    def share(self) -> float:
        return self.reclaimed_usd / self.reclaimable_usd if self.reclaimable_usd else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "reclaimable_idle_usd": round(self.reclaimable_usd, 2),
            "reclaimed_idle_usd": round(self.reclaimed_usd, 2),
            "reclaimed_share": round(self.share, 4),
            "work_stops": self.work_stops,
        }


def counted(subject: Subject, protect_tag_key: str) -> bool:
    """Whether a subject's idle time is reclaimable: unprotected, publishing GPU metrics, labelled."""
    return (
        subject.labelled
        and bool(subject.tracks)
        and not policy_rules.is_protected(subject.resource.tags, protect_tag_key)
        and subject.hourly_usd is not None
    )


def _within(spans: list[Interval], period: Interval) -> timedelta:
    return sum((overlap(span, period) for span in spans), timedelta(0))


def labelled_figures(result: Result) -> Labelled:
    history, params = result.history, result.params
    period = (history.start, history.end)
    reclaimable = reclaimed = 0.0
    work_stops = 0
    for outcome in result.outcomes:
        subject = outcome.subject
        hourly = subject.hourly_usd or 0.0
        for event in outcome.events:
            if event.action == Action.STOP and any(
                lo <= event.at - history.step < hi for lo, hi in subject.work
            ):
                work_stops += 1
        if not counted(subject, params.protect_tag_key):
            continue
        reclaimable += hourly * _within(subject.idle, period).total_seconds() / 3600
        for stop in outcome.stopped:
            reclaimed += hourly * _within(subject.idle, stop).total_seconds() / 3600
    return Labelled(reclaimable, reclaimed, work_stops)


def perfect_foresight(
    history: History, params: Params, minimum: timedelta = timedelta(minutes=30)
) -> tuple[Labelled, int]:
    """The bound: a policy that knows the future stops each labelled idle period ``minimum`` after it began,
    when it still lasts at least the near-miss horizon after that or ends with its owner's stop (never a
    near-miss). Returns the figures and the number of stops."""
    reclaimable = reclaimed = 0.0
    stops = 0
    for subject in history.subjects:
        if not counted(subject, params.protect_tag_key):
            continue
        hourly = subject.hourly_usd or 0.0
        for lo, hi in subject.idle:
            reclaimable += hourly * overlap((lo, hi), (history.start, history.end)).total_seconds() / 3600
            stop = lo + minimum
            if stop >= hi or stop >= history.end:
                continue
            work_follows = any(w_lo == hi for w_lo, _ in subject.work)
            if work_follows and hi - stop < params.near_miss_horizon:
                continue
            stops += 1
            reclaimed += hourly * overlap((stop, hi), (history.start, history.end)).total_seconds() / 3600
    return Labelled(reclaimable, reclaimed, 0), stops


def statuses(subject: Subject, start: datetime, end: datetime, step: timedelta, percent: float) -> list[Any]:
    """For each period [start + k step, start + (k + 1) step) before ``end``: idle (every GPU reported, all
    under ``percent``), busy (any at or over it) or unknown, as the adaptive policy observes it."""
    count = int((end - start) / step)
    seen = [0] * count
    busy = [False] * count
    limit = percent * _per_gpu_divisor(subject)
    for track in subject.tracks.values():
        for at, value in track.series[track.at_or_after(start) : track.at_or_after(end)]:
            slot = (at - start) // step
            seen[slot] += 1
            if value >= limit:
                busy[slot] = True
    expected = max(1, subject.gpu_count)
    idle, on, unknown = adaptive.Status.IDLE, adaptive.Status.BUSY, adaptive.Status.UNKNOWN
    return [on if b else idle if n >= expected else unknown for n, b in zip(seen, busy, strict=True)]


def learned(
    subject: Subject, history: History, params: adaptive.AdaptiveParams, percent: float
) -> adaptive.IdleHistory:
    """The subject's idle history learned from its series before the period (a generated world's history
    days), one observation per step, as the deployed sweep learns it."""
    state = adaptive.IdleHistory(zone=adaptive.zone_of(subject.resource.tags))
    first = min((t.times[0] for t in subject.tracks.values() if t.times), default=None)
    if first is None or first >= history.start:
        return state
    cpu = subject.cpu or {}
    step = history.step
    for n, status in enumerate(statuses(subject, first, history.start, step, percent)):
        begin = first + step * n
        state.observe(begin + step, status, cpu.get(begin), params)
    return state


def _by_count(counts: Counter[str]) -> dict[str, int]:
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


class Windows:
    """A subject's tracks read window by window as the walk's ``now`` moves forward.

    Each bound moves on a point or two from where the last window left it, rather than being bisected out of
    a week of points again (at a million windows a week, those bisections miss the cache at every probe);
    GPUs that report at the same times (as an instance's usually do) share their bounds.
    """

    def __init__(self, subject: Subject) -> None:
        grids: list[tuple[list[datetime], list[int]]] = []
        self.tracks: list[tuple[int, Series, list[int]]] = []
        for key, track in subject.tracks.items():
            bounds = next((b for times, b in grids if times == track.times), None)
            if bounds is None:
                bounds = [0, 0]
                grids.append((track.times, bounds))
            self.tracks.append((key, track.series, bounds))
        self.grids = grids
        self.last: datetime | None = None

    def at(self, since: datetime, now: datetime) -> dict[int, Series]:
        """Each track's points in (since, now], for a window of a fixed length."""
        if self.last is not None and now < self.last:
            for _, bounds in self.grids:  # back in time: search again from the first point
                bounds[:] = [0, 0]
        self.last = now
        for times, bounds in self.grids:
            bounds[0] = low = _forward(times, since, bounds[0])
            bounds[1] = _forward(times, now, max(low, bounds[1]))
        return {key: points[bounds[0] : bounds[1]] for key, points, bounds in self.tracks}


def _forward(times: list[datetime], at: datetime, index: int) -> int:
    """``bisect_right(times, at)``, knowing it is at least ``index``: usually ``index`` or the one after."""
    end = len(times)
    if index < end and times[index] <= at:
        index += 1
        if index < end and times[index] <= at:
            index = bisect_right(times, at, index)
    return index


# What a subject is: the resource replayed.
Replayed = Ec2Instance | TrainingJob | NotebookInstance


@dataclass
class _State:
    """A resource as the walk sees it: its tags (with costguard's mark) and any would-be stop in force."""

    subject: Subject
    outcome: Outcome
    current: Replayed
    stopped_until: datetime | None = None
    last_notice: tuple[str, str, str] | None = None
    # The instance as the decisions see it, built once per change of its tags rather than at every step.
    resource_view: Resource | None = None
    windows: Windows = field(init=False)
    # Readings of the steps ahead by step number, and the would-be stop they hid (see _walk).
    ahead: dict[int, GpuReading] = field(default_factory=dict)
    ahead_hidden: Interval | None = None
    plan: read_schedule.Entry | None = None  # when the read schedule reads it next (EC2 instances)

    def __post_init__(self) -> None:
        self.windows = Windows(self.subject)
        self.set_resource_view()

    def set_mark(self, at: datetime | None) -> None:
        tags = dict(self.current.tags)
        if at is None:
            tags.pop(MARK_TAG_KEY, None)
        else:
            tags[MARK_TAG_KEY] = at.isoformat()
        self.current = replace(self.current, tags=tags)
        self.set_resource_view()

    def set_resource_view(self) -> None:
        current = self.current
        self.resource_view = (
            gpu_detect.instance_resource(current) if isinstance(current, Ec2Instance) else None
        )

    @property
    def hidden(self) -> Interval | None:
        stopped = self.outcome.stopped
        return stopped[-1] if stopped else None

    def started(self, at: datetime) -> None:
        """Its owner started it at ``at``: EC2's LaunchTime is the last start."""
        if isinstance(self.current, Ec2Instance) and self.current.launch_time != at:
            self.current = replace(self.current, launch_time=at)
            self.set_resource_view()

    def judged_at(self, now: datetime) -> bool:
        # Restarted at `stopped_until` (by its owner, to work): pending then, judged from the next sweep on.
        return self.stopped_until is None or now > self.stopped_until

    def read_ahead(
        self, numbers: range, steps: list[datetime], running: list[bool], thresholds: Thresholds
    ) -> None:
        """Read the steps ``numbers`` in one go, for those it will be judged at as things stand."""
        self.ahead_hidden = hidden = self.hidden
        self.ahead = {
            n: reading_at(self.subject, self.current, steps[n], thresholds, hidden, windows=self.windows)
            for n in numbers
            if running[n] and self.judged_at(steps[n])
        }

    def reading(self, n: int, now: datetime, thresholds: Thresholds) -> GpuReading:
        """The reading at step ``n``: the one read ahead, unless a would-be stop since hides other points."""
        hidden = self.hidden
        reading = self.ahead.pop(n, None) if hidden is self.ahead_hidden else None
        if reading is None:
            reading = reading_at(self.subject, self.current, now, thresholds, hidden, windows=self.windows)
        return reading


def reading_at(
    subject: Subject,
    resource: Replayed,
    now: datetime,
    thresholds: Thresholds,
    hidden: Interval | None = None,
    *,
    windows: Windows | None = None,
) -> GpuReading:
    """What the deployed sweep would have read of this resource at ``now``: the same reader functions, fed
    the history's points in the window they read (a walk passes the subject's ``windows``, read forward).

    Only what is known at ``now``: a datapoint stamped t covers [t, t + period), so the reading is that of
    the whole periods before ``now``, as of ``now - period`` (the datapoint stamped ``now`` is not used)."""
    known = now - thresholds.period
    series = series_at(subject, now, thresholds, hidden, windows=windows)
    # Only the accelerators of the resource count here, never its tags (the mark): a reading read ahead
    # holds whatever the walk marks meanwhile.
    if isinstance(resource, Ec2Instance):
        count = resource.accelerators.count if resource.accelerators else subject.gpu_count
        return gpu_detect.read_gpus(series, known, thresholds, count)
    if isinstance(resource, TrainingJob):
        return sagemaker_detect.read_training_job(series, resource, known, thresholds)
    return gpu_detect.read_gpus(series, known, thresholds, subject.gpu_count)


def series_at(
    subject: Subject,
    now: datetime,
    thresholds: Thresholds,
    hidden: Interval | None = None,
    *,
    windows: Windows | None = None,
) -> dict[int, Series]:
    """The points the sweep at ``now`` reads of a subject: those of the whole periods of its lookback."""
    known = now - thresholds.period
    since = known - thresholds.lookback
    series = (windows or Windows(subject)).at(since, known)
    if hidden is not None and hidden[1] > since:
        # A resource the backtest stopped publishes nothing while stopped: the sweep after its restart
        # would not have seen the datapoints history has for that span.
        series = {k: [p for p in s if not hidden[0] <= p[0] < hidden[1]] for k, s in series.items()}
    return series


def findings_of(
    subject: Subject,
    resource: Replayed,
    reading: GpuReading,
    now: datetime,
    thresholds: Thresholds,
    resource_view: Resource | None = None,
) -> list[Finding]:
    """The findings the deployed sweep would have made of that reading: the same detector functions (given,
    for an instance, the ``instance_resource`` of it the walk keeps while its tags stay the same)."""
    if isinstance(resource, Ec2Instance):
        return gpu_detect.gpu_instance_findings(
            resource, reading, price=subject.price, thresholds=thresholds, now=now, resource=resource_view
        )
    if isinstance(resource, TrainingJob):
        return sagemaker_detect.training_job_findings(
            resource, reading, price=subject.price, thresholds=thresholds, now=now
        )
    return sagemaker_detect.notebook_findings(
        resource, reading, price=subject.price, thresholds=thresholds, now=now
    )


def _per_gpu_divisor(subject: Subject) -> float:
    # SageMaker sums a training host's GPUs: busy per GPU is busy per host over its GPU count.
    return float(max(1, subject.gpu_count)) if subject.kind is SubjectKind.TRAINING_JOB else 1.0


def play_forward(
    subject: Subject, stop: datetime, limit: datetime, percent: float, period: timedelta
) -> tuple[datetime, str | None]:
    """How long a stop at ``stop`` would have lasted, at most until ``limit``: ``(until, why)``.

    ``why`` is ``"busy"`` when a GPU (a host, for a training job) was next at or over ``percent`` at
    ``until``: the first such datapoint not known at the stop (stamped after ``stop - period``; one that
    began before the stop ends it at the stop). It is ``"no_data"`` when a GPU's series has a gap of more
    than one missing period first: ``until`` is then the end of its last datapoint, as what the resource
    would have done after it is not known. ``None`` when it reached ``limit`` (its owner's stop, or the end
    of the period) idle all along.
    """
    threshold = percent * _per_gpu_divisor(subject)
    until, why = limit, None
    unknown_after = stop - period
    for track in subject.tracks.values():
        covered = stop  # this GPU's datapoints cover its time up to here
        for at, value in track.series[track.after(unknown_after) :]:
            if at >= until:
                break
            if at - covered > period:
                break  # more than one datapoint missing: a gap, checked below
            if value >= threshold:
                until, why = max(at, stop), "busy"
                break
            covered = at + period  # the points are in order, and none is known at the stop
        else:
            at = until
        if min(at, until) - covered > period and covered < until:
            until, why = covered, "no_data"
    return until, why


def period_numbers(history: History) -> dict[datetime, int]:
    """Each step's period [now - step, now) by its start, numbered from 0."""
    return {history.start + history.step * n: n for n in range(len(history.steps()))}


def idle_steps(
    subject: Subject, history: History, percent: float, numbers: dict[datetime, int] | None = None
) -> list[bool]:
    """For each step, whether every GPU reported in the period [now - step, now) it ends (CloudWatch stamps a
    datapoint with the start of its period) and all stayed under ``percent``. One pass over the points;
    ``numbers`` are the ``period_numbers`` of the history (the walk works them out once for all subjects)."""
    count = int((history.end - history.start) / history.step)
    numbers = period_numbers(history) if numbers is None else numbers
    limit = percent * _per_gpu_divisor(subject)
    expected = subject.instances if subject.kind is SubjectKind.TRAINING_JOB else subject.gpu_count
    if len(subject.tracks) < max(1, expected):
        return [False] * count
    idle = [True] * count
    start, step = history.start, history.step
    for track in subject.tracks.values():
        seen = [False] * count
        for at, value in track.series[track.at_or_after(start) : track.at_or_after(history.end)]:
            slot = numbers.get(at)
            if slot is None:
                slot = (at - start) // step  # a datapoint stamped inside its period
            seen[slot] = True
            if value >= limit:
                idle[slot] = False
        idle = [i and s for i, s in zip(idle, seen, strict=True)]
    return idle


def _running_flags(subject: Subject, times: list[datetime]) -> list[bool]:
    """For each of the (sorted) ``times``, whether the sweep then would have judged the subject: running,
    and started before it (an instance started at that very moment is still pending, with nothing published)."""
    flags = [False] * len(times)
    for start, end in subject.running:
        first, last = bisect_right(times, start), bisect_left(times, end)
        flags[first:last] = [True] * (last - first)
    return flags


def billed_shares(subject: Subject, history: History) -> list[float]:
    """For each step, the share of its period [now - step, now) the subject ran (and was billed) in: 1.0 for
    most, a fraction where its owner started or stopped it within the period, 0.0 while it was stopped."""
    start, step = history.start, history.step
    count = int((history.end - start) / step)
    shares = [0.0] * count
    for lo, hi in subject.running:
        lo, hi = max(lo, start), min(hi, history.end)
        if lo >= hi:
            continue
        first, last = (lo - start) // step, min(count - 1, (hi - start) // step)
        if first + 1 < last:
            shares[first + 1 : last] = [1.0] * (last - first - 1)
        for slot in {first, last}:
            slot_start = start + step * slot
            shares[slot] += overlap((lo, hi), (slot_start, slot_start + step)) / step
    return shares


def _run_starts(subject: Subject, steps: list[datetime], after: datetime) -> dict[int, datetime]:
    """The first step of each running period that begins after ``after``, with when it began."""
    starts = {}
    for begin, end in subject.running:
        n = bisect_right(steps, begin)
        if begin > after and n < len(steps) and steps[n] < end:
            starts[n] = begin
    return starts


def backtest(history: History, params: Params, progress: Progress | None = None) -> Result:
    """Walk the history step by step and account for what each would-be decision would have done."""
    with _collector_off_the_history():
        return _walk(history, params, progress)


@contextmanager
def _collector_off_the_history() -> Iterator[None]:
    """Everything alive before the walk (the history's millions of points first) kept out of the garbage
    collector's sight while it runs: each full collection would go through all of it again, to find nothing
    to free (it lives until the walk ends)."""
    if gc.get_freeze_count():
        yield  # frozen already by whoever runs the walk: theirs to undo
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class _Columns(NamedTuple):
    """What the walk needs of each subject at every step, worked out once for the whole period (one entry per
    subject, in the history's order)."""

    idle: list[list[bool]]  # idle_steps: whether the period each step ends was idle
    billed: list[list[float]]  # billed_shares: how much of each step's period the subject ran
    runs: list[list[bool]]  # _running_flags: whether the sweep at each step would have judged it
    restarts: list[dict[int, datetime]]  # _run_starts: the steps at which its owner had started it again
    # The adaptive policy's idle history (learned before the period) and its status at each step.
    learning: list[tuple[adaptive.IdleHistory, list[Any]] | None]
    peers: list[list[str]]  # the adaptive policy's peer groups of each subject (detect/idle_priors.py)


def _columns(
    history: History, params: Params, steps: list[datetime], tuning: adaptive.AdaptiveParams
) -> _Columns:
    """Each subject's per-step figures, computed once rather than at each step."""
    subjects = history.subjects
    periods = period_numbers(history)
    idle = [idle_steps(s, history, params.idle_percent, periods) for s in subjects]
    billed = [billed_shares(s, history) for s in subjects]
    runs = [_running_flags(s, steps) for s in subjects]
    # EC2 sets an instance's LaunchTime at each start: the replayed instance carries it from its restarts.
    restarts = [
        _run_starts(s, steps, history.start) if isinstance(s.resource, Ec2Instance) else {} for s in subjects
    ]
    # The adaptive policy: each instance's idle history, learned before the period and then step by step.
    learning: list[tuple[adaptive.IdleHistory, list[Any]] | None] = [None] * len(subjects)
    peers: list[list[str]] = [[] for _ in subjects]
    if params.idle_policy == "adaptive":
        learning = [
            (
                learned(s, history, tuning, params.idle_percent),
                statuses(s, history.start, history.end, history.step, params.idle_percent),
            )
            if idle_priors.kind_of(s.resource) is not None and s.tracks
            else None
            for s in subjects
        ]
        peers = [
            _peer_groups(s) if learner is not None else []
            for s, learner in zip(subjects, learning, strict=True)
        ]
    return _Columns(idle, billed, runs, restarts, learning, peers)


def _peer_groups(subject: Subject) -> list[str]:
    kind = idle_priors.kind_of(subject.resource)
    return idle_priors.peer_groups(*kind, subject.resource.tags) if kind else []


def _pools(
    learning: list[tuple[adaptive.IdleHistory, list[Any]] | None], peers: list[list[str]]
) -> dict[str, idle_priors.Pool]:
    """The fleet's priors from what the subjects learned before the period (detect/idle_priors.py); the walk
    adds what they learn step by step."""
    pools: dict[str, idle_priors.Pool] = {}
    for learner, groups in zip(learning, peers, strict=True):
        if learner is not None:
            idle_priors.pooled({"": learner[0].take_recorded()}, {"": groups}, pools)
    return pools


def _learn(
    learner: tuple[adaptive.IdleHistory, list[Any]],
    n: int,
    now: datetime,
    cpu: float | None,
    tuning: adaptive.AdaptiveParams,
    groups: list[str],
    pools: dict[str, idle_priors.Pool],
) -> None:
    """The sweep at ``now`` observes the period just ended; what it records goes to the subject's pools."""
    learner[0].observe(now, learner[1][n], cpu, tuning)
    idle_priors.pooled({"": learner[0].take_recorded()}, {"": groups}, pools)


def _walk(history: History, params: Params, progress: Progress | None) -> Result:
    """``backtest``'s walk: at each step, account for the period just ended, then judge and decide."""
    thresholds = params.thresholds(history.step)
    policy = params.policy()
    limiter = MemoryStopLimiter(params.max_stops_per_hour)
    gate = MemoryRepeatGate()
    step = history.step
    step_hours = step.total_seconds() / 3600
    states = [_State(s, Outcome(s), s.resource) for s in history.subjects]
    steps = history.steps()
    tuning = params.adaptive()
    idle_by_subject, billed, runs, restarts, learning, peers = _columns(history, params, steps, tuning)
    pools = _pools(learning, peers)
    scheduled = params.scheduled
    for n, now in enumerate(steps):
        if n % READ_AHEAD == 0:
            # Each subject's next steps read in one go: its points stay in the cache from one window to the
            # next, where reading every subject at each step in turn fetched them from memory every time.
            # The same reads, only earlier: a reading depends on the points alone, and one that a would-be
            # stop decided meanwhile would hide points from is read again at its step (_State.reading).
            numbers = range(n, min(n + READ_AHEAD, len(steps)))
            for state, running in zip(states, runs, strict=True):
                state.read_ahead(numbers, steps, running, thresholds)
        findings: list[Finding] = []
        owners: list[_State] = []
        for state, idle, shares, running, restart, learner, groups in zip(
            states, idle_by_subject, billed, runs, restarts, learning, peers, strict=True
        ):
            subject, outcome = state.subject, state.outcome
            if learner is not None:
                _learn(learner, n, now, (subject.cpu or {}).get(now - step), tuning, groups, pools)
            # Accounting: the period [now - step, now) that has just ended, for the share of it the resource
            # ran; idle when every GPU reported in it and all stayed under the threshold.
            share = shares[n]
            if share:
                hourly = subject.hourly_usd or 0.0
                outcome.running_hours += share * step_hours
                if idle[n]:
                    outcome.idle_usd += hourly * share * step_hours
                    stopped = outcome.stopped  # chronological: only the latest can cover this period
                    if stopped and stopped[-1][1] > now - step:
                        begin, until = stopped[-1]
                        if begin <= now - step and now <= until:  # the whole period: the usual case
                            outcome.reclaimed_idle_usd += hourly * share * step_hours
                        else:
                            covered = overlap(stopped[-1], (now - step, now))
                            outcome.reclaimed_idle_usd += hourly * covered.total_seconds() / 3600
            # Decision: what the sweep at `now` would have said, unless a would-be stop is still in force.
            if not state.judged_at(now):
                continue
            state.stopped_until = None
            if not running[n]:
                continue  # not running: stopped by its owner, not yet launched, or gone
            if n in restart:
                state.started(restart[n])
            if scheduled and not _due(state, now):
                continue  # nothing it could say yet: not read (detect/read_schedule.py)
            outcome.reads += 1
            reading = state.reading(n, now, thresholds)
            found = findings_of(subject, state.current, reading, now, thresholds, state.resource_view)
            outcome.evidence_metrics += _evidence_metrics(state, reading.verdict, found, policy, now)
            if scheduled and isinstance(state.current, Ec2Instance):
                state.plan = _planned(
                    state, found, now, thresholds, params.repeat_window >= params.idle_window
                )
            if learner is not None and found:
                prior = idle_priors.prior_for(groups, pools)
                advice = adaptive.advise(learner[0], now, subject.hourly_usd, tuning, prior)
                found = [adaptive.adapt(f, advice, now, tuning) for f in found]
            if not found:
                state.last_notice = None
            for finding in found:
                outcome.findings[finding.reason.value] += 1
            findings += found
            owners += [state] * len(found)
        for state, decision in zip(owners, policy_rules.decide_all(findings, policy, now), strict=True):
            _apply(state, decision, now, history, params, limiter, gate)
        if progress is not None:
            progress(n + 1, len(steps))
    return Result(history, params, [s.outcome for s in states])


def _due(state: _State, now: datetime) -> bool:
    """Whether the deployed sweep at ``now`` would read the subject by its read schedule."""
    current = state.current
    if not isinstance(current, Ec2Instance):
        return True  # the schedule is the EC2 sweep's
    return read_schedule.is_due(state.plan, now, tags=current.tags, launched=current.launch_time)


def _evidence_metrics(
    state: _State, verdict: Verdict, found: list[Finding], policy: Policy, now: datetime
) -> int:
    """The CPU and network metrics the sweep reads for this reading's message."""
    tags = state.current.tags
    return read_schedule.evidence_metrics(
        verdict, found, standing=_standing(state), tags=tags, policy=policy, now=now
    )


def _standing(state: _State) -> bool:
    """Whether the subject's finding stood unmarked at its last reading (flows/gpu.Planner.standing)."""
    return read_schedule.is_standing(
        state.plan, tags=state.current.tags, launched=getattr(state.current, "launch_time", None)
    )


def _planned(
    state: _State, found: list[Finding], now: datetime, thresholds: Thresholds, slots: bool
) -> read_schedule.Entry:
    """The subject's next read after a reading at ``now``, as the deployed sweep plans it."""
    current = state.current
    assert isinstance(current, Ec2Instance)
    return read_schedule.after_read(
        state.plan,
        found,
        series_at(state.subject, now, thresholds, state.hidden),
        known=now - thresholds.period,  # the reading at sweep time s is of the points up to s - period
        now=now,
        thresholds=thresholds,
        expected_gpus=current.accelerators.count if current.accelerators else state.subject.gpu_count,
        tags=current.tags,
        launched=current.launch_time,
        slots=slots,
    )


def _apply(
    state: _State,
    decision: Decision,
    now: datetime,
    history: History,
    params: Params,
    limiter: MemoryStopLimiter,
    gate: MemoryRepeatGate,
) -> None:
    """A stop the deployed ReasonModes and RemediateScope hold (remediate would not act on the finding:
    policy.Policy.held) is told as notify mode tells it, and not played as a stop."""
    action, reason = decision.action, decision.reason.value
    events = state.outcome.events
    if action is Action.NONE:
        return  # waiting out the grace period
    capped = False
    held = params.remediate.held(decision.finding) if action is Action.STOP else None
    if held is not None:
        action, note = Action.NOTIFY, f"would stop, held: {held}"
        decision = decision.model_copy(update={"action": action, "note": note})
    if action is Action.MARK:
        state.set_mark(now)
    elif action is Action.UNMARK:
        state.set_mark(None)
    elif action is Action.STOP:
        if not limiter.acquire(now):
            action, note = Action.NOTIFY, f"stop cap of {params.max_stops_per_hour} per hour reached"
            decision = decision.model_copy(update={"action": action, "note": note})
            capped = True
        else:
            _notice(state, decision, action, now, params, gate, capped=False)
            events.append(_stop(state, now, history, params, reason, decision.note))
            state.last_notice = None
            return
    _notice(state, decision, action, now, params, gate, capped=capped)
    if action is Action.NOTIFY:
        key = (action.value, reason, decision.note)
        if key == state.last_notice:
            return  # the same news as the step before: one event for the whole episode
        state.last_notice = key
        if held is not None:
            state.outcome.held[reason] += 1  # a held stop, once an episode (as its notice is)
    elif action is Action.MARK:
        state.last_notice = None
    events.append(Event(now, action.value, reason, decision.note))


def _notice(
    state: _State,
    decision: Decision,
    action: Action,
    now: datetime,
    params: Params,
    gate: MemoryRepeatGate,
    *,
    capped: bool,
) -> None:
    """Count the notice the notifier would have posted for this decision (pipeline.act_on's repeat rule: the
    same resource, reason and action once per episode, an episode ending when unseen for the repeat window;
    a stop held by the hourly cap once per episode too)."""
    key = f"{decision.resource.key}|{decision.reason}|{action}"
    if decision.finding.repeat_scope:
        key += f"|{decision.finding.repeat_scope}"
    if capped:
        key += "|capped"
    window = ONCE_WINDOW if decision.reason in ALERT_ONCE else params.repeat_window
    if gate.first_in_window(key, now, window):
        state.outcome.notices[decision.reason.value] += 1


def _stop(state: _State, now: datetime, history: History, params: Params, reason: str, note: str) -> Event:
    """Play a would-be stop forward against what really happened (``play_forward``)."""
    subject = state.subject
    running = subject.running_at(now)
    run_end = min(running[1] if running else now, history.end)
    until, why = play_forward(subject, now, run_end, params.idle_percent, history.step)
    ended_by = why or ("period_end" if run_end >= history.end else "owner_stopped")
    # Priced as the savings ledger prices a stop (one definition): back at `until` when work resumed, else its
    # run ended there (the owner's stop, no data, the period's end), which bounds it as a planned end would.
    entry = stop_entry(subject, now, until, back=why == "busy", reason=reason)
    saved = entry.dollars(until)
    state.outcome.saved_usd += saved or 0.0
    state.outcome.stopped.append((now, until))
    # Judged again from `until` (an owner restarting it to work is seen busy then); the mark tag stays on a
    # stopped resource, as it does in AWS, and the busy reading cancels it.
    state.stopped_until = until
    near = ledger.near_miss(entry.at, entry.returned_at, params.near_miss_horizon)
    return Event(
        now,
        Action.STOP.value,
        reason,
        note,
        saved_usd=round(saved, 4) if saved is not None else None,
        stopped_until=until,
        ended_by=ended_by,
        near_miss=near,
    )


def stop_entry(subject: Subject, at: datetime, until: datetime, *, back: bool, reason: str) -> ledger.Entry:
    """The savings ledger's entry of a would-be stop played forward to ``until``."""
    r = subject.resource
    return ledger.Entry(
        id=f"{subject.id}@{at.isoformat()}",
        at=at,
        account=r.account,
        region=r.region,
        kind=subject.kind.value,
        resource_id=subject.id,
        name=r.tags.get("Name") or subject.id,
        team=r.tags.get("team", "").strip() or ledger.NO_TEAM,
        owner=r.tags.get("owner"),
        reason=reason,
        mode=ledger.WOULD,
        hourly_usd=subject.hourly_usd,
        planned_end=None if back else until,
        returned_at=until if back else None,
    )


def _minutes(delta: timedelta) -> int:
    return int(delta.total_seconds() // 60)
