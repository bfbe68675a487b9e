"""The GPU verdicts' stated thresholds (detect/gpu.py), each pinned at its value, just under and just over it.

The sentences pinned:

- README.md (the demo message): "... is InService with every GPU under 5% for 30 minutes"; docs/reasons.md,
  ``gpu_idle``: "the busiest GPU ... stayed under `IdleThresholdPercent` (5%)". Idle is *strictly* under.
- docs/detectors.md, "Four verdicts": "idle (every GPU under the threshold for the whole window, at least 80% of
  the window's minutes reported ...)".
- docs/detectors.md: "starved (over the longer window, every GPU working, at or above the idle threshold, in at
  least 75% of its reported minutes, and the mean of its per-minute maxima over those working minutes under the
  starvation threshold; at least 80% of the window reported)"; docs/reasons.md, ``gpu_starved``: "its mean over
  those working minutes is under `StarvedThresholdPercent` (70%)".

Every case goes through ``read_gpus``, the detector's pure reading, with the default ``Thresholds()`` (the
settings' defaults: idle 5%, 30 minutes; starved 70%, 120 minutes).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard.detect.gpu import MIN_COVERAGE, STARVED_MIN_WORKING_SHARE, Thresholds, Verdict, read_gpus
from costguard.settings import Settings

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
T = Thresholds()  # idle 5%, starved 70%: the defaults the README states
IDLE_MINUTES = int(T.idle_window / T.period)  # 30
STARVED_MINUTES = int(T.starved_window / T.period)  # 120

Series = list[tuple[datetime, float]]


def fleet(n: int, value: float, minutes: int = 180) -> dict[int, Series]:
    """``n`` GPUs at ``value`` every minute for ``minutes`` (as tests/unit/test_gpu_verdicts.py builds them)."""
    return {i: [(NOW - timedelta(minutes=minutes - m), value) for m in range(minutes)] for i in range(n)}


def ending_now(values: list[float]) -> Series:
    """One datapoint a minute, oldest first, the last at ``NOW``: 30 values fill the idle window, 120 the starved
    one (each window is ``(now - window, now]``)."""
    return [(NOW - timedelta(minutes=len(values) - 1 - i), v) for i, v in enumerate(values)]


def test_the_defaults_are_the_documented_ones() -> None:
    """docs/configuration.md: IdleThresholdPercent 5, StarvedThresholdPercent 70; the edges below use them."""
    settings = Settings.model_fields
    assert (T.idle_percent, T.starved_percent) == (5.0, 70.0)
    assert settings["idle_threshold_percent"].default == T.idle_percent
    assert settings["starved_threshold_percent"].default == T.starved_percent
    assert (MIN_COVERAGE, STARVED_MIN_WORKING_SHARE) == (0.8, 0.75)


# --- idle: every GPU strictly under the idle threshold ----------------------------------------------------------


@pytest.mark.parametrize(
    ("percent", "verdict"),
    [
        (T.idle_percent - 0.01, Verdict.IDLE),  # 4.99: under, idle
        (T.idle_percent, Verdict.STARVED),  # 5.0: at it, working (under-fed), not idle
        (T.idle_percent + 0.01, Verdict.STARVED),  # 5.01: over, working
    ],
)
def test_idle_is_strictly_under_the_idle_threshold(percent: float, verdict: Verdict) -> None:
    """README: "every GPU under 5%"; docs/reasons.md gpu_idle: "stayed under `IdleThresholdPercent` (5%)"."""
    reading = read_gpus(fleet(4, percent), NOW, T, 4)
    assert reading.verdict is verdict
    assert reading.busiest_gpu_percent == percent


@pytest.mark.parametrize(
    ("busiest", "idle"),
    [(T.idle_percent - 0.01, True), (T.idle_percent, False), (T.idle_percent + 0.01, False)],
)
def test_one_gpu_at_the_idle_threshold_keeps_the_instance_from_idle(busiest: float, idle: bool) -> None:
    """docs/detectors.md: idle is "every GPU under the threshold": one GPU peaking at exactly 5% beside quiet
    ones is not under it."""
    gpus = fleet(4, 0.0)
    gpus[2] = ending_now(
        [0.0] * 20 + [busiest] + [0.0] * 9
    )  # one minute at ``busiest`` inside the idle window
    reading = read_gpus(gpus, NOW, T, 4)
    assert (reading.verdict is Verdict.IDLE) is idle, reading
    assert (reading.busiest_gpu_index, reading.busiest_gpu_percent) == (2, busiest)


@pytest.mark.parametrize(
    ("reported", "verdict"),
    [
        (int(IDLE_MINUTES * MIN_COVERAGE), Verdict.IDLE),  # 24 of 30 minutes: exactly 80%
        (int(IDLE_MINUTES * MIN_COVERAGE) - 1, Verdict.TOO_EARLY),  # 23 of 30: under 80%
        (int(IDLE_MINUTES * MIN_COVERAGE) + 1, Verdict.IDLE),  # 25 of 30
    ],
)
def test_idle_needs_at_least_80_percent_of_the_window_reported(reported: int, verdict: Verdict) -> None:
    """docs/detectors.md: idle needs "at least 80% of the window's minutes reported"."""
    reading = read_gpus({i: ending_now([1.0] * reported) for i in range(2)}, NOW, T, 2)
    assert reading.coverage == pytest.approx(reported / IDLE_MINUTES)
    assert reading.verdict is verdict


# --- working: a GPU at or above the idle threshold ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("low", "share", "verdict"),
    [
        (T.idle_percent - 0.01, 0.6667, Verdict.BUSY),  # 4.99 is not working: 80 of 120 minutes, under 75%
        (T.idle_percent, 1.0, Verdict.STARVED),  # 5.0 is working: every minute
        (T.idle_percent + 0.01, 1.0, Verdict.STARVED),
    ],
)
def test_a_gpu_at_exactly_the_idle_threshold_counts_as_working(
    low: float, share: float, verdict: Verdict
) -> None:
    """docs/detectors.md: starved is "every GPU working, at or above the idle threshold, in at least 75% of its
    reported minutes". Each GPU spends its first 40 of 120 minutes at ``low`` and the last 80 at 40%: counted as
    working, the minutes at exactly 5% make the share 1 (starved); not counted, 80/120 < 75% (busy)."""
    gpus = {i: ending_now([low] * 40 + [40.0] * 80) for i in range(4)}
    reading = read_gpus(gpus, NOW, T, 4)
    assert reading.working_share == share
    assert reading.verdict is verdict


def test_a_fleet_at_exactly_the_idle_threshold_works_all_window() -> None:
    """At exactly 5% each GPU works every minute (share 1.0), under-fed; just under, nothing works and it is idle."""
    reading = read_gpus(fleet(4, T.idle_percent), NOW, T, 4)
    assert (reading.working_share, reading.working_mean_percent) == (1.0, T.idle_percent)
    assert read_gpus(fleet(4, T.idle_percent - 0.01), NOW, T, 4).verdict is Verdict.IDLE


@pytest.mark.parametrize(
    ("idle_minutes", "verdict"),
    [
        (30, Verdict.STARVED),  # working 90 of 120 minutes: exactly 75%
        (31, Verdict.BUSY),  # 89 of 120: under 75%
        (29, Verdict.STARVED),  # 91 of 120
    ],
)
def test_starved_needs_every_gpu_working_in_at_least_75_percent_of_its_minutes(
    idle_minutes: int, verdict: Verdict
) -> None:
    """docs/detectors.md: "every GPU working ... in at least 75% of its reported minutes" (the quarter a GPU may
    be idle is 30 of 120 minutes). The idle minutes come first, so the idle window sees only work."""
    gpus = {i: ending_now([0.0] * idle_minutes + [40.0] * (STARVED_MINUTES - idle_minutes)) for i in range(4)}
    reading = read_gpus(gpus, NOW, T, 4)
    assert reading.working_share == round((STARVED_MINUTES - idle_minutes) / STARVED_MINUTES, 4)
    assert reading.verdict is verdict


# --- starved: a working mean strictly under the starvation threshold ----------------------------------------------


@pytest.mark.parametrize(
    ("percent", "verdict"),
    [
        (T.starved_percent - 0.01, Verdict.STARVED),  # 69.99: under, starved
        (T.starved_percent, Verdict.BUSY),  # 70.0: at it, fed well enough
        (T.starved_percent + 0.01, Verdict.BUSY),  # 70.01
    ],
)
def test_starved_is_a_working_mean_strictly_under_the_starved_threshold(
    percent: float, verdict: Verdict
) -> None:
    """docs/reasons.md gpu_starved: "its mean over those working minutes is under `StarvedThresholdPercent`
    (70%)"; docs/detectors.md: "the mean ... over those working minutes under the starvation threshold"."""
    reading = read_gpus(fleet(4, percent), NOW, T, 4)
    assert reading.working_mean_percent == percent
    assert reading.verdict is verdict


