"""The walk: step through a past period and run the deployed detectors and policy at each step. Pure.

At each metric-period step every resource that ran gets the reading, the findings and the decision the
scheduled sweep would have given it (detect/gpu.py, detect/sagemaker.py, policy.decide_all, looked up
on their modules at each call so a test can watch them), with the
policy of remediate mode: the marks a live run would have written to the tags are kept here, so grace
periods run their course and stops come due. A stop is then played forward against what really happened:
it saves the resource's price from the decision until the resource next became busy (an owner would have
started it again), was stopped by its owner, or the period ended; busy again within the horizon is a
near-miss, work the stop would have interrupted.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from costguard import policy as policy_rules
from costguard.act.limits import MemoryStopLimiter
from costguard.backtest.history import History, Subject, SubjectKind
from costguard.detect import gpu as gpu_detect
from costguard.detect import sagemaker as sagemaker_detect
from costguard.detect.gpu import Series, Thresholds
from costguard.model import (
    MARK_TAG_KEY,
    Action,
    Decision,
    Ec2Instance,
    Finding,
    NotebookInstance,
    TrainingJob,
)
from costguard.policy import Policy
from costguard.settings import Settings

Progress = Callable[[int, int], None]


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

    def as_json(self) -> dict[str, Any]:
        return {
            "idle_threshold_percent": self.idle_percent,
            "idle_window_minutes": _minutes(self.idle_window),
            "starved_threshold_percent": self.starved_percent,
            "starved_window_minutes": _minutes(self.starved_window),
            "grace_minutes": _minutes(self.grace),
            "near_miss_horizon_minutes": _minutes(self.near_miss_horizon),
            "protect_tag_key": self.protect_tag_key,
            "max_stops_per_run": self.max_stops_per_run,
            "max_stops_per_hour": self.max_stops_per_hour,
        }


@dataclass(frozen=True)
class Event:
    """One would-be decision on one resource (repeats of the same notification are folded into the first)."""

    at: datetime
    action: str  # mark | unmark | stop | notify
    reason: str
    note: str
    saved_usd: float | None = None
    stopped_until: datetime | None = None
    ended_by: str | None = None  # busy | owner_stopped | period_end
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


@dataclass
class _State:
    """A resource as the walk sees it: its tags (with costguard's mark) and any would-be stop in force."""

    subject: Subject
    outcome: Outcome
    current: Ec2Instance | TrainingJob | NotebookInstance
    stopped_until: datetime | None = None
    last_notice: tuple[str, str, str] | None = None

    def set_mark(self, at: datetime | None) -> None:
        tags = dict(self.current.tags)
        if at is None:
            tags.pop(MARK_TAG_KEY, None)
        else:
            tags[MARK_TAG_KEY] = at.isoformat()
        self.current = replace(self.current, tags=tags)


def findings_at(
    subject: Subject,
    resource: Ec2Instance | TrainingJob | NotebookInstance,
    now: datetime,
    thresholds: Thresholds,
    hidden: tuple[datetime, datetime] | None = None,
) -> list[Finding]:
    """The findings the deployed sweep would have made of this resource at ``now``: the same detector
    functions, fed the history's points in the window they read."""
    since = now - max(thresholds.idle_window, thresholds.starved_window)
    series: dict[int, Series] = {
        key: track.series[bisect_right(track.times, since) : bisect_right(track.times, now)]
        for key, track in subject.tracks.items()
    }
    if hidden is not None and hidden[1] > since:
        # A resource the backtest stopped publishes nothing while stopped: the sweep after its restart
        # would not have seen the datapoints history has for that span.
        series = {k: [p for p in s if not hidden[0] <= p[0] < hidden[1]] for k, s in series.items()}
    if isinstance(resource, Ec2Instance):
        count = resource.accelerators.count if resource.accelerators else subject.gpu_count
        reading = gpu_detect.read_gpus(series, now, thresholds, count)
        return gpu_detect.gpu_instance_findings(
            resource, reading, price=subject.price, thresholds=thresholds, now=now
        )
    if isinstance(resource, TrainingJob):
        reading = sagemaker_detect.read_training_job(series, resource, now, thresholds)
        return sagemaker_detect.training_job_findings(
            resource, reading, price=subject.price, thresholds=thresholds, now=now
        )
    reading = gpu_detect.read_gpus(series, now, thresholds, subject.gpu_count)
    return sagemaker_detect.notebook_findings(
        resource, reading, price=subject.price, thresholds=thresholds, now=now
    )


def _per_gpu_divisor(subject: Subject) -> float:
    # SageMaker sums a training host's GPUs: busy per GPU is busy per host over its GPU count.
    return float(max(1, subject.gpu_count)) if subject.kind is SubjectKind.TRAINING_JOB else 1.0


def first_busy(subject: Subject, after: datetime, before: datetime, percent: float) -> datetime | None:
    """The first datapoint after ``after`` (and before ``before``) where any GPU is at or over ``percent``."""
    limit = percent * _per_gpu_divisor(subject)
    found: datetime | None = None
    for track in subject.tracks.values():
        for at, value in track.series[track.after(after) :]:
            if at >= before or (found is not None and at >= found):
                break
            if value >= limit:
                found = at
                break
    return found


def idle_steps(subject: Subject, history: History, percent: float) -> list[bool]:
    """For each step, whether every GPU reported in the period [now - step, now) it ends (CloudWatch stamps a
    datapoint with the start of its period) and all stayed under ``percent``. One pass over the points."""
    count = int((history.end - history.start) / history.step)
    limit = percent * _per_gpu_divisor(subject)
    expected = subject.instances if subject.kind is SubjectKind.TRAINING_JOB else subject.gpu_count
    if len(subject.tracks) < max(1, expected):
        return [False] * count
    idle = [True] * count
    for track in subject.tracks.values():
        seen = [False] * count
        for at, value in track.series[track.at_or_after(history.start) : track.at_or_after(history.end)]:
            slot = int((at - history.start) / history.step)
            seen[slot] = True
            if value >= limit:
                idle[slot] = False
        idle = [i and s for i, s in zip(idle, seen, strict=True)]
    return idle


def backtest(history: History, params: Params, progress: Progress | None = None) -> Result:
    """Walk the history step by step and account for what each would-be decision would have done."""
    thresholds = params.thresholds(history.step)
    policy = params.policy()
    limiter = MemoryStopLimiter(params.max_stops_per_hour)
    step_hours = history.step.total_seconds() / 3600
    states = [_State(s, Outcome(s), s.resource) for s in history.subjects]
    steps = history.steps()
    idle_by_subject = [idle_steps(s, history, params.idle_percent) for s in history.subjects]
    # Whether each subject ran at each step's start and at its end, computed once rather than per step.
    ran = [[s.running_at(now - history.step) is not None for now in steps] for s in history.subjects]
    runs = [[s.running_at(now) is not None for now in steps] for s in history.subjects]
    for n, now in enumerate(steps):
        findings: list[Finding] = []
        owners: list[_State] = []
        for state, idle, ran_before, running in zip(states, idle_by_subject, ran, runs, strict=True):
            subject = state.subject
            # Accounting: the period [now - step, now) that has just ended.
            if ran_before[n]:
                hourly = subject.hourly_usd or 0.0
                state.outcome.running_hours += step_hours
                if idle[n]:
                    state.outcome.idle_usd += hourly * step_hours
                    stopped = state.outcome.stopped  # chronological: only the latest can cover now
                    if stopped and stopped[-1][0] <= now - history.step and now <= stopped[-1][1]:
                        state.outcome.reclaimed_idle_usd += hourly * step_hours
            # Decision: what the sweep at `now` would have said, unless a would-be stop is still in force.
            if state.stopped_until is not None and now < state.stopped_until:
                continue
            state.stopped_until = None
            if not running[n]:
                continue  # not running: stopped by its owner, not yet launched, or gone
            stopped = state.outcome.stopped
            found = findings_at(subject, state.current, now, thresholds, stopped[-1] if stopped else None)
            if not found:
                state.last_notice = None
            findings += found
            owners += [state] * len(found)
        for state, decision in zip(owners, policy_rules.decide_all(findings, policy, now), strict=True):
            _apply(state, decision, now, history, params, limiter)
        if progress is not None:
            progress(n + 1, len(steps))
    return Result(history, params, [s.outcome for s in states])


def _apply(
    state: _State,
    decision: Decision,
    now: datetime,
    history: History,
    params: Params,
    limiter: MemoryStopLimiter,
) -> None:
    action, reason = decision.action, decision.reason.value
    events = state.outcome.events
    if action is Action.NONE:
        return  # waiting out the grace period
    if action is Action.MARK:
        state.set_mark(now)
    elif action is Action.UNMARK:
        state.set_mark(None)
    elif action is Action.STOP:
        if not limiter.acquire(now):
            action, note = Action.NOTIFY, f"stop cap of {params.max_stops_per_hour} per hour reached"
            decision = decision.model_copy(update={"action": action, "note": note})
        else:
            events.append(_stop(state, now, history, params, reason, decision.note))
            state.last_notice = None
            return
    if action is Action.NOTIFY:
        key = (action.value, reason, decision.note)
        if key == state.last_notice:
            return  # the same news as the step before: one event for the whole episode
        state.last_notice = key
    elif action is Action.MARK:
        state.last_notice = None
    events.append(Event(now, action.value, reason, decision.note))


def _stop(state: _State, now: datetime, history: History, params: Params, reason: str, note: str) -> Event:
    """Play a would-be stop forward against what really happened."""
    subject = state.subject
    running = subject.running_at(now)
    run_end = min(running[1] if running else now, history.end)
    busy = first_busy(subject, now, run_end, params.idle_percent)
    until = busy or run_end
    ended_by = "busy" if busy else ("period_end" if run_end >= history.end else "owner_stopped")
    hourly = subject.hourly_usd
    saved = hourly * (until - now).total_seconds() / 3600 if hourly is not None else None
    state.outcome.saved_usd += saved or 0.0
    state.outcome.stopped.append((now, until))
    # Judged again from `until` (an owner restarting it to work is seen busy then); the mark tag stays on a
    # stopped resource, as it does in AWS, and the busy reading cancels it.
    state.stopped_until = until
    near = busy is not None and busy - now <= params.near_miss_horizon
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


def _minutes(delta: timedelta) -> int:
    return int(delta.total_seconds() // 60)
