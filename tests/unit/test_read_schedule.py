"""The read schedule (detect/read_schedule.py): a bound is never late, and the decisions do not change."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from costguard.backtest.command import world_period
from costguard.backtest.generate import generate
from costguard.backtest.walk import Params, Result, backtest
from costguard.backtest.world_history import world_history
from costguard.detect import read_schedule
from costguard.detect.gpu import Thresholds, Verdict, instance_resource, read_gpus
from costguard.local.world import load_world
from costguard.model import MARK_TAG_KEY, Ec2Instance, Finding, Reason
from costguard.pricing import PriceBook

ROOT = Path(__file__).resolve().parents[2]
MINUTE = timedelta(minutes=1)
T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
THRESHOLDS = Thresholds()
SAYS_SOMETHING = {Verdict.IDLE, Verdict.STARVED, Verdict.PARTIAL, Verdict.NO_METRICS}


def _series(
    rng: random.Random, gpus: int, minutes: int, level: float
) -> dict[int, list[tuple[datetime, float]]]:
    """Per-GPU per-minute points up to T0, around ``level`` with some quiet minutes and gaps."""
    out: dict[int, list[tuple[datetime, float]]] = {}
    for gpu in range(gpus):
        points = []
        for m in range(minutes, 0, -1):
            if rng.random() < 0.03:
                continue  # a missing datapoint
            value = 0.0 if rng.random() < 0.1 else max(0.0, min(100.0, rng.gauss(level, 15)))
            points.append((T0 - MINUTE * m, value))
        out[gpu] = points
    return out


def _continue(
    series: dict[int, list[tuple[datetime, float]]], rng: random.Random, minutes: int, mode: str
) -> None:
    """Extend each GPU's series by ``minutes`` in the way that reaches a verdict fastest (``mode``)."""
    for gpu, points in series.items():
        for m in range(minutes):
            at = T0 + MINUTE * m
            if mode == "silent" and gpu == 0:
                continue
            value = {"idle": 0.0, "low": THRESHOLDS.idle_percent, "random": rng.uniform(0, 100)}.get(
                mode, 0.0
            )
            points.append((at, value))


def _quiet_history(
    rng: random.Random, known: datetime
) -> tuple[int, dict[int, list[tuple[datetime, float]]]]:
    """A history whose reading at ``known`` says nothing, the only kind the bound is for: the first of the
    seed's draws that is one (about 1 in 3 first draws says something: 15 of the 40 seeds draw again)."""
    for _ in range(100):
        gpus = rng.choice([1, 4, 8])
        series = _series(rng, gpus, minutes=rng.choice([40, 150, 240]), level=rng.choice([30.0, 60.0, 95.0]))
        if read_gpus(series, known, THRESHOLDS, gpus).verdict not in SAYS_SOMETHING:
            return gpus, series
    pytest.fail("no history that says nothing in 100 draws")


@pytest.mark.parametrize("seed", range(40))
def test_no_reading_before_the_bound_gives_a_finding_whatever_comes_next(seed: int) -> None:
    """Every one of the 40 seeds checks the property: none is passed over (no early return), and each has
    minutes before its bound to check, read against every way the series can go on."""
    rng = random.Random(seed)
    known = T0 - MINUTE
    gpus, series = _quiet_history(rng, known)
    bound = read_schedule.earliest_finding(series, known, THRESHOLDS, gpus)
    assert bound > known
    before = [known + MINUTE * n for n in range(1, 24 * 60) if known + MINUTE * n < bound]
    # Every seed's quiet history is a busy one, bounded 26 to 30 minutes on (the idle window, or the starved
    # bound a few minutes sooner), never at the next reading: at least 20 minutes to check, in every mode.
    assert len(before) >= 20, (bound, known)
    for mode in ("idle", "low", "silent", "random"):
        future = {k: list(v) for k, v in series.items()}
        _continue(future, rng, minutes=240, mode=mode)
        for at in before:
            verdict = read_gpus(future, at, THRESHOLDS, gpus).verdict
            assert verdict not in SAYS_SOMETHING, (mode, at, bound, verdict)


