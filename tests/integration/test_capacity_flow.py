"""capacity_reservation_idle end to end: AWS Health event -> CapacityFunction -> queue -> notifier -> Slack."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.pricing import bundled_table
from tests.conftest import EVENTS

SINGLE = EVENTS / "health-odcr-underutilization.json"
SUMMARY = EVENTS / "health-odcr-underutilization-summary.json"


def price(instance_type: str) -> float:
    return float(bundled_table()["ec2"][instance_type])


def test_single_reservation_event_gives_its_unused_dollars_a_day(stack: LocalStack, world: World) -> None:
    spec = next(r for r in world.capacity_reservations if r.id == "cr-0a1f0000000000c01")
    [result] = replay(stack, [SINGLE])
    assert result.ok, result.error
    assert result.function == "CapacityFunction"
    [decision] = result.decisions
    assert (decision["reason"], decision["action"], decision["resource_id"]) == (
        "capacity_reservation_idle",
        "notify",
        spec.id,
    )
    utilization = (spec.used / spec.total) * 100
    per_day = round((1 - utilization / 100) * spec.total * price(spec.instance_type) * 24, 2)
    assert decision["hourly_usd"] == pytest.approx(spec.total * price(spec.instance_type))
    stack.drain()
    text = json.dumps(stack.sink.messages)
    assert f"{per_day:,.2f}" in text
    assert spec.instance_type in text


def test_summary_gives_one_finding_per_reservation(stack: LocalStack, world: World) -> None:
    [result] = replay(stack, [SUMMARY])
    assert result.ok, result.error
    by_id = {d["resource_id"]: d for d in result.decisions}
    assert set(by_id) == {"cr-0a1f0000000000c01", "cr-0a1f0000000000c02"}
    assert all(d["reason"] == "capacity_reservation_idle" for d in by_id.values())
    busy = next(r for r in world.capacity_reservations if r.id == "cr-0a1f0000000000c02")
    per_day = round((1 - 12.5 / 100) * busy.total * price(busy.instance_type) * 24, 2)
    stack.drain()
    assert f"{per_day:,.2f}" in json.dumps(stack.sink.messages)


def test_redelivered_event_alerts_once(world: World, sink: SlackSink, tmp_path: Path) -> None:
    with LocalStack(world, sink=sink) as stack:
        first, second = replay(stack, [SINGLE, SINGLE])
        stack.drain()
    assert first.ok and second.ok
    assert len(sink.messages) == 1
