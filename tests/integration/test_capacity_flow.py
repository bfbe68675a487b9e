"""Capacity reservations end to end: Health events, the hourly sweep, Capacity Block and reservation-state events
-> CapacityFunction -> queue -> notifier -> Slack, on the world file's reservations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import CapacityReservation as CapacityReservationSpec
from costguard.local.world import World
from costguard.model import MARK_TAG_KEY
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


# -- the hourly sweep, Capacity Blocks and reservation states ----------------------------------------------

SWEEP = EVENTS / "schedule-capacity-sweep.json"
DELIVERED = EVENTS / "ec2-capacity-block-delivered.json"
EXPIRING = EVENTS / "ec2-capacity-block-expiration-warning.json"
ACTIVE = EVENTS / "ec2-capacity-reservation-active.json"
MARKED = "2026-11-20T09:00:00+00:00"


def spec_of(world: World, reservation_id: str) -> CapacityReservationSpec:
    return next(r for r in world.capacity_reservations if r.id == reservation_id)


def with_reservation_tags(world: World, tags: dict[str, dict[str, str]]) -> World:
    return world.model_copy(
        update={
            "capacity_reservations": [
                r.model_copy(update={"tags": {**r.tags, **tags[r.id]}}) if r.id in tags else r
                for r in world.capacity_reservations
            ]
        }
    )


def test_sweep_gives_one_finding_per_idle_reservation_with_the_money_wasted(
    stack: LocalStack, world: World
) -> None:
    [result] = replay(stack, [SWEEP])
    assert result.ok, result.error
    assert result.function == "CapacityFunction"
    by_id = {f["resource_id"]: f for f in result.findings if f["resource_kind"] == "capacity_reservation"}
    # c02 is busy (above the threshold), c03 has an instance running in it: neither gives a finding.
    assert set(by_id) == {"cr-0a1f0000000000c01", "cr-0a1f0000000000c04", "cr-0a1f0000000000c05"}
    idle = spec_of(world, "cr-0a1f0000000000c01")
    assert by_id[idle.id]["reason"] == "capacity_reservation_idle"
    wasted = round(24 * (1 - idle.utilization / 100) * idle.total * price(idle.instance_type), 2)
    assert by_id[idle.id]["cost_usd"] == pytest.approx(wasted)
    assert by_id[idle.id]["evidence"]["hours_with_data"] == 24
    assert by_id["cr-0a1f0000000000c04"]["reason"] == "capacity_block_unused"
    decisions = {d["resource_id"]: d for d in result.decisions}
    assert decisions[idle.id]["action"] == "mark" and decisions[idle.id]["dry_run"]
    assert decisions["cr-0a1f0000000000c05"]["action"] == "notify"  # not opted in, and only an hour old


def test_remediate_cancels_the_opted_in_idle_marked_odcr_only(world: World, sink: SlackSink) -> None:
    changed = with_reservation_tags(
        world,
        {
            "cr-0a1f0000000000c01": {MARK_TAG_KEY: MARKED},
            "cr-0a1f0000000000c05": {"costguard:auto-cancel": "true", MARK_TAG_KEY: MARKED},
        },
    )
    with LocalStack(changed, sink=sink, mode="remediate") as stack:
        [result] = replay(stack, [SWEEP])
        states = dict(stack.capacity.states)
    assert result.ok, result.error
    decisions = {d["resource_id"]: d for d in result.decisions}
    assert decisions["cr-0a1f0000000000c01"]["action"] == "stop"
    assert not decisions["cr-0a1f0000000000c01"]["dry_run"]
    assert states["cr-0a1f0000000000c01"] == "cancelled"
    # Opted in and marked, but idle for only one hour of the window: reported, not cancelled.
    assert decisions["cr-0a1f0000000000c05"]["action"] == "notify"
    assert states["cr-0a1f0000000000c05"] == "active"
    assert "Cancelled" in json.dumps(sink.messages)


def test_protected_reservation_is_never_cancelled(world: World, sink: SlackSink) -> None:
    changed = with_reservation_tags(
        world, {"cr-0a1f0000000000c01": {MARK_TAG_KEY: MARKED, "costguard:protect": "true"}}
    )
    with LocalStack(changed, sink=sink, mode="remediate") as stack:
        [result] = replay(stack, [SWEEP])
        states = dict(stack.capacity.states)
    decisions = {d["resource_id"]: d for d in result.decisions}
    assert decisions["cr-0a1f0000000000c01"]["action"] == "notify"
    assert states["cr-0a1f0000000000c01"] == "active"


@pytest.mark.parametrize("mode", ["notify", "remediate"])
def test_a_capacity_block_is_never_cancelled_in_any_mode(world: World, sink: SlackSink, mode: str) -> None:
    opted_in = {"costguard:auto-cancel": "true", MARK_TAG_KEY: MARKED}
    changed = with_reservation_tags(
        world, {"cr-0a1f0000000000c04": opted_in, "cr-0a1f0000000000c03": opted_in}
    )
    with LocalStack(changed, sink=sink, mode=mode) as stack:
        results = replay(stack, [DELIVERED, EXPIRING, SWEEP])
        states = dict(stack.capacity.states)
    assert all(r.ok for r in results), [r.error for r in results]
    blocks = {"cr-0a1f0000000000c03", "cr-0a1f0000000000c04"}
    acted = [d for r in results for d in r.decisions if d["resource_id"] in blocks]
    assert acted and all(d["action"] == "notify" for d in acted)
    assert states["cr-0a1f0000000000c03"] == states["cr-0a1f0000000000c04"] == "active"


def test_delivered_block_with_nothing_running_costs_each_idle_hour(stack: LocalStack, world: World) -> None:
    [result] = replay(stack, [DELIVERED])
    assert result.ok, result.error
    [finding] = result.findings
    spec = spec_of(world, "cr-0a1f0000000000c04")
    assert (finding["reason"], finding["resource_id"]) == ("capacity_block_unused", spec.id)
    assert spec.start is not None
    idle_hours = (world.now - spec.start).total_seconds() / 3600
    per_hour = spec.total * price(spec.instance_type)
    assert finding["hourly_usd"] == pytest.approx(per_hour)
    assert finding["cost_usd"] == pytest.approx(round(idle_hours * per_hour, 2))
    assert f"{per_hour:,.2f}" in json.dumps(result.slack)


def test_expiration_warning_names_the_instances_and_jobs_in_the_block(
    stack: LocalStack, world: World
) -> None:
    [result] = replay(stack, [EXPIRING])
    assert result.ok, result.error
    [finding] = result.findings
    assert (finding["reason"], finding["resource_id"]) == ("capacity_block_expiring", "cr-0a1f0000000000c03")
    inside = [i for i in world.instances if i.capacity_reservation_id == "cr-0a1f0000000000c03"]
    assert inside
    text = json.dumps(result.slack)
    for spec in inside:
        assert spec.id in text
        assert spec.tags["costguard:job"] in text
    assert "12:30 UTC" in text  # 30 minutes before the 13:00 end
    spec = spec_of(world, "cr-0a1f0000000000c03")
    assert finding["hourly_usd"] == pytest.approx(spec.total * price(spec.instance_type))


def test_reservation_state_notice_follows_the_setting(world: World, sink: SlackSink) -> None:
    with LocalStack(world, sink=sink) as stack:
        [shown] = replay(stack, [ACTIVE])
    assert [f["reason"] for f in shown.findings] == ["capacity_reservation_state"]
    assert shown.findings[0]["resource_id"] == "cr-0a1f0000000000c05"
    with LocalStack(
        world, sink=sink, overrides={"COSTGUARD_CAPACITY_STATE_NOTICES": "failed,delayed"}
    ) as stack:
        [quiet] = replay(stack, [ACTIVE])
    assert quiet.ok and quiet.findings == []
