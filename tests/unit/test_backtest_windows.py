"""Backtest windows: read forward from step to step, they hold exactly the points a bisection finds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from costguard.backtest.history import GpuTrack, Subject, SubjectKind
from costguard.backtest.walk import Windows
from costguard.model import Ec2Instance

START = datetime(2026, 11, 20, tzinfo=UTC)
STEP = timedelta(minutes=5)
WINDOW = timedelta(minutes=30)


def subject() -> Subject:
    # GPU 1 reports on a grid of its own and misses a stretch; GPU 2 shares GPU 0's times (and its bounds).
    grid = [START + STEP * n for n in range(100)]
    offset = [t + timedelta(minutes=2) for t in grid if not 40 <= (t - START) // STEP < 60]
    tracks = {
        2: GpuTrack([(t, 2.0) for t in grid]),
        0: GpuTrack([(t, 0.0) for t in grid]),
        1: GpuTrack([(t, 1.0) for t in offset]),
    }
    instance = Ec2Instance("i-0a", "g5.12xlarge", "running", "123456789012", "us-east-1", None)
    return Subject(SubjectKind.EC2_INSTANCE, instance, tracks, [(START, START + STEP * 100)], None, 3)


def expected(s: Subject, now: datetime) -> dict[int, list[tuple[datetime, float]]]:
    return {key: track.within(now - WINDOW, now) for key, track in s.tracks.items()}


def test_windows_read_forward_hold_the_points_of_each_window_in_the_tracks_order() -> None:
    s = subject()
    windows = Windows(s)
    assert len(windows.grids) == 2
    # Step by step, then leaps ahead (a stopped resource is judged again later), then past the last point.
    times = [START + STEP * n for n in range(0, 30)] + [START + STEP * n for n in (45, 46, 70, 99, 120)]
    for now in times:
        got = windows.at(now - WINDOW, now)
        assert got == expected(s, now), now
        assert list(got) == [2, 0, 1]


def test_windows_asked_back_in_time_search_again() -> None:
    s = subject()
    windows = Windows(s)
    for now in (START + STEP * 80, START + STEP * 10, START + STEP * 11, START + STEP * 55):
        assert windows.at(now - WINDOW, now) == expected(s, now), now
