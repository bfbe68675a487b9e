"""What a sweep and a reconcile cost in API calls over a fleet of 1,000 GPU instances."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from costguard import clock
from costguard.aws import clients
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World

FLEET = 1000
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def fleet_world() -> World:
    return World.model_validate(
        {
            "now": NOW,
            "instances": [
                {
                    "id": f"i-{n:017x}",
                    "type": "g5.xlarge",
                    "gpu_metrics": {"pattern": "idle" if n % 2 else "busy", "lookback_minutes": 10},
                }
                for n in range(FLEET)
            ],
        }
    )


@pytest.fixture(scope="module")
def fleet() -> Iterator[LocalStack]:
    with SlackSink() as sink, LocalStack(fleet_world(), sink=sink) as stack:
        yield stack


def calls(service: str, operation: str) -> int:
    return clients.calls[(service, operation)]


def test_sweep_reads_the_fleet_within_the_batching_floor(fleet: LocalStack) -> None:
    from costguard.flows.gpu import evaluate
    from costguard.runtime import runtime

    clients.calls.clear()
    report = evaluate("us-east-1", runtime(), clock.now())
    gpu_series = FLEET  # one GPU per g5.xlarge
    queries = gpu_series + 2 * FLEET  # plus CPU and network per instance
    assert calls("ec2", "DescribeInstances") <= math.ceil(FLEET / 1000) + 1
    assert calls("cloudwatch", "GetMetricData") <= math.ceil(queries / 500) + 1
    assert calls("cloudwatch", "ListMetrics") <= math.ceil(gpu_series / 500) + 1
    assert calls("ec2", "DescribeInstanceTypes") <= 1
    assert calls("sqs", "SendMessageBatch") <= math.ceil(len(report.notices) / 10) + 1
    # No per-instance calls slipped in.
    assert sum(clients.calls.values()) < 30


def test_reconcile_lists_alarms_in_pages_and_creates_only_missing_ones(fleet: LocalStack) -> None:
    from costguard.flows.gpu import reconcile
    from costguard.runtime import runtime

    clients.calls.clear()
    first = reconcile(runtime(), "us-east-1")
    assert len(first["us-east-1"]["alarms_created"]) == FLEET
    assert calls("ec2", "DescribeInstances") <= math.ceil(FLEET / 1000) + 1
    clients.calls.clear()
    second = reconcile(runtime(), "us-east-1")
    assert second["us-east-1"] == {"alarms_created": [], "alarms_deleted": []}
    assert calls("cloudwatch", "PutMetricAlarm") == 0
    assert calls("cloudwatch", "DescribeAlarms") <= math.ceil(FLEET / 100) + 1