@pytest.mark.parametrize(
    ("busiest_gpu", "verdict"),
    [(T.starved_percent - 0.01, Verdict.STARVED), (T.starved_percent, Verdict.BUSY)],
)
def test_every_gpu_must_be_under_the_starved_threshold(busiest_gpu: float, verdict: Verdict) -> None:
    """ "every GPU working ... and the mean of its per-minute maxima ... under the starvation threshold": three
    GPUs at 40% and one whose working mean is exactly 70% is not starved; at 69.99% it is."""
    gpus = fleet(4, 40.0)
    gpus[3] = fleet(1, busiest_gpu)[0]
    assert read_gpus(gpus, NOW, T, 4).verdict is verdict


@pytest.mark.parametrize(
    ("reported", "verdict"),
    [
        (int(STARVED_MINUTES * MIN_COVERAGE), Verdict.STARVED),  # 96 of 120 minutes: exactly 80%
        (int(STARVED_MINUTES * MIN_COVERAGE) - 1, Verdict.BUSY),  # 95 of 120: under 80%
        (int(STARVED_MINUTES * MIN_COVERAGE) + 1, Verdict.STARVED),  # 97 of 120
    ],
)
def test_starved_needs_at_least_80_percent_of_its_window_reported(reported: int, verdict: Verdict) -> None:
    """docs/detectors.md: starved needs "at least 80% of the window reported"."""
    reading = read_gpus({i: ending_now([40.0] * reported) for i in range(2)}, NOW, T, 2)
    assert reading.verdict is verdict
    if verdict is Verdict.STARVED:
        assert reading.coverage == pytest.approx(reported / STARVED_MINUTES)


def test_the_thresholds_are_read_from_the_settings_at_their_edges() -> None:
    """The same edges hold for thresholds set otherwise (IdleThresholdPercent 10, StarvedThresholdPercent 50)."""
    custom = Thresholds(idle_percent=10.0, starved_percent=50.0)
    assert read_gpus(fleet(2, 9.99), NOW, custom, 2).verdict is Verdict.IDLE
    assert read_gpus(fleet(2, 10.0), NOW, custom, 2).verdict is Verdict.STARVED
    assert read_gpus(fleet(2, 10.01), NOW, custom, 2).verdict is Verdict.STARVED
    assert read_gpus(fleet(2, 49.99), NOW, custom, 2).verdict is Verdict.STARVED
    assert read_gpus(fleet(2, 50.0), NOW, custom, 2).verdict is Verdict.BUSY
    assert read_gpus(fleet(2, 50.01), NOW, custom, 2).verdict is Verdict.BUSY
