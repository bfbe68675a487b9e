"""Backtest: reclaimed dollars by hand, near-misses by window, one code path with the handlers, the reports."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

import pytest

from costguard import pipeline, policy
from costguard.backtest import walk
from costguard.backtest.command import SweepError, parse_sweep, sweep, world_period
from costguard.backtest.report import SCHEMA_VERSION, as_html, as_json
from costguard.backtest.walk import Params, backtest
from costguard.backtest.world_history import world_history
from costguard.detect import gpu as gpu_detect
from costguard.detect import sagemaker as sagemaker_detect
from costguard.flows import gpu as gpu_flow
from costguard.flows import sagemaker as sagemaker_flow
from costguard.local.world import World, load_world
from costguard.pricing import PriceBook, bundled_price

NOW = "2026-11-20T16:00:00Z"
G5 = bundled_price("g5.2xlarge", "us-east-1")
P4D = bundled_price("p4d.24xlarge", "us-east-1")


def world(instances: list[dict[str, Any]]) -> World:
    return World.model_validate({"now": NOW, "instances": instances})


def gpu_metrics(**kwargs: Any) -> dict[str, Any]:
    return {"lookback_minutes": 600, "period_seconds": 300} | kwargs


def run(w: World, **params: Any) -> walk.Result:
    start, step = world_period(w, None, None)
    return backtest(world_history(w, start, step, PriceBook()), Params(**params))


def at(hhmm: str) -> datetime:
    hours, minutes = hhmm.split(":")
    return datetime(2026, 11, 20, int(hours), int(minutes), tzinfo=UTC)


# Busy until 10:00, idle 10:00-14:00, busy again from 14:00 (one GPU, $1.212/h).
IDLE_FOUR_HOURS = {
    "id": "i-0b0000000000000a1",
    "type": "g5.2xlarge",
    "gpu_metrics": gpu_metrics(
        pattern="busy",
        gpus=[
            {
                "index": 0,
                "segments": [
                    {"pattern": "idle", "start": "2026-11-20T10:00:00Z", "end": "2026-11-20T14:00:00Z"}
                ],
            }
        ],
    ),
}
# Eight idle GPUs from 08:05 (the series starts there), stopped by its owner at 11:30 ($21.958/h).
IDLE_UNTIL_OWNER_STOPS = {
    "id": "i-0b0000000000000a2",
    "type": "p4d.24xlarge",
    "launched": "2026-11-20T08:00:00Z",
    "stopped_at": "2026-11-20T11:30:00Z",
    "gpu_metrics": gpu_metrics(pattern="idle", lookback_minutes=480),
}


def test_reclaimed_dollars_equal_the_hand_computation_to_the_cent() -> None:
    assert G5 is not None and P4D is not None
    result = run(world([IDLE_FOUR_HOURS, IDLE_UNTIL_OWNER_STOPS]), grace=timedelta(minutes=15))

    # A datapoint stamped t covers [t, t + 5 min) and is known from t + 5 min: no reading uses one early.
    # g5: the 30-minute window is first known all idle at 10:30 (datapoints 10:00..10:25): marked then, stopped
    # after the 15-minute grace at 10:45, busy again at 14:00: 3 h 15 min saved.
    # p4d: first datapoint 08:05 (it runs from there: before it, it published nothing); at 08:30 five of the
    # window's six periods are known (the detector's 80%), all idle: marked 08:30, stopped 08:45, its owner
    # stops it at 11:30: 2 h 45 min saved.
    g5_saved = G5.usd_per_hour * (3 + 15 / 60)
    p4d_saved = P4D.usd_per_hour * (2 + 45 / 60)
    assert result.reclaimable_usd == round(g5_saved + p4d_saved, 2) == 64.32

    g5, p4d = result.outcomes
    # (After 14:00 the idle hours in the two-hour window are not work: no gpu_starved, in the sweep or here.)
    assert [(e.action, e.at) for e in g5.events][:2] == [("mark", at("10:30")), ("stop", at("10:45"))]
    # The 14:00 datapoint is known at 14:05: the mark is cancelled then.
    assert ("unmark", at("14:05")) in [(e.action, e.at) for e in g5.events]
    stop = g5.events[1]
    assert (stop.stopped_until, stop.ended_by, stop.near_miss) == (at("14:00"), "busy", False)
    assert p4d.events[-1].ended_by == "owner_stopped"
    assert p4d.events[-1].stopped_until == at("11:30")
    # Idle but not reclaimed: the g5's 45 minutes of window and grace before the stop (10:00-10:45).
    assert round(g5.unclaimed_usd, 4) == round(G5.usd_per_hour * 45 / 60, 4)
    assert result.near_misses == 0


# Idle for 40 minutes (10:00-10:40), then busy again.
IDLE_FORTY_MINUTES = {
    "id": "i-0b0000000000000b1",
    "type": "g5.2xlarge",
    "gpu_metrics": gpu_metrics(
        pattern="busy",
        gpus=[
            {
                "index": 0,
                "segments": [
                    {"pattern": "idle", "start": "2026-11-20T10:00:00Z", "end": "2026-11-20T10:40:00Z"}
                ],
            }
        ],
    ),
}


def test_forty_idle_minutes_are_a_near_miss_at_a_30_minute_window_and_not_at_60() -> None:
    w = world([IDLE_FORTY_MINUTES])
    short = run(w, idle_window=timedelta(minutes=30), grace=timedelta(minutes=5))
    long = run(w, idle_window=timedelta(minutes=60), grace=timedelta(minutes=5))

    assert (short.stops, short.near_misses) == (1, 1)
    stop = next(e for e in short.outcomes[0].events if e.action == "stop")
    # Marked at 10:30 (datapoints 10:00..10:25 known), stopped after the 5-minute grace: busy again at 10:40.
    assert (stop.at, stop.stopped_until, stop.ended_by) == (at("10:35"), at("10:40"), "busy")
    assert (long.stops, long.near_misses) == (0, 0)
    # Activity strictly within the horizon is a near-miss: 5 minutes after the stop, with a 5-minute horizon,
    # it is not; with a 6-minute one it is.
    assert run(w, grace=timedelta(minutes=5), near_miss_horizon=timedelta(minutes=5)).near_misses == 0
    assert run(w, grace=timedelta(minutes=5), near_miss_horizon=timedelta(minutes=6)).near_misses == 1


def test_protected_and_auto_scaled_instances_are_never_stopped_and_their_idle_time_stays_unclaimed() -> None:
    protected = IDLE_UNTIL_OWNER_STOPS | {"id": "i-0b0000000000000c1", "tags": {"costguard:protect": "true"}}
    result = run(world([protected]))
    assert result.stops == 0
    assert [e.action for e in result.outcomes[0].events] == ["notify"]  # one event for the whole episode
    assert result.unclaimed_usd == result.idle_usd > 0


def test_the_walk_calls_the_functions_the_lambda_handlers_call() -> None:
    # The handlers' flows import the very same callables...
    assert gpu_flow.read_gpus is gpu_detect.read_gpus
    assert gpu_flow.gpu_instance_findings is gpu_detect.gpu_instance_findings
    assert sagemaker_flow.read_training_job is sagemaker_detect.read_training_job
    assert sagemaker_flow.training_job_findings is sagemaker_detect.training_job_findings
    assert sagemaker_flow.notebook_findings is sagemaker_detect.notebook_findings
    assert pipeline.decide_all is policy.decide_all
    # ...and a backtest of the demo world calls each of them.
    watched = [
        (gpu_detect, "read_gpus"),
        (gpu_detect, "gpu_instance_findings"),
        (sagemaker_detect, "read_training_job"),
        (sagemaker_detect, "training_job_findings"),
        (sagemaker_detect, "notebook_findings"),
        (policy, "decide_all"),
    ]
    spies = {}
    patches = [mock.patch.object(module, name, wraps=getattr(module, name)) for module, name in watched]
    for (_, name), patcher in zip(watched, patches, strict=True):
        spies[name] = patcher.start()
    try:
        w = load_world("worlds/demo.yaml")
        result = run(w)
    finally:
        for patcher in patches:
            patcher.stop()
    assert all(spy.call_count > 0 for spy in spies.values()), {n: s.call_count for n, s in spies.items()}
    assert result.stops >= 1


def test_sweep_tries_every_combination_and_the_json_has_a_stable_schema() -> None:
    combos = parse_sweep(["idle-threshold=3,5", "idle-window=30,60"])
    assert combos == [
        {"idle-threshold": 3.0, "idle-window": 30.0},
        {"idle-threshold": 3.0, "idle-window": 60.0},
        {"idle-threshold": 5.0, "idle-window": 30.0},
        {"idle-threshold": 5.0, "idle-window": 60.0},
    ]
    w = world([IDLE_FORTY_MINUTES])
    start, step = world_period(w, None, None)
    history = world_history(w, start, step, PriceBook())
    params = Params(grace=timedelta(minutes=5))
    rows = sweep(history, params, combos)
    assert [(r.idle_percent, r.idle_window_minutes, r.result.near_misses) for r in rows] == [
        (3.0, 30, 1),
        (3.0, 60, 0),
        (5.0, 30, 1),
        (5.0, 60, 0),
    ]
    document = json.loads(json.dumps(as_json(backtest(history, params), rows)))
    assert document["schema_version"] == SCHEMA_VERSION
    assert set(document) == {
        "schema_version",
        "source",
        "period",
        "settings",
        "totals",
        "resources",
        "sweep",
        "api_calls",
    }
    assert document["totals"]["near_misses"] == 1
    assert document["resources"][0]["decisions"][1]["near_miss"] is True
    assert len(document["sweep"]) == 4


def test_sweep_rejects_unknown_names() -> None:
    with pytest.raises(SweepError):
        parse_sweep(["idle-treshold=2,5"])
    assert parse_sweep([]) == []


def test_html_report_is_self_contained_with_a_timeline_per_resource() -> None:
    w = world([IDLE_FOUR_HOURS, IDLE_FORTY_MINUTES])
    result = run(w, grace=timedelta(minutes=5))
    page = as_html(result, [])
    assert page.count("<svg") == 2
    assert "near-miss" in page
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")


def test_world_runs_are_compact_explicit_points_and_validated() -> None:
    w = world(
        [
            {
                "id": "i-0b0000000000000d1",
                "type": "g5.2xlarge",
                "gpu_metrics": gpu_metrics(
                    pattern="busy",
                    gpus=[
                        {
                            "index": 0,
                            "runs": [
                                {"start": "2026-11-20T15:00:00Z", "step_minutes": 5, "values": [3, None, 80]}
                            ],
                        }
                    ],
                ),
            }
        ]
    )
    start, step = world_period(w, None, None)
    track = world_history(w, start, step, PriceBook()).subjects[0].tracks[0]
    by_time = dict(track.series)
    assert by_time[at("15:00")] == 3 and at("15:05") not in by_time and by_time[at("15:10")] == 80
    with pytest.raises(ValueError, match="less than or equal to 100"):
        world(
            [
                IDLE_FOUR_HOURS
                | {"gpu_metrics": {"gpus": [{"index": 0, "runs": [{"start": NOW, "values": [101]}]}]}}
            ]
        )
    with pytest.raises(ValueError, match="ends"):
        world(
            [
                IDLE_FOUR_HOURS
                | {
                    "gpu_metrics": {
                        "gpus": [
                            {
                                "index": 0,
                                "segments": [
                                    {"pattern": "idle", "start": NOW, "end": "2026-11-20T15:00:00Z"}
                                ],
                            }
                        ]
                    }
                }
            ]
        )


def test_progress_bar_draws_on_a_terminal_only_and_ends_at_100_percent() -> None:
    import io

    from costguard.backtest.progress import ProgressBar, progress_for

    assert progress_for("backtest", quiet=True) is None
    stream = io.StringIO()
    bar = ProgressBar("backtest", stream, width=10)
    bar(1, 4)
    bar(4, 4)
    assert stream.getvalue().endswith("[##########] 100% 4/4 steps\n")
