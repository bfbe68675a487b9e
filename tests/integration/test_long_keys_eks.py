"""One long name does not blind the state table (issue 39): an EKS workload whose name is 10,000 characters (the
Kubernetes API server checks an ownerReference name only for being non-empty) is marked once, left alone in its
grace period and then scaled as any other, on the embedded stack, whose DynamoDB refuses a key over 2,048 bytes
on every call as DynamoDB does (costguard/local/dynamo_limits.py)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard import clock
from costguard.act.eks import SCALED_PREFIX
from costguard.aws import clients
from costguard.aws.dynamo import table_id
from costguard.local.eks_world import EksCluster, EksNamespace, EksNode, EksWorkload
from costguard.local.sink import SlackSink
from costguard.local.stack import TABLE, LocalStack
from costguard.local.world import World, load_world
from tests.conftest import DEMO_WORLD, ROOT

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
LONG = "x" * 10_000  # the Deployment's name, so its ReplicaSet's (the pods' ownerReference) is longer still
LONG_ID = f"ml-platform/serving/Deployment/{LONG}"
SQUATTER_ID = "ml-platform/serving/Deployment/llm-squatter"
BLINDED = ("mutes unavailable", "shadow marks unreadable", "mark records unreadable", "repeat gate")


def world() -> World:
    demo = load_world(DEMO_WORLD)
    cluster = EksCluster(
        name="ml-platform",
        nodes=[EksNode(name="gpu-a", instance_type="g5.12xlarge", instance_id="i-0e5a000000000a001")],
        namespaces=[
            EksNamespace(name="serving", labels={"team": "ml-serving", "costguard.io/scale-to-zero": "true"})
        ],
        workloads=[
            EksWorkload(
                kind="Deployment", name=LONG, namespace="serving", nodes=["gpu-a"], gpu_pattern="idle"
            ),
            EksWorkload(
                kind="Deployment",
                name="llm-squatter",
                namespace="serving",
                replicas=2,
                nodes=["gpu-a"],
                gpu_pattern="idle",
            ),
        ],
    )
    return World(account=demo.account, region=demo.region, now=demo.now, eks_clusters=[cluster])


def sweep(stack: LocalStack, at: datetime) -> dict[str, Any]:
    event = json.loads(Path(ROOT / "events" / "schedule-eks-gpu-sweep-1200.json").read_text())
    event["time"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    event["id"] = f"eks-sweep-{at:%H%M}"
    clock.freeze(at)
    result: dict[str, Any] = stack.invoke("EksGpuFunction", event).result
    stack.drain()
    return result


def actions(result: dict[str, Any]) -> dict[str, str]:
    return {d["resource_id"]: d["action"] for d in result["decisions"]}


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@dataclass
class Run:
    first: dict[str, Any]
    after: dict[str, Any]
    replicas: dict[str, int]
    record: dict[str, Any] | None  # the long-named workload's scale record, read back by its key
    warnings: list[str]


@pytest.fixture(scope="module")
def run() -> Iterator[Run]:
    """Sweeps at 12:00 and 12:20 in remediate mode (a 15-minute grace period), on one stack."""
    import slack_sdk.http_retry.builtin_handlers as builtin
    import slack_sdk.http_retry.handler as handler

    captured = Captured()
    root = logging.getLogger()
    root.addHandler(captured)
    try:
        with pytest.MonkeyPatch.context() as patch, SlackSink() as sink:
            patch.setattr(builtin.time, "sleep", lambda _: None)
            patch.setattr(handler.time, "sleep", lambda _: None)
            with LocalStack(world(), sink=sink, mode="remediate", until=NOW + timedelta(hours=1)) as stack:
                first = sweep(stack, NOW)
                after = sweep(stack, NOW + timedelta(minutes=20))
                replicas = {
                    name: stack.kube.replicas("ml-platform", "Deployment", "serving", name)
                    for name in (LONG, "llm-squatter")
                }
                key = table_id(SCALED_PREFIX, f"123456789012/us-east-1/eks_workload/{LONG_ID}")
                record = (
                    clients.client("dynamodb").get_item(TableName=TABLE, Key={"id": {"S": key}}).get("Item")
                )
    finally:
        root.removeHandler(captured)
    yield Run(first, after, replicas, record, captured.messages)


def test_a_workload_named_by_10000_characters_is_marked_once_then_decided_as_any_other(run: Run) -> None:
    assert actions(run.first)[LONG_ID] == "mark"
    assert actions(run.first)[SQUATTER_ID] == "mark"
    # Its grace period is over: its mark was read back, so it is stopped, not marked again.
    assert actions(run.after)[LONG_ID] == "stop"
    assert actions(run.after)[SQUATTER_ID] == "stop"
    assert run.replicas["llm-squatter"] == 0


def test_no_read_or_write_of_the_state_table_is_refused(run: Run) -> None:
    assert [m for m in run.warnings if m.startswith(BLINDED)] == []


def test_it_is_scaled_to_zero_with_its_replicas_recorded(run: Run) -> None:
    assert "remediation failed" not in run.warnings
    assert run.replicas[LONG] == 0
    assert run.record is not None
    assert run.record["previous_replicas"] == {"N": "1"}
