"""gpu_starved through the deployed GPU sweep on the embedded AWS: only GPUs that worked, under-fed, through most
of the window (the pure rule and each of its cases: tests/unit/test_starved_verdict.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from costguard.local.replay import ReplayResult, replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from tests.conftest import EVENTS

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SWEEP = EVENTS / "schedule-gpu-sweep-1200.json"
ACCOUNT, REGION = "123456789012", "us-east-1"
START = NOW - timedelta(minutes=180)
MINUTES = 200  # from three hours before the sweep to past it

BURSTY, RESTARTED, STEADY, ONE_OF_EIGHT, TWO_OF_EIGHT = (f"i-0c0ffee00000005a{n}" for n in range(1, 6))
# The demo world's instances (worlds/demo.yaml).
DEMO_STARVED, DEMO_ONE_GPU_TRAINER = "i-0a1f00000000000a3", "i-0a1f00000000000d2"


def gpu(index: int, values: list[float]) -> dict[str, Any]:
    """One GPU's per-minute values from START."""
    return {"index": index, "runs": [{"start": START, "step_minutes": 1, "values": values}]}


def instance(instance_id: str, instance_type: str, gpus: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": instance_id,
        "type": instance_type,
        "launched": NOW - timedelta(hours=6),
        "gpu_metrics": {"pattern": "idle", "gpus": gpus},  # GPUs without a run of their own idle at 0-2%
    }


def by_resource(result: ReplayResult) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for finding in result.findings:
        found.setdefault(finding["resource_id"], []).append(finding["reason"])
    return found


def test_the_sweep_calls_only_the_steadily_under_fed_instance_data_starved(
    sink: SlackSink, sleeps: list[float]
) -> None:
    bursts = [95.0 if n % 20 < 10 else 0.0 for n in range(MINUTES)]  # 10 minutes on, 10 minutes off
    restarted = [0.0] * 130 + [95.0] * (MINUTES - 130)  # idle until 11:10: 50 idle minutes of the window
    fleet = World.model_validate(
        {
            "account": ACCOUNT,
            "region": REGION,
            "now": NOW,
            "instances": [
                instance(BURSTY, "g5.xlarge", [gpu(0, bursts)]),
                instance(RESTARTED, "g5.12xlarge", [gpu(i, restarted) for i in range(4)]),
                instance(STEADY, "g5.12xlarge", [gpu(i, [40.0] * MINUTES) for i in range(4)]),
                instance(ONE_OF_EIGHT, "p4d.24xlarge", [gpu(0, [90.0] * MINUTES)]),
                instance(TWO_OF_EIGHT, "p4d.24xlarge", [gpu(i, [60.0] * MINUTES) for i in (0, 1)]),
            ],
        }
    )
    with LocalStack(fleet, sink=sink) as stack:
        [result] = replay(stack, [SWEEP])
    assert result.ok, result.error
    found = by_resource(result)
    # The live check: a steady 40% on every GPU is data-starved, and Slack says so.
    assert found == {STEADY: ["gpu_starved"]}
    slack = json.dumps(result.slack)
    assert "Data-starved GPUs" in slack and "waiting for data" in slack
    # Bursts and breaks, a restart after idle, busy GPUs beside idle ones (a sizing matter): never starved.
    for quiet in (BURSTY, RESTARTED, ONE_OF_EIGHT, TWO_OF_EIGHT):
        assert quiet not in slack


def test_the_demo_one_gpu_trainer_that_the_audit_downsizes_is_not_called_data_starved(
    stack: LocalStack,
) -> None:
    # GPU 0 at about 45%, GPUs 1-3 idle: the audit recommends a g5.2xlarge (rightsize_downsize,
    # tests/integration/test_audit.py); the sweep no longer blames its data pipeline.
    [result] = replay(stack, [SWEEP])
    found = by_resource(result)
    assert found[DEMO_STARVED] == ["gpu_starved"]
    assert DEMO_ONE_GPU_TRAINER not in found
