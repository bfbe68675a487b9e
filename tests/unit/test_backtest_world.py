"""Backtest figures worked out by hand, to the cent: owner stops (a timeline, a gap in the data, between two
datapoints), the shipped week world, no look-ahead, and the world file's timeline checks.

Prices are those of shared/costguard/pricing/prices.json (us-east-1, on-demand, USD per hour), written out here
rather than read, so that the figures below are the hand computation. With the default settings (idle under 5%
for 30 minutes, 15-minute grace) and five-minute datapoints, an idle stretch starting at T on a resource judged
throughout is marked at T + 30 min (its datapoints T .. T + 25 min, each covering five minutes, are all known then;
the one stamped T + 30 min is not) and stopped at T + 45 min.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from costguard.backtest.command import world_period
from costguard.backtest.history import GpuTrack, History, Subject, SubjectKind
from costguard.backtest.report import as_html, as_json, as_text
from costguard.backtest.walk import Params, Result, backtest, reading_at
from costguard.backtest.world_history import world_history
from costguard.detect.gpu import Verdict
from costguard.local import world as world_module
from costguard.local.world import World, WorldFileError, load_world
from costguard.model import Accelerators, Ec2Instance
from costguard.pricing import PriceBook, bundled_price

ROOT = Path(__file__).resolve().parents[2]
OWNER_STOPS = ROOT / "tests" / "fixtures" / "backtest-owner-stops.yaml"
WEEK = ROOT / "worlds" / "backtest.yaml"

# prices.json, by hand
G5_XLARGE = 1.006
G5_2XLARGE = 1.212
G5_4XLARGE = 1.624
G5_12XLARGE = 5.672
G6_12XLARGE = 4.6016
P4D_24XLARGE = 21.958
P5_48XLARGE = 55.04
ML_G5_XLARGE = 1.408

MIN = 1 / 60  # an hour's share of a minute


def run(w: World, **params: Any) -> Result:
    start, step = world_period(w, None, None)
    return backtest(world_history(w, start, step, PriceBook()), Params(**params))


def by_id(result: Result) -> dict[str, Any]:
    return {o.subject.id: o for o in result.outcomes}


def stops(outcome: Any) -> list[tuple[str, str, str | None, bool]]:
    return [
        (f"{e.at:%d %H:%M}", f"{e.stopped_until:%d %H:%M}", e.ended_by, e.near_miss)
        for e in outcome.events
        if e.action == "stop"
    ]


def test_owner_stops_inside_idle_periods_are_never_credited_hand_computed_to_the_cent() -> None:
    """tests/fixtures/backtest-owner-stops.yaml: the period is 08:00-16:00 in five-minute steps.

    owner-timeline, g5.12xlarge at $5.672/h: idle 09:00-12:00 and 13:00-16:00; its timeline has its owner stop it
    at 10:30 and start it again at 12:40.
      marked 09:30, stopped 09:45, until the owner's own stop at 10:30 (not across 10:30-12:40, when it was not
      running and cost nothing): 45 min. At 12:45 (12:40, its restart, is still pending) the 12:40 datapoint is
      busy: the mark is cancelled. Idle again from 13:00: marked 13:30, stopped 13:45, until the end at 16:00: 2 h 15.
      reclaimed 3 h x 5.672 = 17.016; idle 09:00-10:30 + 13:00-16:00 = 4 h 30 x 5.672 = 25.524;
      unclaimed 1 h 30 (09:00-09:45, 13:00-13:45) x 5.672 = 8.508.
    owner-gap-in-data, p4d.24xlarge at $21.958/h: idle 09:10-11:00, nothing published 11:00-13:00 (its owner
    had it stopped: a gap in its data), busy, idle 14:00-14:50, busy.
      marked 09:40, stopped 09:55, until the gap at 11:00: 1 h 05. Idle 14:00: marked 14:30, stopped 14:45, busy
      at 14:50: 5 min, a near-miss (5 min < 60).
      reclaimed 1 h 10 x 21.958 = 25.617667; idle 1 h 50 + 50 min = 2 h 40 x 21.958 = 58.554667;
      unclaimed 45 + 45 min = 1 h 30 x 21.958 = 32.937.
    owner-stop-off-the-grid, g5.xlarge at $1.006/h: idle throughout (and before the period), its owner stopped
    it at 10:02.
      marked at 08:05 (the idle window 07:35-08:05 is known then), stopped 08:20, until 10:02: 1 h 42.
      reclaimed 1.7 h x 1.006 = 1.7102; idle 08:00-10:02 = 2 h 02 x 1.006 = 2.045533;
      unclaimed 20 min x 1.006 = 0.335333.
    Totals: reclaimed 17.016 + 25.617667 + 1.7102 = 44.343867 -> 44.34; unclaimed 8.508 + 32.937 + 0.335333 =
    41.780333 -> 41.78; idle 86.124200 -> 86.12; 5 stops, 1 near-miss.
    """
    result = run(load_world(OWNER_STOPS))
    timeline, gap, off_grid = (
        by_id(result)[i] for i in ("i-0c0000000000000a1", "i-0c0000000000000a2", "i-0c0000000000000a3")
    )

    assert stops(timeline) == [
        ("20 09:45", "20 10:30", "owner_stopped", False),
        ("20 13:45", "20 16:00", "period_end", False),
    ]
    assert stops(gap) == [
        ("20 09:55", "20 11:00", "owner_stopped", False),
        ("20 14:45", "20 14:50", "busy", True),
    ]
    assert stops(off_grid) == [("20 08:20", "20 10:02", "owner_stopped", False)]

    assert round(timeline.saved_usd, 6) == round(3 * G5_12XLARGE, 6) == 17.016
    assert round(timeline.idle_usd, 6) == round(4.5 * G5_12XLARGE, 6) == 25.524
    assert round(timeline.unclaimed_usd, 6) == round(1.5 * G5_12XLARGE, 6) == 8.508
    assert round(gap.saved_usd, 6) == round(70 * MIN * P4D_24XLARGE, 6) == 25.617667
    assert round(gap.idle_usd, 6) == round(160 * MIN * P4D_24XLARGE, 6) == 58.554667
    assert round(gap.unclaimed_usd, 6) == round(90 * MIN * P4D_24XLARGE, 6) == 32.937
    assert round(off_grid.saved_usd, 6) == round(102 * MIN * G5_XLARGE, 6) == 1.7102
    assert round(off_grid.idle_usd, 6) == round(122 * MIN * G5_XLARGE, 6) == 2.045533
    assert round(off_grid.unclaimed_usd, 6) == round(20 * MIN * G5_XLARGE, 6) == 0.335333
    # The hours each ran (and was billed) in the period: 08:00-10:30 + 12:40-16:00, 08:00-11:00 + 13:00-16:00,
    # 08:00-10:02.
    assert [round(o.running_hours, 4) for o in (timeline, gap, off_grid)] == [5.8333, 6.0, 2.0333]

    assert (result.reclaimable_usd, result.unclaimed_usd, result.idle_usd) == (44.34, 41.78, 86.12)
    assert (result.stops, result.near_misses) == (5, 1)
    totals = as_json(result)["totals"]
    assert (totals["reclaimable_usd"], totals["unclaimed_idle_usd"], totals["idle_usd"]) == (
        44.34,
        41.78,
        86.12,
    )


def test_the_shipped_week_world_gives_the_hand_computed_figures_to_the_cent() -> None:
    """worlds/backtest.yaml, Friday 13 November 12:00 to Friday 20 November 12:00, default settings.

    a1 p4d weekend ($21.958): idle Fri 19:00 - Mon 09:00 (62 h); stopped Fri 19:45, busy Mon 09:00: 61 h 15.
    a2 office hours ($5.672): idle Fri 18:00 - Mon 09:00 (63 h) and four nights 18:00-09:00 (4 x 15 h): 123 h;
      stopped at 18:45 each time: 62 h 15 + 4 x 14 h 15 = 119 h 15.
    a3 lunch ($1.212): idle Tue 12:00-12:50; marked 12:30, stopped 12:45, busy 12:50: 5 min, a near-miss.
    a4 protected p5 ($55.04): idle all 168 h, never stopped: all unclaimed.
    a5 forgotten g6 ($4.6016): ran Mon 10:00 - Wed 15:00 (53 h), idle; judged from 10:05, its first five
      datapoints (10:00-10:20) cover the window's 80% at 10:25: marked 10:25, stopped 10:40, its owner's own stop
      at 15:00 Wed ends it: 52 h 20.
    a6 ad hoc g5.xlarge ($1.006): ran from Thu 06:00 (30 h); marked 06:25 (as a5), stopped 06:40, the run of
      points turns busy at 08:00: 1 h 20. The run ends at 09:35 (3%): marked 10:05, stopped 10:20, to the end:
      25 h 40. Idle 06:00-08:00 and 09:35 - Fri 12:00: 28 h 25.
    a7 owner stops g5.4xlarge ($1.624): Mon ran 08:45-20:00, busy 09:00-17:00: stopped 17:45, until its owner's
      stop at 20:00: 2 h 15 (idle 15 min + 3 h). Tue 08:45 - Wed 17:20, busy 09:00-17:00 both days: stopped Tue
      17:45, busy Wed 09:00: 15 h 15 (idle 15 min + 16 h + 20 min). Never credited over Monday night, when its owner
      had it stopped.
    notebook ml.g5.xlarge ($1.408): idle throughout (168 h); marked at the first step 12:05, stopped 12:20, to the
      end: 167 h 40.
    """
    expected = {  # id: (saved hours, idle hours, price, stops, near-misses)
        "i-0b7e00000000000a1": (61.25, 62, P4D_24XLARGE, 1, 0),
        "i-0b7e00000000000a2": (119.25, 123, G5_12XLARGE, 5, 0),
        "i-0b7e00000000000a3": (5 * MIN, 50 * MIN, G5_2XLARGE, 1, 1),
        "i-0b7e00000000000a4": (0, 168, P5_48XLARGE, 0, 0),
        "i-0b7e00000000000a5": (52 + 20 * MIN, 53, G6_12XLARGE, 1, 0),
        "i-0b7e00000000000a6": (80 * MIN + 1540 * MIN, 28 + 25 * MIN, G5_XLARGE, 2, 0),
        "i-0b7e00000000000a7": (2.25 + 15.25, 3.25 + 16.25 + 20 * MIN, G5_4XLARGE, 2, 0),
        "dana-notebook-idle-week": (167 + 40 * MIN, 168, ML_G5_XLARGE, 1, 0),
    }
    result = run(load_world(WEEK))
    outcomes = by_id(result)
    assert set(outcomes) == set(expected)
    for key, (saved, idle, price, count, near) in expected.items():
        o = outcomes[key]
        assert round(o.saved_usd, 6) == round(saved * price, 6), key
        assert round(o.idle_usd, 6) == round(idle * price, 6), key
        assert round(o.unclaimed_usd, 6) == round((idle - saved) * price, 6), key
        assert (o.stops, o.near_misses) == (count, near), key
    # 1344.9275 + 676.386 + 0.101 + 0 + 240.817067 + 27.162 + 28.42 + 236.074667 = 2553.888234
    assert result.reclaimable_usd == 2553.89
    # 1361.396 + 697.656 + 1.01 + 9246.72 + 243.8848 + 28.587167 + 32.209333 + 236.544 = 11848.0073
    assert result.idle_usd == 11848.01
    assert result.unclaimed_usd == 9294.12  # 11848.0073 - 2553.888234 = 9294.119066
    assert (result.stops, result.near_misses) == (13, 1)
    assert stops(outcomes["i-0b7e00000000000a7"]) == [
        ("16 17:45", "16 20:00", "owner_stopped", False),
        ("17 17:45", "18 09:00", "busy", False),
    ]
    assert stops(outcomes["i-0b7e00000000000a3"]) == [("17 12:45", "17 12:50", "busy", True)]


# -- no look-ahead ----------------------------------------------------------------------------------

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
STEP = timedelta(minutes=5)
A10G = Accelerators(kind="nvidia_gpu", count=1, model="A10G")


def one_gpu(values: dict[int, float], running: int = 96) -> Subject:
    """A g5.xlarge in five-minute datapoints, busy 07:00-09:00, then ``values[n]`` stamped 09:00 + n x 5 min;
    running from 07:00 to 09:00 + ``running`` x 5 min."""
    instance = Ec2Instance(
        "i-0d00000000000000a", "g5.xlarge", "running", "123456789012", "us-east-1", None, {}, None, A10G
    )
    points = {n: 90.0 for n in range(-24, 0)} | values
    track = GpuTrack([(T0 + STEP * n, v) for n, v in sorted(points.items())])
    price = bundled_price("g5.xlarge", "us-east-1")
    ran = [(T0 - timedelta(hours=2), T0 + STEP * running)]
    return Subject(SubjectKind.EC2_INSTANCE, instance, {0: track}, ran, price, 1)


def test_a_datapoint_stamped_at_the_decision_time_is_not_used_then() -> None:
    # Idle 09:00-09:55, then a busy datapoint stamped exactly 10:00 (it covers 10:00-10:05).
    subject = one_gpu({**{n: 1.0 for n in range(12)}, 12: 90.0, 13: 90.0})
    thresholds = Params().thresholds(STEP)
    at_ten = reading_at(subject, subject.resource, T0 + STEP * 12, thresholds)
    after = reading_at(subject, subject.resource, T0 + STEP * 13, thresholds)
    assert at_ten.verdict is Verdict.IDLE  # the 10:00 datapoint is not known at 10:00
    assert at_ten.busiest_gpu_percent == 1.0
    assert after.verdict is not Verdict.IDLE  # known at 10:05 (busy: the idle minutes before are not work)
    assert after.busiest_gpu_percent == 90.0


def test_a_stop_due_when_activity_starts_is_made_and_is_a_near_miss_that_saves_nothing() -> None:
    # Idle from 09:00: marked 09:30 (datapoints 09:00-09:25), due at 09:45 with the 15-minute grace. Busy from the
    # datapoint stamped 09:45: unknown at 09:45, so the sweep then stops it, and the stop saves nothing.
    subject = one_gpu({**{n: 1.0 for n in range(9)}, **{n: 90.0 for n in range(9, 30)}}, running=30)
    history = History(T0, T0 + STEP * 30, STEP, [subject])
    outcome = backtest(history, Params()).outcomes[0]
    events = [(f"{e.at:%H:%M}", e.action) for e in outcome.events]
    assert events[:2] == [("09:30", "mark"), ("09:45", "stop")]
    assert ("09:50", "unmark") in events  # the 09:45 datapoint, known at 09:50, cancels the mark
    stop = outcome.events[1]
    assert (stop.stopped_until, stop.ended_by, stop.near_miss, stop.saved_usd) == (
        T0 + STEP * 9,
        "busy",
        True,
        0.0,
    )
    assert outcome.saved_usd == 0


def test_activity_exactly_at_the_horizon_is_not_a_near_miss() -> None:
    # Stopped at 09:45 (as above); busy from 10:45, exactly 60 minutes later: not strictly within the horizon.
    subject = one_gpu({**{n: 1.0 for n in range(21)}, **{n: 90.0 for n in range(21, 30)}}, running=30)
    history = History(T0, T0 + STEP * 30, STEP, [subject])
    at_horizon = backtest(history, Params(near_miss_horizon=timedelta(minutes=60))).outcomes[0]
    within = backtest(history, Params(near_miss_horizon=timedelta(minutes=65))).outcomes[0]
    assert stops(at_horizon) == [("20 09:45", "20 10:45", "busy", False)]
    assert stops(within) == [("20 09:45", "20 10:45", "busy", True)]


def test_a_gap_in_the_gpu_data_of_a_running_instance_ends_the_credit() -> None:
    # The account reader's case: CPUUtilization says it ran throughout, its one GPU published nothing 10:30-11:30.
    values = {n: 1.0 for n in range(48) if not 18 <= n < 30}
    subject = one_gpu(values, running=48)
    history = History(T0, T0 + STEP * 48, STEP, [subject])
    outcome = backtest(history, Params()).outcomes[0]
    # Stopped at 09:45; what it would have done from 10:30 is not known: nothing is credited past it.
    assert stops(outcome)[0] == ("20 09:45", "20 10:30", "no_data", False)


# -- reports ----------------------------------------------------------------------------------------


def test_reports_show_idle_and_unclaimed_beside_reclaimed_and_notices_by_verdict() -> None:
    from costguard.backtest.command import sweep

    w = load_world(OWNER_STOPS)
    start, step = world_period(w, None, None)
    history = world_history(w, start, step, PriceBook())
    result = backtest(history, Params())
    rows = sweep(history, Params(), [{"idle-window": 30.0}, {"idle-window": 60.0}])
    document = as_json(result, rows)
    row = document["sweep"][0]
    assert (row["reclaimable_usd"], row["unclaimed_idle_usd"], row["idle_usd"]) == (44.34, 41.78, 86.12)
    assert (row["stops"], row["near_misses"]) == (5, 1)
    assert document["sweep"][1]["idle_usd"] == 86.12  # the idle time does not depend on the settings
    # Notices by verdict: a mark or a stop is news unless the same one of the same instance was told within the
    # notifier's repeat window (an episode ends 4 to 5 hours after its last sighting): it folds the rest.
    assert document["totals"]["notices_by_reason"]["gpu_idle"] == 6
    assert document["totals"]["findings_by_reason"]["gpu_idle"] >= 10
    text = as_text(result, rows)
    assert "$86.12 of idle time, $41.78 of it left unclaimed" in text
    assert "by verdict: gpu_idle 6" in text
    assert "idle $" in text and "86.12" in text.split("Threshold sweep:")[1]
    page = as_html(result, rows)
    assert "<th>Idle $</th>" in page and "<td>86.12</td>" in page
    assert "Notices by verdict" in page


def test_a_protected_idle_instance_notifies_once_per_episode() -> None:
    w = World.model_validate(
        {
            "now": "2026-11-20T16:00:00Z",
            "instances": [
                {
                    "id": "i-0e0000000000000a1",
                    "type": "g5.xlarge",
                    "tags": {"costguard:protect": "true"},
                    "gpu_metrics": {"pattern": "idle", "lookback_minutes": 600, "period_seconds": 300},
                }
            ],
        }
    )
    # Eight hours of idle readings: one episode, posted once at 08:05; with no window, at each step.
    assert run(w).notices == {"gpu_idle": 1}
    assert run(w, repeat_window=timedelta(0)).notices == {"gpu_idle": 95}  # every sweep, 08:05 to 15:55


# -- the world file ---------------------------------------------------------------------------------


def instance(**extra: Any) -> dict[str, Any]:
    return {
        "id": "i-0f0000000000000a1",
        "type": "g5.xlarge",
        "gpu_metrics": {"pattern": "idle", "lookback_minutes": 600, "period_seconds": 300},
    } | extra


def world(**extra: Any) -> World:
    return World.model_validate({"now": "2026-11-20T16:00:00Z", "instances": [instance(**extra)]})


@pytest.mark.parametrize(
    ("timeline", "extra", "message"),
    [
        (
            [{"state": "running", "start": "2026-11-20T10:00:00Z", "end": "2026-11-20T09:00:00Z"}],
            {"state": "stopped"},
            "timeline period 1 (running) ends",
        ),
        (
            [
                {"state": "running", "start": "2026-11-20T09:00:00Z", "end": "2026-11-20T12:00:00Z"},
                {"state": "stopped", "start": "2026-11-20T11:00:00Z", "end": "2026-11-20T13:00:00Z"},
            ],
            {"state": "stopped"},
            "period 2 (stopped) starts at 2026-11-20 11:00:00+00:00, before period 1 ends",
        ),
        (
            [{"state": "running", "start": "2026-11-19T09:00:00Z", "end": "2026-11-20T09:00:00Z"}],
            {"state": "stopped"},
            "outside the world's span",
        ),
        (
            [{"state": "running", "start": "2026-11-20T09:00:00Z"}],
            {"state": "stopped"},
            "its timeline has it running at now but its state is stopped",
        ),
        (
            [{"state": "running", "start": "2026-11-20T09:00:00Z", "end": "2026-11-20T10:00:00Z"}],
            {},
            "its timeline has it stopped at now but its state is running",
        ),
        (
            [{"state": "running", "end": "2026-11-20T10:00:00Z"}, {"state": "running"}],
            {},
            "period 2 (running) has no start",
        ),
        (
            [{"state": "running", "start": "2026-11-20T09:00:00Z"}],
            {"stopped_at": "2026-11-20T10:00:00Z"},
            "give either stopped_at or a timeline",
        ),
        (
            [{"state": "running", "start": "2026-11-20T09:00:00Z"}],
            {"launched": "2026-11-20T10:00:00Z"},
            "before it was launched",
        ),
    ],
)
def test_a_timeline_is_checked_when_the_world_is_loaded(
    timeline: list[dict[str, str]], extra: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=r"timeline|stopped_at") as raised:
        world(timeline=timeline, **extra)
    assert message in str(raised.value)


def test_a_timeline_in_order_gives_the_running_periods() -> None:
    w = world(
        timeline=[
            {"state": "running", "end": "2026-11-20T09:00:00Z"},
            {"state": "stopped", "start": "2026-11-20T09:00:00Z", "end": "2026-11-20T10:00:00Z"},
            {"state": "running", "start": "2026-11-20T10:00:00Z", "end": "2026-11-20T11:00:00Z"},
            {"state": "running", "start": "2026-11-20T12:00:00Z"},
        ]
    )
    spec = w.instances[0]
    at = datetime(2026, 11, 20, tzinfo=UTC)
    assert spec.running_periods(at + timedelta(hours=6), w.now) == [
        (at + timedelta(hours=6), at + timedelta(hours=9)),
        (at + timedelta(hours=10), at + timedelta(hours=11)),
        (at + timedelta(hours=12), w.now),
    ]
    # The instance publishes nothing while stopped, and is not billed then.
    start, step = world_period(w, None, None)
    subject = world_history(w, start, step, PriceBook()).subjects[0]
    assert subject.running == [
        (at + timedelta(hours=8), at + timedelta(hours=9)),
        (at + timedelta(hours=10), at + timedelta(hours=11)),
        (at + timedelta(hours=12), w.now),
    ]
    assert not [
        t for t, _ in subject.tracks[0].series if at + timedelta(hours=9) <= t < at + timedelta(hours=10)
    ]


def test_a_bad_timeline_in_a_file_is_named_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "world.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "now": "2026-11-20T16:00:00Z",
                "instances": [
                    instance(
                        state="stopped",
                        timeline=[
                            {
                                "state": "running",
                                "start": "2026-11-20T09:00:00Z",
                                "end": "2026-11-20T12:00:00Z",
                            },
                            {
                                "state": "running",
                                "start": "2026-11-20T11:00:00Z",
                                "end": "2026-11-20T13:00:00Z",
                            },
                        ],
                    )
                ],
            }
        )
    )
    with pytest.raises(
        WorldFileError, match=r"(?s)world\.yaml: .*periods must be in order and must not overlap"
    ):
        load_world(path)


def test_world_files_load_with_libyaml_where_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    assert world_module.YamlLoader is getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    used: list[type] = []
    real = yaml.load

    def spy(stream: str, Loader: type) -> Any:
        used.append(Loader)
        return real(stream, Loader=Loader)

    monkeypatch.setattr(world_module.yaml, "load", spy)
    load_world(WEEK)
    assert used == [world_module.YamlLoader]
    # Without libyaml, the pure-Python safe loader reads the same world.
    monkeypatch.setattr(world_module, "YamlLoader", yaml.SafeLoader)
    assert load_world(WEEK) == World.model_validate(yaml.safe_load(WEEK.read_text()))


# -- verdicts over a backtest ---------------------------------------------------------------------------


def _bursts_and_breaks() -> list[dict[str, str]]:
    """40 minutes of work, 20 of thinking, all day: a notebook's rhythm (its mean is about 62%)."""
    day = datetime(2026, 11, 20, 6, tzinfo=UTC)
    return [
        {
            "pattern": "idle",
            "start": f"{day + timedelta(hours=h, minutes=40):%Y-%m-%dT%H:%M:%SZ}",
            "end": f"{day + timedelta(hours=h + 1):%Y-%m-%dT%H:%M:%SZ}",
        }
        for h in range(10)
    ]


def test_a_notebook_alternating_bursts_and_idle_breaks_gives_no_gpu_starved() -> None:
    w = World.model_validate(
        {
            "now": "2026-11-20T16:00:00Z",
            "instances": [
                {
                    "id": "i-0d0000000000000a1",
                    "name": "bursts-and-breaks",
                    "type": "g5.12xlarge",
                    "gpu_metrics": {
                        "pattern": "busy",
                        "lookback_minutes": 600,
                        "period_seconds": 300,
                        "segments": _bursts_and_breaks(),
                    },
                },
                {  # the same box fed too slowly all day: that one is starved, so the check can fail
                    "id": "i-0d0000000000000a2",
                    "name": "steadily-under-fed",
                    "type": "g5.12xlarge",
                    "gpu_metrics": {"pattern": "starved", "lookback_minutes": 600, "period_seconds": 300},
                },
            ],
        }
    )
    result = run(w)
    outcomes = by_id(result)
    assert "gpu_starved" not in outcomes["i-0d0000000000000a1"].findings
    assert "gpu_starved" in outcomes["i-0d0000000000000a2"].findings
    assert result.notices.get("gpu_starved", 0) >= 1
