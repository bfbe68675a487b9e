"""The savings ledger through the embedded AWS (issue 43): written by the stops made (and, in notify mode, kept),
closed by the resource's return, read one query per team; the demo's ledger in both modes; `costguard ledger`
against a deployed stack; the backtest's stops priced by the same entry."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.act.executor import execute
from costguard.act.ledger_book import DynamoLedger, item_of, open_id
from costguard.act.shadow import MemoryShadowMarks
from costguard.aws import clients
from costguard.backtest.command import world_period
from costguard.backtest.walk import Params, backtest
from costguard.backtest.world_history import world_history
from costguard.cli import main
from costguard.ledger import ACTED, WOULD, Entry, totals
from costguard.local.demo import DemoRun, run_demo
from costguard.local.world import load_world
from costguard.model import MARK_TAG_KEY, Action, Decision, Finding, Reason, Resource, ResourceKind
from costguard.pipeline import close_returns
from costguard.pricing import price_book
from tests.conftest import DEMO_WORLD, ROOT

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)


def _decision(
    instance: str = "i-1",
    *,
    team: str = "vision",
    dry_run: bool = False,
    action: Action = Action.STOP,
    at: datetime = T0,
) -> Decision:
    finding = Finding(
        reason=Reason.GPU_IDLE,
        resource=Resource(
            kind=ResourceKind.EC2_INSTANCE,
            id=instance,
            account="123456789012",
            region="us-east-1",
            tags={"team": team},
        ),
        summary="idle",
        observed_at=at,
        hourly_usd=10.0,
    )
    return Decision(action=action, reason=Reason.GPU_IDLE, finding=finding, dry_run=dry_run, decided_at=at)


class _Stops:
    """A remediator whose stop succeeds, or is refused."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse

    def stop(self, resource: Resource) -> None:
        if self.refuse:
            raise RuntimeError("throttled")

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        pass

    def unmark(self, resource: Resource) -> None:
        pass


def _all(ledger: DynamoLedger) -> list[Entry]:
    return ledger.entries(T0 - 24 * H, T0 + 48 * H)


def test_a_stop_made_is_written_once_and_its_return_closes_it(state_table: str) -> None:
    ledger = DynamoLedger(state_table)
    assert execute(_decision(), _Stops(), ledger=ledger).done
    execute(_decision(), _Stops(), ledger=ledger)  # a redelivery of the same decision
    execute(_decision(at=T0 + H), _Stops(), ledger=ledger)  # stopped again while off: not a second entry
    assert not execute(_decision("i-2"), _Stops(refuse=True), ledger=ledger).done  # refused: stopped nothing
    [entry] = _all(ledger)
    assert (entry.resource_id, entry.mode, entry.hourly_usd, entry.returned_at) == ("i-1", ACTED, 10.0, None)
    closed = ledger.returned(entry.resource_key, T0 + 3 * H)
    assert closed is not None and closed.returned_at == T0 + 3 * H and closed.saved_usd(T0 + 9 * H) == 30
    assert ledger.returned(entry.resource_key, T0 + 4 * H) is None  # closed once
    # Back, and stopped again later: a new entry.
    execute(_decision(at=T0 + 5 * H), _Stops(), ledger=ledger)
    assert [e.at for e in _all(ledger)] == [T0, T0 + 5 * H]


def test_a_stop_of_a_resource_whose_return_was_not_seen_closes_its_entry_at_its_launch(
    state_table: str,
) -> None:
    """Its owner took costguard's mark off and started it again: the next stop finds the entry still open, and
    the resource's LaunchTime after it. The first entry ends there; the second is written. A second stop in the
    same run (LaunchTime before the first) is not a return: one entry."""
    ledger = DynamoLedger(state_table)
    launched = T0 - 5 * H
    execute(_started(_decision(at=T0), launched), _Stops(), ledger=ledger)
    execute(_started(_decision(at=T0 + timedelta(minutes=5)), launched), _Stops(), ledger=ledger)
    assert len(_all(ledger)) == 1
    execute(_started(_decision(at=T0 + 6 * H), T0 + 2 * H), _Stops(), ledger=ledger)
    first, second = _all(ledger)
    assert first.returned_at == T0 + 2 * H and first.saved_usd(T0 + 9 * H) == 20
    assert second.at == T0 + 6 * H and second.returned_at is None


def _started(decision: Decision, at: datetime) -> Decision:
    resource = decision.resource.model_copy(update={"started": at})
    return decision.model_copy(update={"finding": decision.finding.model_copy(update={"resource": resource})})


