"""Datapoints added to a training metric's series, seen in its sample counts (detect/training_cadence.py), pure."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from costguard.detect.training_cadence import added_datapoints

STARTED = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
NOW = STARTED + timedelta(hours=3)
MINUTE = timedelta(minutes=1)


def every(minutes: float, *, until: datetime = NOW) -> list[datetime]:
    """A sample every ``minutes`` from the run's start (the first one step in) to before ``until``."""
    step, at, out = timedelta(minutes=minutes), STARTED + timedelta(minutes=minutes), []
    while at < until:
        out.append(at)
        at += step
    return out


def counts(samples: list[datetime], period: timedelta = MINUTE) -> list[tuple[datetime, float]]:
    """Each period's SampleCount as GetMetricData returns it: periods from the start, empty ones absent."""
    slots = Counter((at - STARTED) // period for at in samples)
    return [(STARTED + n * period, float(c)) for n, c in sorted(slots.items())]


def test_a_job_writing_at_its_own_cadence_shows_nothing_added() -> None:
    assert added_datapoints(counts(every(5)), MINUTE) is None
    assert added_datapoints(counts(every(10)), MINUTE) is None
    # Every 5 minutes read at 2-minute periods: the writes fall 2 and 3 periods apart.
    assert added_datapoints(counts(every(5), 2 * MINUTE), 2 * MINUTE) is None
    # Several samples a period, read at 15-minute periods on a long run: 3 a period.
    assert added_datapoints(counts(every(5), 15 * MINUTE), 15 * MINUTE) is None


def test_a_job_whose_hosts_write_each_step_across_a_period_boundary_shows_nothing_added() -> None:
    """Two hosts write each step a few seconds apart: now and then the pair straddles a minute."""
    samples = [
        at + offset for n, at in enumerate(every(5)) for offset in (timedelta(0), timedelta(seconds=5))
    ]
    samples = [at - timedelta(seconds=2) if n % 4 == 0 else at for n, at in enumerate(samples)]
    assert any(at.minute % 5 == 4 for at in samples)  # some pairs do straddle
    assert added_datapoints(counts(samples), MINUTE) is None


def test_a_fast_logging_job_may_write_one_more_than_typical_in_a_period() -> None:
    """Every 11 seconds: 5 or 6 samples a minute, as the writes fall against the minute boundaries."""
    samples = [STARTED + timedelta(seconds=11 * n) for n in range(1, 900)]
    assert {c for _, c in counts(samples)} == {5.0, 6.0}
    assert added_datapoints(counts(samples), MINUTE) is None
    two_more = samples + [STARTED + timedelta(minutes=90, seconds=s) for s in (30, 31)]
    found = added_datapoints(counts(two_more), MINUTE)
    assert found is not None and found.at == STARTED + timedelta(minutes=90)


def test_a_sample_added_in_a_period_the_job_writes_is_seen() -> None:
    """The injection that made a healthy run "plateau": one 0.0 at 09:30, where the job writes too."""
    found = added_datapoints(counts([*every(5), STARTED + timedelta(minutes=30)]), MINUTE)
    assert found is not None and found.at == datetime(2026, 11, 20, 9, 30, tzinfo=UTC)
    assert found.why == "2 samples in the 1-minute period from 2026-11-20 09:30 UTC, where the job writes 1"


def test_thirteen_samples_added_over_the_last_hour_are_seen() -> None:
    """The injection that made a healthy run "rise": 13 points, 11:00 to 12:00, on the job's own minutes."""
    added = [NOW - timedelta(minutes=60) + n * timedelta(minutes=5) for n in range(13)]
    found = added_datapoints(counts(every(5) + added), MINUTE)
    assert found is not None and found.at == datetime(2026, 11, 20, 11, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("offset", "seen_at"),
    [
        (timedelta(minutes=2), "09:32"),  # between two writes of the job: too soon after 09:30's
        (timedelta(minutes=-2, seconds=-30), "09:27"),  # too soon after 09:25's
        (
            timedelta(minutes=1),
            "09:30",
        ),  # the minute after one: the two minutes hold 2 samples where it writes 1
        (timedelta(seconds=-30), "09:29"),  # the minute before one: the same
    ],
)
def test_a_sample_added_where_the_job_writes_none_is_seen(offset: timedelta, seen_at: str) -> None:
    found = added_datapoints(counts([*every(5), STARTED + timedelta(minutes=30) + offset]), MINUTE)
    assert found is not None and f"{found.at:%H:%M}" == seen_at


def test_a_sample_every_minute_over_the_last_hour_does_not_pass_for_the_jobs_cadence() -> None:
    """Packed into the last hour, 48 added samples outnumber the job's own gaps; weighted by time, the job's
    five minutes still cover most of the run."""
    added = [NOW - timedelta(minutes=60) + n * MINUTE + timedelta(seconds=30) for n in range(60)]
    assert added_datapoints(counts(every(5) + added), MINUTE) is not None


def test_too_few_periods_say_nothing() -> None:
    assert added_datapoints([], MINUTE) is None
    assert added_datapoints([(STARTED, 3.0)], MINUTE) is None
