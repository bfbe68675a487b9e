"""``hyperpod_idle`` end to end: the hourly sweep replayed from events/ on the local stack, the idle instance group
reported with its dollars and the scale-down to make, never acted on; its calls counted."""

from __future__ import annotations

import json
from typing import Any

import pytest

from costguard.aws import clients
from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.pricing import bundled_table
from tests.conftest import EVENTS

SWEEP = EVENTS / "schedule-hyperpod-sweep.json"
G5_12X = float(bundled_table()["sagemaker"]["ml.g5.12xlarge"])
IDLE = ["i-0c4d2e0000000e001", "i-0c4d2e0000000e002"]  # rec-eval-hp's eval-workers, the third one busy


def _buttons(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        element
        for message in messages
        for block in message.get("blocks") or []
        if block.get("type") == "actions"
        for element in block.get("elements") or []
    ]


@pytest.mark.parametrize("mode", ["notify", "remediate"])
def test_the_idle_group_is_told_with_its_dollars_and_the_scale_down_and_never_acted_on(
    world: World, sink: SlackSink, mode: str
) -> None:
    with LocalStack(world, sink=sink, mode=mode, slack_app=True) as stack:
        [result] = replay(stack, [SWEEP])
        calls = dict(clients.calls)
    assert result.ok, result.error
    assert result.function == "HyperPodFunction"
    [decision] = result.decisions
    assert (decision["reason"], decision["action"]) == ("hyperpod_idle", "notify")  # in remediate mode too
    assert decision["hourly_usd"] == round(2 * G5_12X, 4)
    [finding] = result.findings
    assert finding["resource_id"] == "rec-eval-hp/eval-workers"
    evidence = finding["evidence"]
    assert evidence["idle_nodes"] == IDLE and evidence["busy_nodes"] == 1
    assert evidence["metric"] == "Container Insights node_gpu_utilization"
    assert evidence["batch_delete_cluster_nodes"] == [
        "aws sagemaker batch-delete-cluster-nodes --cluster-name rec-eval-hp --node-ids " + " ".join(IDLE)
    ]
    [message] = result.slack
    text = json.dumps(message)
    assert "HyperPod instance group with idle GPUs" in text
    assert f"${2 * G5_12X:,.2f}/h" in text and f"${2 * G5_12X * 24:,.2f} over the window" in text
    assert (
        "InstanceCount from 3 to 1" in text
        and "at most 99 nodes each" in text
        and "root volume is lost" in text
    )
    assert "<@U0LOCALLI01>" in text  # the cluster's owner tag, read with ListTags
    # No button that stops, deletes or scales anything.
    assert not [b for b in _buttons(result.slack) if "stop" in json.dumps(b).lower()]
    # The busy Slurm workers and their controller say nothing. The sweep's reads: one ListClusters page, a
    # DescribeCluster and a ListClusterNodes page per cluster, one ListMetrics walk of Container Insights (the
    # EKS-orchestrated cluster) and one of the agent's series (the Slurm one), one GetMetricData call for every
    # node's GPUs, and one ListTags for the cluster it reports.
    assert {k: v for k, v in calls.items() if k[0] in ("sagemaker", "cloudwatch")} == {
        ("sagemaker", "ListClusters"): 1,
        ("sagemaker", "DescribeCluster"): 2,
        ("sagemaker", "ListClusterNodes"): 2,
        ("sagemaker", "ListTags"): 1,
        ("cloudwatch", "ListMetrics"): 2,
        ("cloudwatch", "GetMetricData"): 1,
    }


def test_a_slurm_groups_idle_nodes_are_read_from_the_cloudwatch_agent(world: World, sink: SlackSink) -> None:
    slurm = {
        "name": "vision-hp",
        "instance_groups": [
            {
                "name": "trainers",
                "instance_type": "ml.g5.12xlarge",
                "count": 2,
                "node_ids": ["i-0d5e3f0000000f001", "i-0d5e3f0000000f002"],
                "gpu_percent": 1.0,
            },
            {"name": "fresh", "instance_type": "ml.g5.12xlarge", "count": 1, "gpu_percent": 0.0,
             "node_ids": ["i-0d5e3f0000000f003"], "launched": "2026-11-20T06:00:00Z"},
        ],
    }  # fmt: skip
    small = World.model_validate(
        {"now": world.now, "hyperpod_clusters": [slurm], "endpoints": [], "instances": []}
    )
    with LocalStack(small, sink=sink) as stack:
        [result] = replay(stack, [SWEEP])
    assert result.ok, result.error
    [finding] = result.findings
    assert finding["resource_id"] == "vision-hp/trainers"  # the group launched this morning is too young
    assert finding["evidence"]["metric"] == "CloudWatch agent nvidia_smi_utilization_gpu (InstanceId)"
    assert finding["evidence"]["orchestrator"] == "Slurm"
    assert (
        "all ml.g5.12xlarge nodes" in finding["summary"] and "InstanceCount from 2 to 0" in finding["summary"]
    )