def test_a_dry_run_keeps_its_would_be_stop_and_working_again_closes_it(state_table: str) -> None:
    ledger, shadow = DynamoLedger(state_table), MemoryShadowMarks()
    execute(_decision(dry_run=True), _Stops(), shadow=shadow, ledger=ledger)
    execute(
        _decision(dry_run=True, action=Action.UNMARK, at=T0 + 2 * H), _Stops(), shadow=shadow, ledger=ledger
    )
    [entry] = _all(ledger)
    assert entry.mode == WOULD and entry.returned_at == T0 + 2 * H and entry.saved_usd(T0 + 9 * H) == 20
    # A dry run without its shadow store writes nothing: what it would do is not kept, so not counted.
    execute(_decision("i-3", dry_run=True), _Stops(), ledger=ledger)
    assert len(_all(ledger)) == 1


def test_a_ledger_that_cannot_be_written_never_fails_the_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        def record(self, decision: Decision) -> None:
            raise RuntimeError("table gone")

    outcome = execute(_decision(), _Stops(), ledger=Broken())  # type: ignore[arg-type]
    assert outcome.done and outcome.error is None


def test_a_resource_started_again_since_its_mark_closes_its_entry_at_its_launch(state_table: str) -> None:
    """The stop leaves costguard's mark on the instance; started again, its LaunchTime (AWS's) is after the mark:
    back then. A mark from this run (not a restart) closes nothing."""
    ledger = DynamoLedger(state_table)
    execute(_decision(), _Stops(), ledger=ledger)
    mark = {"team": "vision", MARK_TAG_KEY: (T0 - timedelta(minutes=15)).isoformat()}

    def finding(started: datetime) -> Finding:
        resource = Resource(
            kind=ResourceKind.EC2_INSTANCE,
            id="i-1",
            account="123456789012",
            region="us-east-1",
            tags=mark,
            started=started,
        )
        return Finding(reason=Reason.GPU_IDLE, resource=resource, summary="idle", observed_at=T0 + 4 * H)

    close_returns([finding(T0 - 2 * H)], ledger)  # the run the mark was made in
    assert _all(ledger)[0].returned_at is None
    clients.calls.clear()
    close_returns([finding(T0 + 3 * H)], ledger)
    assert clients.calls[("dynamodb", "GetItem")] == 1  # one read, for this resource only
    assert _all(ledger)[0].returned_at == T0 + 3 * H


def test_a_month_of_a_thousand_instances_is_one_query_per_team(state_table: str) -> None:
    """Three stops a month for each of 1,000 instances of ten teams: one GetItem for the teams, then one Query a
    team, whatever the number of entries."""
    dynamodb = clients.client("dynamodb")
    teams = [f"team-{n}" for n in range(10)]
    entries = [
        Entry(
            id=f"d-{n}-{k}",
            at=T0 + timedelta(days=10 * k, minutes=n),
            account="123456789012",
            region="us-east-1",
            kind="ec2_instance",
            resource_id=f"i-{n:05d}",
            name=f"box-{n}",
            team=teams[n % 10],
            owner=None,
            reason="gpu_idle",
            mode=ACTED,
            hourly_usd=1.0,
        )
        for n in range(1000)
        for k in range(3)
    ]
    items = [item_of(e, timedelta(days=400)) for e in entries]
    for start in range(0, len(items), 25):
        dynamodb.batch_write_item(
            RequestItems={state_table: [{"PutRequest": {"Item": i}} for i in items[start : start + 25]]}
        )
    dynamodb.update_item(
        TableName=state_table,
        Key={"id": {"S": "ledger-teams"}},
        UpdateExpression="ADD teams :t",
        ExpressionAttributeValues={":t": {"SS": teams}},
    )
    clients.calls.clear()
    read = DynamoLedger(state_table).entries(T0, T0 + timedelta(days=31))
    assert len(read) == 3000
    assert clients.calls[("dynamodb", "Query")] == 10 and clients.calls[("dynamodb", "GetItem")] == 1
    clients.calls.clear()
    assert len(DynamoLedger(state_table).entries(T0, T0 + timedelta(days=31), ["team-3"])) == 300
    assert clients.calls[("dynamodb", "Query")] == 1 and clients.calls[("dynamodb", "GetItem")] == 0


