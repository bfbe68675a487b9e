"""The adaptive idle policy: no history is the fixed window, a compact state, explanations, the floor."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from costguard.backtest.generate import generate
from costguard.backtest.history import History
from costguard.backtest.walk import Params, backtest
from costguard.detect.adaptive import (
    NO_HISTORY,
    Action,
    AdaptiveParams,
    Ended,
    IdleHistory,
    Shape,
    Status,
    _better_stop,
    adapt,
    advise,
    bin_of,
)
from costguard.model import MARK_TAG_KEY, Finding, Reason, Resource, ResourceKind

P = AdaptiveParams()
STEP = timedelta(minutes=5)
START = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday


def feed(history: IdleHistory, at: datetime, status: Status, minutes: int, cpu: float) -> datetime:
    for _ in range(minutes // 5):
        at += STEP
        history.observe(at, status, cpu, P)
    return at


def trainer(days: int = 14) -> tuple[IdleHistory, datetime]:
    """Nine-hour jobs (CPU busy), each followed by a six-hour idle period (GPU and CPU down)."""
    history, at = IdleHistory(), START
    while at < START + timedelta(days=days):
        at = feed(history, at, Status.BUSY, 9 * 60, 80)
        at = feed(history, at, Status.IDLE, 6 * 60, 2)
    return history, at


def finding(tags: dict[str, str] | None = None) -> Finding:
    resource = Resource(
        kind=ResourceKind.EC2_INSTANCE,
        id="i-0123456789abcdef0",
        account="123456789012",
        region="us-east-1",
        tags=tags or {},
    )
    return Finding(
        reason=Reason.GPU_IDLE,
        resource=resource,
        summary="idle",
        observed_at=START,
        remediable=True,
        hourly_usd=1.0,
    )


def test_no_history_is_the_fixed_policy() -> None:
    empty = IdleHistory()
    for minutes in (0, 30, 45, 90, 600):
        assert advise(empty, START + timedelta(minutes=minutes), 30.0, P) == NO_HISTORY
    # Idle now, but nothing learned yet: still the fixed window.
    at = feed(empty, START, Status.IDLE, 60, 1)
    assert advise(empty, at, 30.0, P).action is Action.FIXED
    marked = finding({MARK_TAG_KEY: START.isoformat()})
    assert adapt(marked, NO_HISTORY, START + timedelta(minutes=20), P) is marked


def test_an_instance_with_no_history_and_no_peers_gets_exactly_the_fixed_decisions() -> None:
    world = generate(5, instances=7, days=1, history_days=0).history
    compared = 0
    for subject in world.subjects:  # each alone in its world: no peers to borrow from
        alone = History(world.start, world.end, world.step, [subject], source=world.source)
        alone.labelled = True
        # Both read every instance at every step (the adaptive policy always does): the read schedule's own
        # equivalence is tests/unit/test_read_schedule.py's.
        [fixed] = backtest(alone, Params(read_schedule=False)).outcomes
        [adaptive] = backtest(alone, replace(Params(), idle_policy="adaptive")).outcomes
        assert [(e.at, e.action) for e in fixed.events] == [(e.at, e.action) for e in adaptive.events]
        compared += any(e.action == "stop" for e in fixed.events)
    assert compared >= 3  # the fixed window stops some of them: the comparison says something


def test_the_state_stays_a_few_kb_and_round_trips() -> None:
    rng = random.Random(3)
    history, at = IdleHistory(), START
    for _ in range(3000):  # years of odd idle periods at every hour, of every length and shape
        at = feed(history, at, Status.BUSY, rng.randrange(1, 100) * 5, rng.uniform(0, 90))
        at = feed(history, at, Status.IDLE, rng.randrange(4, 300) * 5, rng.choice([2, 60]))
    text = history.to_text()
    assert len(text.encode()) < 3 * 1024
    again = IdleHistory.from_text(text)
    assert again.to_text() == text
    assert IdleHistory.from_text("v9|garbage").samples == 0


def test_stops_early_after_a_long_job_and_says_why() -> None:
    history, at = trainer()
    at = feed(history, at, Status.BUSY, 9 * 60, 80)
    at = feed(history, at, Status.IDLE, 35, 2)
    advice = advise(history, at, 1.2, P)
    assert advice.action is Action.STOP
    assert advice.why.startswith(
        "idle 35 min after a 9 h job ended; on this instance such idle periods lasted 6 h (median) in the last "
        "14 days"
    )
    # In its grace period: the grace period ends now, so the unchanged policy stops it now; the mark stays as
    # costguard wrote it (its record must still match it: act/marks.py).
    mark = (at - timedelta(minutes=5)).isoformat()
    adapted = adapt(finding({MARK_TAG_KEY: mark}), advice, at, P)
    assert adapted.resource.tags[MARK_TAG_KEY] == mark
    assert adapted.resource.grace_ends == at
    assert advice.why in adapted.summary


def test_never_before_the_floor() -> None:
    history, at = trainer()
    at = feed(history, at, Status.BUSY, 9 * 60, 80)
    floor = replace(P, floor=timedelta(minutes=50))
    for _ in range(9):  # 5 .. 45 minutes idle
        at = feed(history, at, Status.IDLE, 5, 2)
        assert advise(history, at, 1.2, floor).action is not Action.STOP
    at = feed(history, at, Status.IDLE, 5, 2)
    assert advise(history, at, 1.2, floor).action is Action.STOP


def test_waits_for_the_lunch_it_knows() -> None:
    history, at = IdleHistory(), START
    for day in range(14):
        noon = START + timedelta(days=day, hours=12)
        at = feed(history, at, Status.IDLE, int((noon - timedelta(hours=3) - at).total_seconds() // 60), 1)
        at = feed(history, at, Status.BUSY, 180, 30)
        at = feed(history, at, Status.IDLE, 60 + 5 * (day % 3), 2)  # lunch: 60 to 70 minutes
        at = feed(history, at, Status.BUSY, 120, 30)
    at = START + timedelta(days=14, hours=9)
    at = feed(history, at, Status.BUSY, 180, 30)
    at = feed(history, at, Status.IDLE, 45, 2)
    advice = advise(history, at, 1.0, P)
    assert advice.action is Action.WAIT
    # The lunches ended within 70 minutes: a stop once they all have is expected to cost less than one now.
    assert "a stop at 75 min idle is expected to cost less than one now" in advice.why
    due = finding({MARK_TAG_KEY: (at - timedelta(minutes=15)).isoformat()})
    held = adapt(due, advice, at, P)
    assert not held.remediable and held.report_note == f"not stopped yet: {advice.why}"


def test_a_small_generated_world_through_both_policies() -> None:
    history = generate(11, instances=8, days=2, history_days=3).history
    assert history.labelled and len(history.subjects) == 8
    fixed = backtest(history, Params())
    adaptive = backtest(history, replace(Params(), idle_policy="adaptive"))
    for result in (fixed, adaptive):
        labelled = result.labelled
        assert labelled is not None and labelled.reclaimable_usd > 0
        assert 0 < labelled.reclaimed_usd <= labelled.reclaimable_usd
    assert adaptive.labelled is not None and adaptive.labelled.work_stops == 0
    assert adaptive.near_misses <= fixed.near_misses


def test_an_evaluation_pass_with_the_cpu_busy_is_held_and_judged_once_the_cpu_drops() -> None:
    """A history of passes (GPUs at rest, CPU busy) that its own stops cut short would say stop early: the CPU
    still busy now is work, held past the fixed window up to max_hold; once the CPU drops, it is judged."""
    history, at = IdleHistory(), START
    for _ in range(14):
        at = feed(history, at, Status.BUSY, 180, 80)
        at = feed(history, at, Status.IDLE, 50, 70)  # a pass ended by a stop...
        at += timedelta(hours=2)  # ...not started again soon: learned as a pause that never resumed
    at = feed(history, at, Status.BUSY, 180, 80)
    at = feed(history, at, Status.IDLE, 35, 70)
    assert advise(history, at, 5.0, P).action is not Action.STOP  # before the fixed window: never early
    at = feed(history, at, Status.IDLE, 25, 70)  # 60 minutes, past the fixed window, CPU still busy
    held = advise(history, at, 5.0, P)
    assert held.action is Action.WAIT and "CPU is still busy" in held.why
    busy = replace(history, counts=dict(history.counts))
    at = feed(history, at, Status.IDLE, 5, 2)  # the pass is over: the CPU dropped
    assert "CPU is still busy" not in advise(history, at, 5.0, P).why
    # Still busy at the end of max_hold past the fixed window: not held any longer.
    later = feed(busy, at - STEP, Status.IDLE, P.max_hold // timedelta(minutes=1), 70)
    assert "CPU is still busy" not in advise(busy, later, 5.0, P).why


def test_a_pass_that_ends_the_job_is_judged_as_the_idle_after_the_job_once_the_cpu_drops() -> None:
    history, at = trainer()  # nine-hour jobs, each followed by six idle hours
    at = feed(history, at, Status.BUSY, 9 * 60, 80)
    at = feed(history, at, Status.IDLE, 35, 70)  # the job's last evaluation pass: settled as a pass
    assert advise(history, at, 1.2, P).action is not Action.STOP  # a pass is never stopped early
    at = feed(history, at, Status.IDLE, 5, 2)  # the pass is over, and so is the job
    advice = advise(history, at, 1.2, P)
    assert advice.action is Action.STOP
    assert "after a 9 h job ended" in advice.why


def test_an_evaluation_pass_that_work_resumed_after_does_not_end_the_job() -> None:
    """Two 5-hour stretches with a 30-minute evaluation pass between (GPUs rest, CPU busy): one 10-hour job."""
    history, at = IdleHistory(), START
    at = feed(history, at, Status.BUSY, 5 * 60, 80)
    at = feed(history, at, Status.IDLE, 30, 70)  # the pass: learned as a pause of its shape
    at = feed(history, at, Status.BUSY, 5 * 60, 80)
    at = feed(history, at, Status.IDLE, 10, 2)
    assert history.samples == 1
    assert history.busy_minutes >= 10 * 60
    assert history.shape(P) is Shape.AFTER_JOB
    # A plain pause (CPU down too) that work resumed after does end it: the next run counts from there.
    history, at = IdleHistory(), START
    at = feed(history, at, Status.BUSY, 5 * 60, 80)
    at = feed(history, at, Status.IDLE, 30, 2)
    at = feed(history, at, Status.BUSY, 60, 80)
    at = feed(history, at, Status.IDLE, 10, 2)
    assert history.busy_minutes <= 70


def test_a_later_stop_is_chosen_only_when_it_is_expected_to_cost_less() -> None:
    # Idle periods like this one resumed at 55 to 65 minutes: at 45, waiting until they are over costs a few
    # minutes of a $1 instance against a likely interruption; at $500 an hour the wait costs more.
    lunches = [(bin_of(m), int(Ended.RESUMED), 3) for m in (55, 60, 65)]
    assert 65 <= (_better_stop(lunches, 45, 60, 1.0, P) or 0) <= 75  # once the last has resumed
    assert _better_stop(lunches, 45, 60, 500.0, P) is None
    # Periods that went on for hours and were stopped by their owner: no later stop risks less.
    rests = [(bin_of(m), int(Ended.STOPPED), 3) for m in (240, 300)]
    assert _better_stop(rests, 45, 60, 1.0, P) is None
    # Resuming beyond the lookahead (30 minutes): no stop within it avoids the interruption, so none is chosen.
    late = [(bin_of(m), int(Ended.RESUMED), 3) for m in (100, 105)]
    assert _better_stop(late, 45, 60, 1.0, P) is None
    assert _better_stop(lunches, 45, 60, None, P) is None  # without a price, never later
