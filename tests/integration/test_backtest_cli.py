"""`costguard backtest` as a user runs it: the week world, the sweep, the reports, bad input."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from costguard.backtest.command import demo_backtest
from costguard.cli import main
from costguard.local.world import load_world
from tests.conftest import DEMO_WORLD, ROOT

WEEK = str(ROOT / "worlds" / "backtest.yaml")


def test_backtest_of_the_week_world_as_json_with_a_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["backtest", "--world", WEEK, "--json", "--sweep", "idle-threshold=5", "idle-window=30,60"])
    assert code == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert captured.err == ""  # no progress bar with --json
    assert document["schema_version"] == 1
    assert document["period"]["step_minutes"] == 5
    by_id = {r["id"]: r for r in document["resources"]}
    # The 50-minute lunch break: stopped five minutes before its owner came back.
    lunch = [d for d in by_id["i-0b7e00000000000a3"]["decisions"] if d["action"] == "stop"]
    assert [(d["at"], d["stopped_until"], d["near_miss"], d["ended_by"]) for d in lunch] == [
        ("2026-11-17T12:45:00+00:00", "2026-11-17T12:50:00+00:00", True, "busy")
    ]
    # Stopped by its owner on Wednesday at 15:00: the savings end there.
    forgotten = [d for d in by_id["i-0b7e00000000000a5"]["decisions"] if d["action"] == "stop"]
    assert forgotten[-1]["ended_by"] == "owner_stopped"
    assert forgotten[-1]["stopped_until"] == "2026-11-18T15:00:00+00:00"
    # Protected: never stopped.
    assert all(d["action"] != "stop" for d in by_id["i-0b7e00000000000a4"]["decisions"])
    # Stopped by its owner every evening but Tuesday's: never credited over a night it was stopped anyway.
    owner = [d for d in by_id["i-0b7e00000000000a7"]["decisions"] if d["action"] == "stop"]
    assert [(d["stopped_until"], d["ended_by"]) for d in owner] == [
        ("2026-11-16T20:00:00+00:00", "owner_stopped"),
        ("2026-11-18T09:00:00+00:00", "busy"),
    ]
    # Notices are counted by verdict, and each sweep row has the idle dollars beside the reclaimed ones.
    assert document["totals"]["notices_by_reason"]["gpu_idle"] > 0
    assert all(row["idle_usd"] == document["totals"]["idle_usd"] for row in document["sweep"])
    windows = {row["idle_window_minutes"]: row for row in document["sweep"]}
    # A 60-minute window never sees the lunch break idle long enough: one stop fewer.
    assert windows[30]["stops"] == windows[60]["stops"] + 1
    assert document["totals"]["reclaimable_usd"] == windows[30]["reclaimable_usd"]


def test_backtest_writes_the_json_and_the_self_contained_html(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["backtest", "--world", WEEK, "--days", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Totals:" in out
    page = (tmp_path / "backtest.html").read_text()
    assert page.count("<svg") == len(json.loads((tmp_path / "backtest.json").read_text())["resources"])


def test_a_bad_sweep_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["backtest", "--sweep", "idle=5"])
    except SystemExit as exited:  # refused by the command line's own option check
        code = exited.code
    assert code == 2
    assert "idle-threshold" in capsys.readouterr().err


def test_the_demo_ends_with_a_short_backtest_of_the_demo_world() -> None:
    text = demo_backtest(load_world(DEMO_WORLD))
    assert "i-0a1f00000000000a1" in text  # the forgotten p4d would have been stopped
    assert "stop" in text and "Totals:" in text


def _backtest(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], **env: str
) -> dict[str, Any]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["backtest", "--world", WEEK, "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def test_the_backtest_applies_remediate_scope_and_reason_modes_as_deployed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's rollout, previewed: a scope nobody is in stops nothing; gpu_idle in notify stops no idle
    instance; each held stop is told (a notice), as notify mode would have told it."""
    plain = _backtest(monkeypatch, capsys)
    stops = plain["totals"]["stops"]
    idle_stops = sum(
        1
        for r in plain["resources"]
        for d in r["decisions"]
        if d["action"] == "stop" and d["reason"] == "gpu_idle"
    )
    assert stops > 0 and idle_stops > 0 and plain["totals"]["held_by_reason"] == {}

    nobody = _backtest(monkeypatch, capsys, COSTGUARD_REMEDIATE_SCOPE="team=nobody")
    assert nobody["totals"]["stops"] == 0 and nobody["totals"]["reclaimable_usd"] == 0
    assert sum(nobody["totals"]["held_by_reason"].values()) >= stops
    assert nobody["totals"]["remediate_scope"] == "team=nobody"
    held = [
        d for r in nobody["resources"] for d in r["decisions"] if d["note"].startswith("would stop, held")
    ]
    assert held and all("outside RemediateScope (team=nobody)" in d["note"] for d in held)

    monkeypatch.delenv("COSTGUARD_REMEDIATE_SCOPE")
    notify_idle = _backtest(monkeypatch, capsys, COSTGUARD_REASON_MODES="gpu_idle=notify")
    decisions = [d for r in notify_idle["resources"] for d in r["decisions"]]
    assert not [d for d in decisions if d["action"] == "stop" and d["reason"] == "gpu_idle"]
    assert notify_idle["totals"]["held_by_reason"]["gpu_idle"] >= idle_stops
    # Stops of other reasons are still made.
    assert notify_idle["totals"]["stops"] == stops - idle_stops