def test_a_gpu_busy_a_minute_ago_cannot_be_idle_before_the_window_has_passed() -> None:
    # At 100% the working mean cannot fall under 70% within 37 minutes: the idle window decides.
    series = {0: [(T0 - MINUTE * m, 100.0) for m in range(120, 0, -1)]}
    bound = read_schedule.earliest_finding(series, T0 - MINUTE, THRESHOLDS, 1)
    assert bound == T0 - MINUTE + THRESHOLDS.idle_window
    # At 90% it can, in 29 (each new minute working at 5% as the oldest leave): the starved bound decides.
    series = {0: [(T0 - MINUTE * m, 90.0) for m in range(120, 0, -1)]}
    assert read_schedule.earliest_finding(series, T0 - MINUTE, THRESHOLDS, 1) == T0 - MINUTE + 29 * MINUTE


def test_a_silent_gpu_makes_the_next_reading_due() -> None:
    series = {0: [(T0 - MINUTE * m, 90.0) for m in range(60, 0, -1)], 1: []}
    assert read_schedule.earliest_finding(series, T0, THRESHOLDS, 2) == T0


def _idle_finding(at: datetime = T0) -> Finding:
    instance = Ec2Instance(
        id="i-0a", type="g5.xlarge", state="running", account="1", region="us-east-1", launch_time=T0
    )
    return Finding(
        reason=Reason.GPU_IDLE, resource=instance_resource(instance), summary="idle", observed_at=at
    )


def _standing_reads(sweeps: list[datetime], window: timedelta) -> list[datetime]:
    """The sweeps that read a standing idle finding first read at ``sweeps[0]``, each read planning the next."""
    entry, reads = None, []
    for at in sweeps:
        if read_schedule.is_due(entry, at, tags={}, launched=None):
            reads.append(at)
            entry = read_schedule.next_entry(
                entry, [_idle_finding(at)], now=at, earliest=at, window=window, tags={}, launched=None
            )
    return reads


def test_a_standing_idle_finding_keeps_its_slots_and_a_mark_makes_it_due_every_sweep() -> None:
    step, window = timedelta(minutes=5), THRESHOLDS.idle_window
    idle = _idle_finding()
    first = read_schedule.next_entry(None, [idle], now=T0, earliest=T0, window=window, tags={}, launched=None)
    assert (first.anchor, first.due) == (T0, T0 + window)
    # A read forced before the slot (a tag come and gone) leaves the entry as it was: nothing to write.
    forced = read_schedule.next_entry(
        first, [idle], now=T0 + 2 * step, earliest=T0, window=window, tags={}, launched=None
    )
    assert forced == first
    sweeps = [T0 + MINUTE * m for m in range(0, 65, 5)]
    assert _standing_reads(sweeps, window) == [T0, T0 + window, T0 + 2 * window]
    assert read_schedule.is_due(first, T0 + step, tags={MARK_TAG_KEY: "x"}, launched=None)
    marked = read_schedule.next_entry(
        first, [idle], now=T0, earliest=T0, window=window, tags={MARK_TAG_KEY: "x"}, launched=None
    )
    assert marked.kind is read_schedule.Kind.EVERY
    assert read_schedule.Entry.decode(first.encode()) == first


def test_sweeps_straddling_a_slot_read_at_the_first_sweep_after_it_and_keep_the_slots() -> None:
    window = THRESHOLDS.idle_window
    anchor = T0  # the standing finding's first reading, 12:00:00: slots at 12:30, 13:00, ...
    seconds = timedelta(seconds=1)
    straddling = [anchor, T0 + MINUTE * 29 + 50 * seconds, T0 + MINUTE * 35 + 10 * seconds]
    after = [T0 + MINUTE * m + 10 * seconds for m in range(40, 65, 5)]  # 12:40:10 ... 13:00:10
    early = T0 + MINUTE * 59 + 50 * seconds  # a sweep just before 13:00
    reads = _standing_reads([*straddling, *after[:-1], early, after[-1]], window)
    # 12:29:50 is before the 12:30 slot, 12:35:10 the first sweep at or after it: it reads. The next slot is
    # 13:00 (from the slot, not 13:05:10 from the read): 12:59:50 is before it, 13:00:10 reads.
    assert reads == [anchor, straddling[2], after[-1]]
    entry = read_schedule.next_entry(
        None, [_idle_finding()], now=anchor, earliest=anchor, window=window, tags={}, launched=None
    )
    late = read_schedule.next_entry(
        entry, [_idle_finding()], now=straddling[2], earliest=anchor, window=window, tags={}, launched=None
    )
    assert (late.anchor, late.due) == (anchor, anchor + 2 * window)


