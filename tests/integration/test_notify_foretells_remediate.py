"""Notify mode tells what remediate mode would do: on the demo world, every time notify mode says a resource would be
stopped at is a time remediate mode stops it at, and the other way round; and notify mode says it would stop a
resource at each run where remediate mode stops it."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from costguard.local.demo import DemoRun, run_demo
from costguard.local.world import load_world
from tests.conftest import DEMO_WORLD

FORGOTTEN_P4D, FORGOTTEN_G6E = "i-0a1f00000000000a1", "i-0a1f00000000000d1"


def stop_times(run: DemoRun) -> dict[str, set[str]]:
    """Each resource's stop times, as its decisions give them: when a mark's stop falls due (told when marked),
    or when the stop made (or, dry, that would be made) fell due."""
    times: dict[str, set[str]] = defaultdict(set)
    for result in run.results:
        for decision in result.decisions:
            if decision["stop_after"] is not None:
                times[decision["resource_id"]].add(decision["stop_after"])
    return dict(times)


def stops(run: DemoRun) -> set[tuple[str, str]]:
    """(event, resource) of each stop decided, made or (dry) not."""
    return {
        (Path(result.event).name, decision["resource_id"])
        for result in run.results
        for decision in result.decisions
        if decision["action"] == "stop"
    }


@pytest.fixture(scope="module")
def runs() -> dict[str, DemoRun]:
    found = {mode: run_demo(load_world(DEMO_WORLD), mode) for mode in ("notify", "remediate")}
    for mode, run in found.items():
        assert all(r.ok for r in run.results), (mode, [r.error for r in run.results if not r.ok])
    return found


def test_every_would_be_stop_time_of_notify_mode_is_a_stop_time_of_remediate_mode(
    runs: dict[str, DemoRun],
) -> None:
    notify, remediate = stop_times(runs["notify"]), stop_times(runs["remediate"])
    assert notify == remediate
    # Each resource has one: a mark's stop time does not move from one run to the next.
    assert all(len(times) == 1 for times in notify.values()), notify
    assert {FORGOTTEN_P4D, FORGOTTEN_G6E} <= notify.keys()
    assert all(d["dry_run"] for r in runs["notify"].results for d in r.decisions)


def test_notify_mode_would_stop_at_each_run_where_remediate_mode_stops(runs: dict[str, DemoRun]) -> None:
    made = stops(runs["remediate"])
    assert made  # the demo stops something
    # Notify mode says so at the same run; it may say so again later (the resource is still running there), and
    # then with the same stop time.
    assert made <= stops(runs["notify"])
