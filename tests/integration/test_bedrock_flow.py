"""Bedrock Provisioned Throughput end to end: the hourly capacity sweep -> CapacityFunction -> queue -> notifier
-> Slack, on the world file's throughputs (served to the adapter: moto has no Bedrock throughput)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from costguard.local.replay import ReplayResult, replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.model import MARK_TAG_KEY
from tests.conftest import EVENTS

SWEEP = EVENTS / "schedule-capacity-sweep.json"
OPTED_IN = "support-bot-ft-pt"  # no commitment, opted in, idle
COMMITTED = "claude-summarize-pt"  # a OneMonth commitment ending 2026-11-25, idle
BUSY = "search-qa-pt"


def rate(world: World, model: str) -> float:
    entries = dict(e.strip().split("=") for e in world.bedrock_throughput_prices.split(","))
    return float(entries[model])


def later_sweep(tmp_path: Path, time: str) -> Path:
    event = json.loads(SWEEP.read_text())
    event |= {"id": f"c0ffee00-0000-4000-8000-{time[11:13]}{time[14:16]}00000502", "time": time}
    path = tmp_path / f"sweep-{time[11:13]}{time[14:16]}.json"
    path.write_text(json.dumps(event))
    return path


def throughput_findings(result: ReplayResult) -> dict[str, dict[str, Any]]:
    return {f["resource_id"]: f for f in result.findings if f["resource_kind"] == "provisioned_throughput"}


def test_idle_throughputs_are_found_with_units_hourly_price_and_idle_cost(
    stack: LocalStack, world: World
) -> None:
    [result] = replay(stack, [SWEEP])
    assert result.ok, result.error
    found = throughput_findings(result)
    assert set(found) == {OPTED_IN, COMMITTED}  # the busy one gives nothing
    opted = found[OPTED_IN]
    hourly = 1 * rate(world, "amazon.titan-text-express-v1")
    assert opted["reason"] == "bedrock_throughput_idle"
    assert opted["hourly_usd"] == pytest.approx(hourly)
    assert opted["cost_usd"] == pytest.approx(round(24 * hourly, 2))
    assert opted["evidence"]["model_units"] == 1
    assert "COSTGUARD_BEDROCK_THROUGHPUT_PRICES" in opted["evidence"]["price_source"]
    committed = found[COMMITTED]
    assert committed["hourly_usd"] == pytest.approx(2 * rate(world, "anthropic.claude-v2@OneMonth"))
    assert "2026-11-25 00:00 UTC" in committed["summary"]
    decisions = {d["resource_id"]: d for d in result.decisions}
    assert decisions[OPTED_IN]["action"] == "mark" and decisions[OPTED_IN]["dry_run"]
    assert decisions[COMMITTED]["action"] == "notify"
    stack.drain()
    text = json.dumps(stack.sink.messages)
    assert "Bedrock Provisioned Throughput nobody invokes" in text
    assert f"${hourly:,.2f}/h" in text
    assert "Would mark for delete (dry run)" in text
    # The figures, and what AWS does not document about the metric, are in the finding's own evidence.
    assert "which ModelId value" in opted["evidence"]["metric"]


def test_remediate_deletes_the_opted_in_one_after_grace_and_only_reports_the_committed_one(
    world: World, sink: SlackSink, tmp_path: Path
) -> None:
    with LocalStack(world, sink=sink, mode="remediate") as stack:
        [first] = replay(stack, [SWEEP])
        # ARNs end in a 12-character id, as AWS makes them: the name comes from the world.
        tags = {stack.bedrock.by_arn[arn][1].name: t for arn, t in stack.bedrock.tags.items()}
        assert MARK_TAG_KEY in tags[OPTED_IN] and MARK_TAG_KEY not in tags[COMMITTED]
        assert not stack.bedrock.deleted
        [second] = replay(stack, [later_sweep(tmp_path, "2026-11-20T13:00:00Z")])
        deleted = {stack.bedrock.by_arn[arn][1].name for arn in stack.bedrock.deleted}
    assert first.ok and second.ok, (first.error, second.error)
    decisions = {
        d["resource_id"]: d for d in second.decisions if d["resource_kind"] == "provisioned_throughput"
    }
    assert decisions[OPTED_IN]["action"] == "stop" and not decisions[OPTED_IN]["dry_run"]
    assert decisions[COMMITTED]["action"] == "notify"
    assert deleted == {OPTED_IN}
    [committed] = [f for f in second.findings if f["resource_id"] == COMMITTED]
    assert "2026-11-25 00:00 UTC" in committed["summary"]
    assert "Deleted" in json.dumps(sink.messages)


def test_a_protected_throughput_is_never_deleted(world: World, sink: SlackSink, tmp_path: Path) -> None:
    specs = [
        p.model_copy(
            update={"tags": p.tags | {"costguard:protect": "true", MARK_TAG_KEY: "2026-11-20T10:00:00Z"}}
        )
        for p in world.provisioned_throughputs
    ]
    with LocalStack(
        world.model_copy(update={"provisioned_throughputs": specs}), sink=sink, mode="remediate"
    ) as stack:
        [result] = replay(stack, [SWEEP])
        assert not stack.bedrock.deleted
    decisions = {d["resource_id"]: d for d in result.decisions}
    assert decisions[OPTED_IN]["action"] == "notify"