@pytest.mark.parametrize("seed", range(20))
def test_over_jittered_sweeps_every_slot_is_read_at_the_first_sweep_after_it(seed: int) -> None:
    """However early or late each sweep runs (and with some sweeps missed), every slot of a standing finding is
    read by the first sweep at or after it, once: no standing finding waits more than one window and a sweep."""
    rng = random.Random(seed)
    step, window = timedelta(minutes=5), THRESHOLDS.idle_window
    jitter = timedelta(seconds=rng.choice([5, 30, 90, 150]))
    sweeps = []
    for n in range(12 * 12):  # twelve hours of 5-minute sweeps
        if rng.random() < 0.05:
            continue  # a sweep that did not run
        sweeps.append(T0 + step * n + jitter * rng.uniform(-1, 1))
    sweeps.sort()
    reads = _standing_reads(sweeps, window)
    anchor = reads[0]
    slots = [anchor + window * k for k in range(1, 24) if anchor + window * k <= sweeps[-1]]
    served = [min(t for t in sweeps if t >= slot) for slot in slots]
    assert reads == [anchor, *served]
    gaps = [b - a for a, b in itertools.pairwise(sweeps)]
    for before, read in itertools.pairwise(reads):
        assert read - before <= window + max(gaps)
    for slot, read in zip(slots, served, strict=True):
        assert read - slot < max(gaps)


def test_costguard_s_own_mark_makes_no_entry_due_again_but_a_marked_instance_is_read_every_sweep() -> None:
    step, window = timedelta(minutes=5), THRESHOLDS.idle_window
    marked = {"team": "a", MARK_TAG_KEY: "2026-11-20T12:00:00+00:00"}
    assert read_schedule.tags_digest(marked) == read_schedule.tags_digest({"team": "a"})
    assert read_schedule.tags_digest({"team": "b"}) != read_schedule.tags_digest({"team": "a"})
    # Working again: the pending stop is cancelled, and the entry waits for the next idle bound.
    instance = Ec2Instance(
        id="i-0a",
        type="g5.xlarge",
        state="running",
        account="1",
        region="us-east-1",
        launch_time=T0,
        tags=marked,
    )
    again = Finding(
        reason=Reason.GPU_ACTIVE_AGAIN,
        resource=instance_resource(instance),
        summary="working again",
        observed_at=T0,
        cancels_mark=True,
    )
    bound = T0 + window
    entry = read_schedule.next_entry(
        None, [again], now=T0, earliest=bound, window=window, tags=marked, launched=T0
    )
    assert (entry.kind, entry.due) == (read_schedule.Kind.BOUND, bound)
    # Unmarked, as the decision left it: not read before its bound, whose read the mark's removal does not force.
    unmarked = {"team": "a"}
    assert not read_schedule.is_due(entry, T0 + step, tags=unmarked, launched=T0)
    assert read_schedule.is_due(entry, bound, tags=unmarked, launched=T0)
    # Still marked (the unmark failed, or a budget breach marked it): read at every sweep.
    assert read_schedule.is_due(entry, T0 + step, tags=marked, launched=T0)


def _decisions(result: Result, *, notices: bool = True) -> list[list[tuple[object, ...]]]:
    return [
        [(e.at, e.action, e.reason, e.note, e.saved_usd) for e in o.events if notices or e.action != "notify"]
        for o in result.outcomes
    ]


def test_the_backtest_world_gives_the_same_decisions_at_the_same_times_with_the_schedule() -> None:
    world = load_world(ROOT / "worlds" / "backtest.yaml")
    start, step = world_period(world, None, None)
    history = world_history(world, start, step, PriceBook())
    every, scheduled = (
        backtest(history, Params(read_schedule=False)),
        backtest(history, Params(read_schedule=True)),
    )
    assert _decisions(scheduled) == _decisions(every)
    assert (scheduled.stops, scheduled.reclaimable_usd, scheduled.near_misses) == (
        every.stops,
        every.reclaimable_usd,
        every.near_misses,
    )
    assert scheduled.notices == every.notices
    read_every = sum(o.reads for o in every.outcomes)
    read_scheduled = sum(o.reads for o in scheduled.outcomes)
    assert read_scheduled < read_every / 4  # the point of it


def test_a_generated_fleet_gets_the_same_marks_unmarks_and_stops_with_the_schedule() -> None:
    history = generate(5, instances=20, days=2, history_days=0).history
    every, scheduled = (
        backtest(history, Params(read_schedule=False)),
        backtest(history, Params(read_schedule=True)),
    )
    assert _decisions(scheduled, notices=False) == _decisions(every, notices=False)
    assert scheduled.stops == every.stops > 0
    assert sum(o.reads for o in scheduled.outcomes) < sum(o.reads for o in every.outcomes) / 2