def test_widen_previews_each_step_of_the_rollout_with_its_own_scope(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 41: `--widen team` walks one step per team, safest first, each with the RemediateScope it would
    deploy: a step stops only its teams' resources, each step keeps the earlier teams, and the last step (no
    scope) is the plain backtest."""
    assert main(["backtest", "--world", WEEK, "--json", "--widen", "team", "--out", str(tmp_path)]) == 0
    document = json.loads(capsys.readouterr().out)
    steps = document["widening"]
    team_of = _teams()
    world_teams = {team_of.get(r["id"]) for r in document["resources"]} - {None}
    assert [s["step"] for s in steps] == list(range(1, len(world_teams) + 2))
    assert steps[-1]["added"] == "every resource" and steps[-1]["remediate_scope"] == ""
    assert steps[-1]["stops"] == document["totals"]["stops"]
    assert steps[-1]["reclaimable_usd"] == document["totals"]["reclaimable_usd"]
    assert {s["added"] for s in steps[:-1]} == {f"team={t}" for t in world_teams}
    for earlier, later in itertools.pairwise(steps[:-1]):
        assert later["remediate_scope"].startswith(earlier["remediate_scope"] + "|")
    # The first step's figures are a walk with its scope alone: the same stops as the backtest run with it.
    first = steps[0]
    assert 0 < first["stops"] < steps[-1]["stops"]
    capsys.readouterr()
    scoped = _scoped(first["remediate_scope"], capsys)
    assert (scoped["totals"]["stops"], scoped["totals"]["reclaimable_usd"]) == (
        first["stops"],
        first["reclaimable_usd"],
    )
    stopped = {r["id"] for r in scoped["resources"] if r["stops"]}
    assert stopped and {team_of[i] for i in stopped} == {first["added"].removeprefix("team=")}
    page = (tmp_path / "backtest.html").read_text()
    assert "Widening remediate one step at a time" in page and first["remediate_scope"] in page


def test_widen_leaves_a_value_no_scope_can_name_to_the_last_step() -> None:
    """A team tagged ``a|b`` (or ``x,y``) cannot be named by a RemediateScope: it is not a step of its own (a scope
    built from it would name other teams), and the last step, every resource, covers it."""
    from dataclasses import replace as replaced

    from costguard.backtest.command import world_period
    from costguard.backtest.walk import Params, backtest
    from costguard.backtest.widen import widening
    from costguard.backtest.world_history import world_history
    from costguard.pricing import price_book

    world = load_world(Path(WEEK))
    hostile = ["vision|nlp", "ml,research", " padded"]
    for instance, team in zip(world.instances, hostile, strict=False):
        instance.tags["team"] = team
    start, step = world_period(world, None, None)
    history = world_history(world, start, step, price_book())
    rows = widening(history, replaced(Params()), "team", backtest)
    assert not any(set(r.added) & set("|,") or " " in r.added for r in rows[:-1])
    assert rows[-1].scope == "" and rows[-1].added == "every resource"


def _scoped(scope: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COSTGUARD_REMEDIATE_SCOPE", scope)
        assert main(["backtest", "--world", WEEK, "--json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def _teams() -> dict[str, str]:
    """The week world's resources (instances by id, jobs and notebooks by name) -> their team tag."""
    world = load_world(Path(WEEK))
    teams = {i.id: i.tags["team"] for i in world.instances if "team" in i.tags}
    for kind in ("training_jobs", "notebooks"):
        for item in getattr(world, kind):
            if "team" in item.tags:
                teams[item.name] = item.tags["team"]
    return teams
