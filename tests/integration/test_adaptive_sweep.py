"""The adaptive idle policy in the deployed GPU sweep: the same code as the backtest, its histories in the state
table (one batched read and at most one batched write per sweep), the fixed decisions without history."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard.aws import clients
from costguard.aws.idle_history import DynamoIdleHistories, history_key, prior_key
from costguard.detect import adaptive, idle_priors
from costguard.local.replay import ReplayResult, replay
from costguard.local.sink import SlackSink
from costguard.local.stack import TABLE, LocalStack
from costguard.local.world import World
from tests.conftest import EVENTS

SWEEP = EVENTS / "schedule-gpu-sweep-1200.json"
IDLE = "i-0a1f00000000000a1"  # research-p4d-forgotten: idle all along
ACCOUNT, REGION = "123456789012", "us-east-1"


def sweep_at(tmp_path: Path, at: datetime) -> Path:
    event: dict[str, Any] = json.loads(SWEEP.read_text())
    event["time"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    event["id"] = f"{event['id'][:-4]}{at:%H%M}"
    path = tmp_path / f"sweep-{at:%H%M}.json"
    path.write_text(json.dumps(event))
    return path


def decisions_of(results: list[ReplayResult]) -> list[tuple[str, str, str]]:
    return sorted((d["resource_id"], d["reason"], d["action"]) for r in results for d in r.decisions)


@pytest.fixture
def adaptive_stack(world: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    with LocalStack(
        world,
        sink=sink,
        mode="remediate",
        until=world.now + timedelta(hours=1),
        overrides={"COSTGUARD_IDLE_POLICY": "adaptive"},
    ) as running:
        yield running


def test_without_history_the_adaptive_sweep_decides_exactly_as_the_fixed_one(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    times = [world.now + timedelta(minutes=m) for m in (0, 5, 10, 15, 20)]
    runs: dict[str, list[tuple[str, str, str]]] = {}
    for policy in ("fixed", "adaptive"):
        with LocalStack(
            world,
            sink=sink,
            mode="remediate",
            until=world.now + timedelta(hours=1),
            # Every instance read at every sweep under both policies (the adaptive one always does): the
            # decisions of the read schedule are checked apart (tests/unit/test_read_schedule.py).
            overrides={"COSTGUARD_IDLE_POLICY": policy, "COSTGUARD_READ_SCHEDULE": "off"},
        ) as stack:
            runs[policy] = decisions_of(replay(stack, [sweep_at(tmp_path, t) for t in times]))
    assert runs["adaptive"] == runs["fixed"]
    assert ("i-0a1f00000000000a1", "gpu_idle", "stop") in runs["fixed"]


def test_one_batched_read_and_at_most_one_batched_write_per_sweep(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    counted: dict[str, list[tuple[int, int]]] = {}
    for policy in ("fixed", "adaptive"):
        counted[policy] = []
        # The read schedule off: its own read and write are not the adaptive store's.
        overrides = {"COSTGUARD_IDLE_POLICY": policy, "COSTGUARD_READ_SCHEDULE": "off"}
        with LocalStack(world, sink=sink, mode="remediate", overrides=overrides) as stack:
            for minutes in (0, 5):
                clients.calls.clear()
                replay(stack, [sweep_at(tmp_path, world.now + timedelta(minutes=minutes))])
                reads = clients.calls[("dynamodb", "BatchGetItem")]
                writes = clients.calls[("dynamodb", "BatchWriteItem")]
                counted[policy].append((reads, writes))
            if policy == "adaptive":
                [stored] = DynamoIdleHistories(TABLE).read([history_key(ACCOUNT, REGION, IDLE)]).values()
                assert stored.idle_since is not None and len(stored.to_text()) < 3000
    (fixed_first, fixed_second), (first, second) = counted["fixed"], counted["adaptive"]
    # One batched read of the histories at each sweep; written at the first (every history is new), then not:
    # five more idle minutes change nothing that is kept.
    assert first == (fixed_first[0] + 1, fixed_first[1] + 1)
    assert second == (fixed_second[0] + 1, fixed_second[1])


def learned_after_long_jobs(idle_since: datetime) -> adaptive.IdleHistory:
    """Two weeks of an instance that trains for ten hours, then sits idle for ten (GPU and CPU both down),
    observed sweep by sweep; then today's job ended at ``idle_since``."""
    params = adaptive.AdaptiveParams()
    history = adaptive.IdleHistory()
    step = timedelta(minutes=5)
    at = idle_since - timedelta(days=14)
    while at < idle_since + timedelta(minutes=55):
        phase = (at - (idle_since - timedelta(days=14))) % timedelta(hours=20)
        busy = phase < timedelta(hours=10) and at < idle_since
        status = adaptive.Status.BUSY if busy else adaptive.Status.IDLE
        history.observe(at + step, status, 60.0 if busy else 2.0, params)
        at += step
    return history


