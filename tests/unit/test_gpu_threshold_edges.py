"""The thresholds the README states, pinned at, just under and just over their values (detect/gpu.py): idle is
every GPU *under* IdleThresholdPercent ("under 5%"); a GPU at or above it is working; starved is every GPU working,
its working mean *under* StarvedThresholdPercent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard.detect.gpu import Thresholds, Verdict, read_gpus

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
T = Thresholds()  # idle 5%, starved 70%: the defaults the README states


def fleet(n: int, value: float, minutes: int = 180) -> dict[int, list[tuple[datetime, float]]]:
    return {i: [(NOW - timedelta(minutes=minutes - m), value) for m in range(minutes)] for i in range(n)}


@pytest.mark.parametrize(
    ("percent", "verdict"),
    [
        (T.idle_percent - 0.01, Verdict.IDLE),  # just under: idle
        (T.idle_percent, Verdict.STARVED),  # at it: working (under-fed), not idle
        (T.idle_percent + 0.01, Verdict.STARVED),  # just over: working
    ],
)
def test_idle_is_strictly_under_the_idle_threshold(percent: float, verdict: Verdict) -> None:
    reading = read_gpus(fleet(4, percent), NOW, T, 4)
    assert reading.verdict is verdict
    assert reading.busiest_gpu_percent == percent


def test_a_gpu_at_exactly_the_idle_threshold_counts_as_working() -> None:
    """The starved verdict counts a GPU's periods at or above the idle threshold as working: at exactly 5% each
    GPU works all window (share 1.0), at 70% under-fed."""
    reading = read_gpus(fleet(4, T.idle_percent), NOW, T, 4)
    assert reading.working_share == 1.0
    assert reading.working_mean_percent == T.idle_percent
    just_under = read_gpus(fleet(4, T.idle_percent - 0.01), NOW, T, 4)
    assert just_under.verdict is Verdict.IDLE  # under it, nothing is working


@pytest.mark.parametrize(
    ("percent", "verdict"),
    [
        (T.starved_percent - 0.01, Verdict.STARVED),  # just under: starved
        (T.starved_percent, Verdict.BUSY),  # at it: fed well enough
        (T.starved_percent + 0.01, Verdict.BUSY),
    ],
)
def test_starved_is_a_working_mean_strictly_under_the_starved_threshold(
    percent: float, verdict: Verdict
) -> None:
    assert read_gpus(fleet(4, percent), NOW, T, 4).verdict is verdict


def test_the_thresholds_are_read_from_the_settings_at_their_edges() -> None:
    custom = Thresholds(idle_percent=10.0, starved_percent=50.0)
    assert read_gpus(fleet(2, 9.99), NOW, custom, 2).verdict is Verdict.IDLE
    assert read_gpus(fleet(2, 10.0), NOW, custom, 2).verdict is Verdict.STARVED
    assert read_gpus(fleet(2, 49.99), NOW, custom, 2).verdict is Verdict.STARVED
    assert read_gpus(fleet(2, 50.0), NOW, custom, 2).verdict is Verdict.BUSY
