"""A GPU-idle stop needs more than GPU series anyone can write: tried through the embedded stack as someone with only
cloudwatch:PutMetricData would (the door they use, then costguard's sweeps).

- zeros written in one call, with the CloudWatch agent's dimensions, for an instance that publishes no GPU series
  (``gpu_metrics_missing`` at 11:55), or for the silent GPU of one that publishes some (``gpu_metrics_partial``):
  EC2's own CPU and network show it working, so it is told, never marked nor stopped (detect/host_evidence.py);
- a GPU reading below 0% or above 100% is no reading: no idle verdict, nothing stopped, and the message says so;
- a genuinely idle instance (its GPUs idle, and EC2's own CPU and network idle) is still marked, then stopped,
  with EC2's figures in the message, in the sweep's usual batched reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard.aws import clients
from costguard.aws.metrics import GPU_METRIC, GPU_NAMESPACE
from costguard.local.replay import ReplayResult, replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.model import MARK_TAG_KEY
from tests.conftest import EVENTS, load_event

BEFORE = datetime(2026, 11, 20, 11, 55, tzinfo=UTC)  # the sweep that saw no (or partial) GPU metrics
NOW = BEFORE + timedelta(minutes=5)  # the sweep after the attack
LATER = NOW + timedelta(minutes=20)  # past the template's 15-minute grace period from 12:00
GPU_SWEEP = EVENTS / "schedule-gpu-sweep-1200.json"
ACCOUNT, REGION = "123456789012", "us-east-1"
LAUNCHED = BEFORE - timedelta(hours=6)
TARGET = "i-0e71de0ce000000a1"
WORKING_HOST = {"cpu_percent": 35, "network_in_mb_per_minute": 80}  # a job on the GPUs the agent does not see
IDLE_HOST = {"cpu_percent": 1, "network_in_mb_per_minute": 0.05}


def world(*instances: dict[str, Any]) -> World:
    return World.model_validate({"account": ACCOUNT, "region": REGION, "now": BEFORE, "instances": instances})


def instance(instance_id: str, kind: str, gpu_metrics: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"id": instance_id, "type": kind, "launched": LAUNCHED, "gpu_metrics": gpu_metrics} | spec


def sweep_at(tmp_path: Path, at: datetime) -> Path:
    """The GPU sweep's schedule event at another time."""
    event = load_event(GPU_SWEEP.name)
    event["id"] = f"e71de0ce-0000-4000-8000-{at.hour:06d}{at.minute:06d}"
    event["time"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    path = tmp_path / f"sweep-{at:%H%M}.json"
    path.write_text(json.dumps(event))
    return path


def agent_dimensions(instance_id: str, kind: str, index: int) -> list[dict[str, str]]:
    """The dimensions the CloudWatch agent gives a GPU's series (as the world seeds them): InstanceId, index and
    the GPU model's name."""
    [described] = clients.ec2().describe_instance_types(InstanceTypes=[kind])["InstanceTypes"]
    model = described["GpuInfo"]["Gpus"][0]["Name"]
    return [
        {"Name": "InstanceId", "Value": instance_id},
        {"Name": "index", "Value": str(index)},
        {"Name": "name", "Value": model},
    ]


def backfill(instance_id: str, kind: str, index: int, value: float) -> None:
    """The door: one PutMetricData call (a role with only cloudwatch:PutMetricData) writing one reading a minute
    for two hours back and up to 12:20 (CloudWatch takes timestamps up to two hours ahead)."""
    dims = agent_dimensions(instance_id, kind, index)
    start, end = NOW - timedelta(hours=2), LATER
    data = [
        {
            "MetricName": GPU_METRIC,
            "Dimensions": dims,
            "Timestamp": start + timedelta(minutes=m),
            "Value": value,
        }
        for m in range(1, int((end - start) / timedelta(minutes=1)) + 1)
    ]
    assert len(data) <= 1000  # one call
    clients.cloudwatch().put_metric_data(Namespace=GPU_NAMESPACE, MetricData=data)


def ec2_instance(instance_id: str) -> dict[str, Any]:
    [reservation] = clients.ec2().describe_instances(InstanceIds=[instance_id])["Reservations"]
    described: dict[str, Any] = reservation["Instances"][0]
    return described


def ec2_tags(instance_id: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in ec2_instance(instance_id).get("Tags", [])}


def decided(results: list[ReplayResult], resource_id: str) -> list[tuple[str, str]]:
    return [
        (d["reason"], d["action"]) for r in results for d in r.decisions if d["resource_id"] == resource_id
    ]


def slack_text(results: list[ReplayResult]) -> str:
    return json.dumps([m for r in results for m in r.slack])


def sweeps(stack: LocalStack, tmp_path: Path, *at: datetime) -> list[ReplayResult]:
    results = replay(stack, [sweep_at(tmp_path, t) for t in at])
    assert all(r.ok for r in results), [r.error for r in results]
    return results


@pytest.fixture
def sink() -> Iterator[SlackSink]:
    with SlackSink() as running:
        yield running


# -- series anyone can write do not stop alone -----------------------------------------------------------------


def test_zeros_backfilled_for_an_instance_without_gpu_metrics_are_told_never_marked_nor_stopped(
    sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    kind = "g6e.xlarge"
    target = instance(TARGET, kind, {"pattern": "none"}, **WORKING_HOST)
    with LocalStack(world(target), sink=sink, mode="remediate", until=LATER) as stack:
        before = sweeps(stack, tmp_path, BEFORE)
        assert decided(before, TARGET) == [("gpu_metrics_missing", "notify")]

        backfill(TARGET, kind, 0, 0.0)

        at_noon = sweeps(stack, tmp_path, NOW)
        assert decided(at_noon, TARGET) == [("gpu_idle", "notify")]  # told, not marked
        assert MARK_TAG_KEY not in ec2_tags(TARGET)
        told = slack_text(at_noon)
        assert "EC2's own metrics" in told and "show it working" in told
        assert "CPU averaged 35.0%" in told  # what costguard saw
        assert "cloudwatch:PutMetricData" in told  # and why it does not act on the GPU series
        [finding] = [f for f in at_noon[0].findings if f["resource_id"] == TARGET]
        assert finding["evidence"]["ec2_metrics"] == "disagrees"

        later = sweeps(stack, tmp_path, LATER)
        assert ("gpu_idle", "stop") not in decided(later, TARGET)
        assert ec2_instance(TARGET)["State"]["Name"] == "running"
        assert MARK_TAG_KEY not in ec2_tags(TARGET)


def test_zeros_backfilled_for_the_silent_gpu_of_a_partial_instance_are_told_never_marked_nor_stopped(
    sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    kind = "g5.12xlarge"  # 4 GPUs; GPU 3 publishes nothing, the others read idle
    gpus = {"pattern": "idle", "gpus": [{"index": 3, "pattern": "none"}]}
    with LocalStack(
        world(instance(TARGET, kind, gpus, **WORKING_HOST)), sink=sink, mode="remediate", until=LATER
    ) as stack:
        before = sweeps(stack, tmp_path, BEFORE)
        assert decided(before, TARGET) == [("gpu_metrics_partial", "notify")]

        backfill(TARGET, kind, 3, 0.0)

        at_noon = sweeps(stack, tmp_path, NOW)
        assert decided(at_noon, TARGET) == [("gpu_idle", "notify")]
        assert MARK_TAG_KEY not in ec2_tags(TARGET)
        told = slack_text(at_noon)
        assert "show it working" in told and "CPU averaged 35.0%" in told

        later = sweeps(stack, tmp_path, LATER)
        assert ("gpu_idle", "stop") not in decided(later, TARGET)
        assert ec2_instance(TARGET)["State"]["Name"] == "running"


@pytest.mark.parametrize("value", [-400.0, 250.0], ids=["below-0", "above-100"])
def test_a_gpu_reading_outside_0_to_100_percent_gives_no_verdict_and_stops_nothing(
    sink: SlackSink, sleeps: list[float], tmp_path: Path, value: float
) -> None:
    """EC2's own metrics agree that the host is idle here: only the reading out of range keeps it running."""
    kind = "g5.12xlarge"
    gpus = {"pattern": "idle", "gpus": [{"index": 3, "pattern": "none"}]}
    with LocalStack(
        world(instance(TARGET, kind, gpus, **IDLE_HOST)), sink=sink, mode="remediate", until=LATER
    ) as stack:
        backfill(TARGET, kind, 3, value)

        results = sweeps(stack, tmp_path, NOW, LATER)
        actions = decided(results, TARGET)
        assert not any(action in ("mark", "stop") for _, action in actions), actions
        assert all(reason != "gpu_idle" for reason, _ in actions)  # no idle verdict
        assert ec2_instance(TARGET)["State"]["Name"] == "running"
        assert MARK_TAG_KEY not in ec2_tags(TARGET)
        told = slack_text(results)
        assert "out of range" in told and f"GPU 3: {value:g}%" in told
        findings = [f for r in results for f in r.findings if f["resource_id"] == TARGET]
        assert findings and all(f["reason"] != "gpu_starved" for f in findings)  # no advice built on it


# -- what is idle is still stopped ---------------------------------------------------------------------------------


def test_a_genuinely_idle_instance_is_marked_then_stopped_with_ec2s_own_metrics_in_the_message(
    sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    """GPUs idle (the agent's series, minute by minute) and EC2's own CPU and network idle (the world seeds an idle
    host for an instance whose GPUs idle): marked, then stopped. EC2's metrics are read in the sweep's one
    batched evidence read, whatever the number of instances."""
    fleet = [instance(f"i-0e71de0ce000000b{n}", "g6e.xlarge", {"pattern": "idle"}) for n in range(1, 5)] + [
        instance("i-0e71de0ce000000c1", "g6e.xlarge", {"pattern": "busy"})
    ]
    idle_ids = [spec["id"] for spec in fleet[:4]]
    with LocalStack(world(*fleet), sink=sink, mode="remediate", until=LATER) as stack:
        clients.calls.clear()
        at_noon = sweeps(stack, tmp_path, NOW)
        reads = clients.calls[("cloudwatch", "GetMetricData")]
        listed = clients.calls[("cloudwatch", "ListMetrics")]
        assert (listed, reads) == (
            1,
            2,
        )  # the GPU series, then CPU and network of the idle ones: never one each
        for instance_id in idle_ids:
            assert decided(at_noon, instance_id) == [("gpu_idle", "mark")]
        [finding] = [f for f in at_noon[0].findings if f["resource_id"] == idle_ids[0]]
        assert "EC2's own metrics agree: CPU averaged 1.0% and network 0.0" in finding["summary"]
        assert finding["evidence"]["ec2_metrics"] == "agrees"
        assert finding["evidence"]["ec2_cpu_percent"] == pytest.approx(1.0)
        assert finding["evidence"]["ec2_network_mb_per_minute"] == pytest.approx(0.055)

        later = sweeps(stack, tmp_path, LATER)
        for instance_id in idle_ids:
            assert decided(later, instance_id) == [("gpu_idle", "stop")]
            assert ec2_instance(instance_id)["State"]["Name"] in ("stopping", "stopped")