def test_with_a_history_of_long_idles_after_jobs_it_stops_before_the_grace_ends(
    adaptive_stack: LocalStack, tmp_path: Path
) -> None:
    now = adaptive_stack.world.now
    key = history_key(ACCOUNT, REGION, IDLE)
    DynamoIdleHistories(TABLE).write({key: learned_after_long_jobs(now - timedelta(hours=1))}, now)
    [first] = replay(adaptive_stack, [sweep_at(tmp_path, now)])
    assert [d["action"] for d in first.decisions if d["resource_id"] == IDLE] == ["mark"]
    [marked] = [f for f in first.findings if f["resource_id"] == IDLE]
    assert (
        "It will be stopped at the next sweep, before the end of its grace period: idle" in marked["summary"]
    )
    [second] = replay(adaptive_stack, [sweep_at(tmp_path, now + timedelta(minutes=5))])
    # Marked five minutes ago; the fixed policy would wait until a quarter past.
    assert [d["action"] for d in second.decisions if d["resource_id"] == IDLE] == ["stop"]
    [finding] = [f for f in second.findings if f["resource_id"] == IDLE]
    assert "Stopped before the end of its grace period" in finding["summary"]
    assert finding["evidence"]["idle_policy"] == "adaptive: stop"
    assert "after a" in finding["evidence"]["idle_policy_reason"]


def test_a_new_instance_borrows_its_peers_prior_from_its_first_idle_period(
    adaptive_stack: LocalStack, tmp_path: Path
) -> None:
    """No idle period of its own yet (its first job just ended), but its team's p4d instances idle for hours
    after their jobs: stopped at the next sweep, not after the grace period (the pools are read with the
    histories: tests/unit/test_idle_history.py)."""
    now = adaptive_stack.world.now
    pool = idle_priors.Pool()
    for hour in range(24):  # peers' idle periods after jobs: 6 h, never back within the hour
        pool.add(
            [(hour, int(adaptive.Shape.AFTER_JOB), adaptive.bin_of(360), int(adaptive.Ended.RESUMED))] * 2
        )
    groups = idle_priors.peer_groups("ec2", "p4d.24xlarge", {"team": "ml-research"})
    store = DynamoIdleHistories(TABLE)
    store.write_state({}, {prior_key(ACCOUNT, REGION, g): pool for g in groups}, now)
    own = adaptive.IdleHistory(
        idle_since=now - timedelta(minutes=40),
        work_since=now - timedelta(hours=10),
        first_seen=now - timedelta(hours=10),
        last_seen=now - timedelta(minutes=5),
        last_status=adaptive.Status.IDLE,
        busy_minutes=9 * 60,
        recent=[2.0, 2.0, 2.0],
        cpu_sum=6.0,
        cpu_n=3,
    )
    assert own.samples == 0
    store.write({history_key(ACCOUNT, REGION, IDLE): own}, now)
    [first] = replay(adaptive_stack, [sweep_at(tmp_path, now)])
    [marked] = [f for f in first.findings if f["resource_id"] == IDLE]
    assert "It will be stopped at the next sweep" in marked["summary"]
    assert "on instances like this one" in marked["evidence"]["idle_policy_reason"]
    [second] = replay(adaptive_stack, [sweep_at(tmp_path, now + timedelta(minutes=5))])
    assert [d["action"] for d in second.decisions if d["resource_id"] == IDLE] == ["stop"]