def test_the_ledger_of_the_backtests_stops_gives_its_dollars_and_near_misses() -> None:
    """One definition: the backtest prices each would-be stop through the ledger's entry, so the entries its
    stops write give its reclaimed dollars (near-misses' included, shown apart) and its near-misses."""
    world = load_world(ROOT / "worlds" / "backtest.yaml")
    start, step = world_period(world, None, None)
    result = backtest(world_history(world, start, step, price_book()), Params())
    entries = result.ledger
    assert len(entries) == result.stops > 0
    end = result.history.end
    dollars = sum(e.dollars(e.off_until(end)) or 0 for e in entries)
    assert round(dollars, 2) == result.reclaimable_usd
    assert sum(e.near_miss for e in entries) == result.near_misses > 0
    by_team = totals(entries, end)
    saved = sum(t.saved_usd for t in by_team) + sum(t.near_miss_usd for t in by_team)
    assert round(saved, 2) == result.reclaimable_usd


@pytest.fixture(scope="module")
def demos() -> Iterator[dict[str, DemoRun]]:
    world = load_world(DEMO_WORLD)
    yield {
        mode: run_demo(world, mode, overrides={"POWERTOOLS_LOG_LEVEL": "ERROR"})
        for mode in ("remediate", "notify")
    }


def test_the_demos_ledger_holds_each_stop_made_and_notify_modes_would_be_stops_are_remediates(
    demos: dict[str, DemoRun],
) -> None:
    remediate, notify = demos["remediate"], demos["notify"]
    stopped = {
        d["resource_id"]
        for r in remediate.results
        for d in r.decisions
        if d["action"] == "stop" and not d["dry_run"]
    }
    assert remediate.ledger and all(e.mode == ACTED for e in remediate.ledger)
    # Each entry is a stop made: the sweeps' and events', and the p4d its owner's Stop now click stopped.
    assert {e.resource_id for e in remediate.ledger} == stopped | {"i-0a1f00000000000a1"}
    assert all(e.hourly_usd and e.hourly_usd > 0 for e in remediate.ledger)
    assert notify.ledger and all(e.mode == WOULD for e in notify.ledger)
    assert {e.resource_key for e in notify.ledger} == {e.resource_key for e in remediate.ledger}
    # Each resource once while it stays off, whatever the later sweeps decide of it.
    assert len({e.resource_key for e in notify.ledger}) == len(notify.ledger)


def test_costguard_ledger_reads_a_deployed_stacks_ledger_as_one_csv_row_per_action(
    state_table: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    ledger = DynamoLedger(state_table)
    now = datetime.now(UTC).replace(microsecond=0)
    for n, team in enumerate(["vision", "nlp", "vision"]):
        execute(_decision(f"i-{n}", team=team, at=now - timedelta(days=2, hours=n)), _Stops(), ledger=ledger)
    clients.client("cloudformation", "us-east-1").create_stack(
        StackName="costguard",
        TemplateBody=json.dumps(
            {
                "Resources": {"Q": {"Type": "AWS::SQS::Queue"}},
                "Outputs": {"StateTableName": {"Value": state_table}},
            }
        ),
    )
    assert main(["ledger", "--region", "us-east-1", "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 3 and {r["team"] for r in rows} == {"vision", "nlp"}
    assert all(r["mode"] == "acted" and float(r["saved_usd"]) > 0 for r in rows)
    assert main(["ledger", "--region", "us-east-1", "--json", "--team", "nlp"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert [t["team"] for t in document["teams"]] == ["nlp"] and len(document["actions"]) == 1
    assert main(["ledger", "--region", "us-east-1", "--stack", "nope"]) == 2
    assert "no costguard stack 'nope'" in capsys.readouterr().err


def test_an_open_entrys_marker_is_keyed_by_mode() -> None:
    assert open_id(ACTED, "k") != open_id(WOULD, "k")


def test_costguard_ledger_world_plays_the_demo_world_and_writes_one_row_per_action(
    demos: dict[str, DemoRun], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ledger", "--world", "--mode", "remediate", "--csv", "--since", "2026-01-01"]) == 0
    captured = capsys.readouterr()
    assert "playing the demo world in remediate mode" in captured.err
    rows = list(csv.DictReader(io.StringIO(captured.out)))
    played = demos["remediate"].ledger
    # The same world played again: the same actions, one row each, priced as the demo priced them.
    assert len(rows) == len(played) > 0
    assert sorted((r["resource_id"], r["reason"]) for r in rows) == sorted(
        (e.resource_id, e.reason) for e in played
    )
    assert all(r["mode"] == "acted" for r in rows)
    ended = demos["remediate"].ended
    assert ended is not None
    saved = {e.id: round(e.saved_usd(ended), 2) for e in played}
    assert sorted(float(r["saved_usd"]) for r in rows) == sorted(saved.values())
