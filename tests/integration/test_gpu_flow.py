"""GPU verdicts on the demo world, through the deployed routing, handlers and policy."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from costguard.aws import clients
from costguard.local.replay import ReplayResult, latest_event_time, replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import GpuMetrics, World
from costguard.model import MARK_TAG_KEY
from costguard.pricing import bundled_table
from tests.conftest import EVENTS

ALARM_IDLE = EVENTS / "cloudwatch-alarm-gpu-idle.json"
ALARM_ONE_BUSY = EVENTS / "cloudwatch-alarm-gpu-idle-one-gpu-busy.json"
SWEEP = EVENTS / "schedule-gpu-sweep-1200.json"
SWEEP_LATER = EVENTS / "schedule-gpu-sweep-1220.json"

IDLE, ONE_BUSY, STARVED, PROTECTED, NO_AGENT, BUSY, ASG = (f"i-0a1f00000000000a{n}" for n in range(1, 8))
SPOT = "i-0a1f00000000000b1"  # busy spot training (the spot_interruption demo)
SILENT_GPU = "i-0a1f00000000000a8"  # idle, GPU 2 publishes nothing (gpu_metrics_partial)
BUSY_AGAIN = "i-0a1f00000000000a9"  # idle until 12:05, then busy (gpu_active_again at the 12:20 sweep)
# the right-sizing audit's instances: d1 to d7, and d8, d9, da (the family, model-size and Trainium cases)
AUDIT_FLEET = (*(f"i-0a1f00000000000d{n}" for n in range(1, 10)), "i-0a1f00000000000da")


def by_resource(result: ReplayResult) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for finding in result.findings:
        found.setdefault(finding["resource_id"], []).append(finding["reason"])
    return found


def instance(instance_id: str) -> dict[str, object]:
    [reservation] = clients.ec2().describe_instances(InstanceIds=[instance_id])["Reservations"]
    described: dict[str, object] = reservation["Instances"][0]
    return described


def tags_of(instance_id: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance(instance_id).get("Tags", [])}  # type: ignore[attr-defined]


def state_of(instance_id: str) -> str:
    return str(instance(instance_id)["State"]["Name"])  # type: ignore[index]


@pytest.fixture
def remediate(world: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    until = latest_event_time([SWEEP_LATER])
    with LocalStack(world, sink=sink, mode="remediate", until=until) as running:
        yield running


def test_sweep_gives_each_verdict_to_the_right_instance(stack: LocalStack) -> None:
    [result] = replay(stack, [SWEEP])
    found = by_resource(result)
    assert found[IDLE] == ["gpu_idle"]
    assert found[STARVED] == ["gpu_starved"]
    assert found[NO_AGENT] == ["gpu_metrics_missing"]
    assert ONE_BUSY not in found  # GPUs 0-6 idle, GPU 7 busy: not idle, not starved
    assert BUSY not in found


def test_idle_alarm_rereads_metrics_and_finds_the_idle_instance_priced(stack: LocalStack) -> None:
    [result] = replay(stack, [ALARM_IDLE])
    [finding] = result.findings
    assert (finding["reason"], finding["resource_id"]) == ("gpu_idle", IDLE)
    assert finding["hourly_usd"] == bundled_table()["ec2"]["p4d.24xlarge"]


def test_alarm_for_an_instance_with_one_busy_gpu_decides_nothing(stack: LocalStack) -> None:
    [result] = replay(stack, [ALARM_ONE_BUSY])
    assert result.ok
    assert result.findings == []
    assert result.slack == []


def test_notify_mode_decides_the_same_but_dry_and_changes_nothing(stack: LocalStack) -> None:
    results = replay(stack, [ALARM_IDLE, SWEEP])
    decisions = [d for r in results for d in r.decisions]
    assert decisions and all(d["dry_run"] for d in decisions)
    # Decided as remediate decides (marked by the alarm, in its grace period at the sweep): the mark is kept in
    # the state table, not on the instance, and the stop it would make stays due at the same time.
    idle = [d for d in decisions if d["resource_id"] == IDLE]
    assert [d["action"] for d in idle] == ["mark", "none"]
    assert len({d["stop_after"] for d in idle}) == 1
    assert MARK_TAG_KEY not in tags_of(IDLE)
    assert {state_of(i) for i in (IDLE, PROTECTED, ASG, BUSY)} == {"running"}


def test_remediate_marks_then_stops_after_the_grace_period(remediate: LocalStack) -> None:
    [first] = replay(remediate, [ALARM_IDLE])
    [mark] = [d for d in first.decisions if d["resource_id"] == IDLE]
    assert (mark["action"], mark["dry_run"]) == ("mark", False)
    assert MARK_TAG_KEY in tags_of(IDLE)
    # Twelve o'clock: still inside the 15-minute grace period.
    [second] = replay(remediate, [SWEEP])
    assert [d["action"] for d in second.decisions if d["resource_id"] == IDLE] == ["none"]
    assert state_of(IDLE) == "running"
    # Twenty past: grace over and still idle.
    [third] = replay(remediate, [SWEEP_LATER])
    assert [d["action"] for d in third.decisions if d["resource_id"] == IDLE] == ["stop"]
    assert state_of(IDLE) in ("stopping", "stopped")
    assert any("Stopped" in str(m) for m in third.slack)


def test_remediate_never_stops_protected_asg_or_busy_instances(remediate: LocalStack) -> None:
    results = replay(remediate, [SWEEP, SWEEP_LATER])
    actions = {(d["resource_id"], d["action"]) for r in results for d in r.decisions}
    assert (PROTECTED, "notify") in actions
    assert (ASG, "notify") in actions
    assert not {a for a in actions if a[0] in (PROTECTED, ASG, BUSY, ONE_BUSY) and a[1] in ("mark", "stop")}
    assert {state_of(i) for i in (PROTECTED, ASG, BUSY, ONE_BUSY)} == {"running"}
    assert MARK_TAG_KEY not in tags_of(PROTECTED)


def test_activity_during_the_grace_period_cancels_the_mark(
    world: World, sink: SlackSink, sleeps: list[float]
) -> None:
    # The idle instance's GPU 0 comes back to work at 12:05, after it was marked at 12:00.
    busy_again = world.now + timedelta(minutes=5)
    specs = [
        spec.model_copy(
            update={
                "gpu_metrics": GpuMetrics.model_validate(
                    spec.gpu_metrics.model_dump()
                    | {"gpus": [{"index": 0, "segments": [{"pattern": "busy", "start": busy_again}]}]}
                )
            }
        )
        if spec.id == IDLE
        else spec
        for spec in world.instances
    ]
    changed = World.model_validate(world.model_dump() | {"instances": [s.model_dump() for s in specs]})
    with LocalStack(changed, sink=sink, mode="remediate", until=latest_event_time([SWEEP_LATER])) as stack:
        [first] = replay(stack, [ALARM_IDLE])
        assert [d["action"] for d in first.decisions] == ["mark"]
        assert MARK_TAG_KEY in tags_of(IDLE)
        [later] = replay(stack, [SWEEP_LATER])
        assert [d["action"] for d in later.decisions if d["resource_id"] == IDLE] == ["unmark"]
        assert MARK_TAG_KEY not in tags_of(IDLE)
        assert state_of(IDLE) == "running"


def test_stops_are_capped_per_run_and_the_cap_is_reported(
    world: World, sink: SlackSink, sleeps: list[float]
) -> None:
    # Two idle, unprotected, marked-long-ago instances; a cap of one stop per run.
    marked = (world.now - timedelta(hours=1)).isoformat()
    specs = [
        s.model_copy(update={"tags": {**s.tags, MARK_TAG_KEY: marked}}) if s.id in (IDLE, PROTECTED) else s
        for s in world.instances
    ]
    specs = [
        s.model_copy(update={"tags": {k: v for k, v in s.tags.items() if k != "costguard:protect"}})
        for s in specs
    ]
    changed = World.model_validate(world.model_dump() | {"instances": [s.model_dump() for s in specs]})
    overrides = {"COSTGUARD_MAX_STOPS_PER_RUN": "1"}
    with LocalStack(changed, sink=sink, mode="remediate", overrides=overrides) as stack:
        [result] = replay(stack, [SWEEP])
        stops = [d for d in result.decisions if d["action"] == "stop"]
        capped = [d for d in result.decisions if "cap" in d["note"]]
        assert len(stops) == 1
        assert stops[0]["resource_id"] == PROTECTED  # the costlier p5 goes first
        assert [d["resource_id"] for d in capped] == [IDLE]
        assert state_of(IDLE) == "running"
        assert any("cap" in str(m) for m in result.slack)


def test_hourly_stop_cap_is_shared_across_invocations(
    world: World, sink: SlackSink, sleeps: list[float]
) -> None:
    marked = (world.now - timedelta(hours=1)).isoformat()
    specs = [
        s.model_copy(update={"tags": {**s.tags, MARK_TAG_KEY: marked}}) if s.id == IDLE else s
        for s in world.instances
    ]
    changed = World.model_validate(world.model_dump() | {"instances": [s.model_dump() for s in specs]})
    with LocalStack(
        changed, sink=sink, mode="remediate", overrides={"COSTGUARD_MAX_STOPS_PER_HOUR": "0"}
    ) as stack:
        [result] = replay(stack, [SWEEP])
        [stop] = [d for d in result.decisions if d["action"] == "stop"]
        assert stop["resource_id"] == IDLE
        assert state_of(IDLE) == "running"
        assert any("hourly stop cap reached" in str(m) for m in result.slack)


def test_instance_state_changes_keep_the_alarms(world: World, sink: SlackSink, sleeps: list[float]) -> None:
    # The alarms are an option (GpuAlarms=on); tests/integration/test_gpu_alarms_option.py has them off.
    with LocalStack(world, sink=sink, overrides={"COSTGUARD_GPU_ALARMS": "on"}) as stack:
        _keep_the_alarms(stack)


def _keep_the_alarms(stack: LocalStack) -> None:
    replay(stack, [EVENTS / "ec2-instance-running.json"])
    names = {a["AlarmName"] for a in clients.cloudwatch().describe_alarms()["MetricAlarms"]}
    assert names == {f"costguard-gpu-idle-{IDLE}"}
    replay(stack, [EVENTS / "schedule-gpu-alarm-reconcile.json"])
    names = {a["AlarmName"] for a in clients.cloudwatch().describe_alarms()["MetricAlarms"]}
    assert names == {
        f"costguard-gpu-idle-{i}"
        for i in (IDLE, ONE_BUSY, STARVED, PROTECTED, NO_AGENT, BUSY, ASG, SPOT, *AUDIT_FLEET)
    } | {f"costguard-gpu-idle-{SILENT_GPU}", f"costguard-gpu-idle-{BUSY_AGAIN}"}
    clients.ec2().stop_instances(InstanceIds=[BUSY])
    replay(stack, [EVENTS / "schedule-gpu-alarm-reconcile.json"])
    names = {a["AlarmName"] for a in clients.cloudwatch().describe_alarms()["MetricAlarms"]}
    assert f"costguard-gpu-idle-{BUSY}" not in names
