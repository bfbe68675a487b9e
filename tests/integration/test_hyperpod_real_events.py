"""HyperPod as AWS sends it (issue 39), on the local stack with the HyperPod calls served by moto: AWS's Cluster
State Change example carries no ``Tags`` and its Node Health example ``Tags: {}``, so the team is read from the
cluster's own tags (one ListTags); an event with tags is routed by them without a call; and a flexible instance
group (``InstanceRequirements``, no single ``InstanceType``) is judged by its nodes' own types, not skipped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from costguard.aws import clients
from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.pricing import bundled_table
from tests.conftest import EVENTS

ACCOUNT = "123456789012"
CLUSTER_ARN = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster/llm-pretrain-hp"  # moto's: the name, not an id
SWEEP = EVENTS / "schedule-hyperpod-sweep.json"


def price(instance_type: str) -> float:
    return float(bundled_table()["sagemaker"][instance_type])


def aws_state_change() -> dict[str, Any]:
    """AWS's 'SageMaker HyperPod Cluster State Change' example (SageMaker Developer Guide, 'Events that Amazon
    SageMaker AI sends to Amazon EventBridge'), in the demo world's account and cluster, Failed: no ``Tags``."""
    return {
        "version": "0",
        "id": "0bd4a141-0a02-9d8a-f977-3924c3fb2601",
        "detail-type": "SageMaker HyperPod Cluster State Change",
        "source": "aws.sagemaker",
        "account": ACCOUNT,
        "time": "2026-11-20T11:40:00Z",
        "region": "us-east-1",
        "resources": [CLUSTER_ARN],
        "detail": {
            "ClusterArn": CLUSTER_ARN,
            "ClusterName": "llm-pretrain-hp",
            "ClusterStatus": "Failed",
            "CreationTime": 1795168800000,
            "FailureMessage": "",
            "InstanceGroups": [
                {
                    "CurrentCount": 3,
                    "ExecutionRole": f"arn:aws:iam::{ACCOUNT}:role/sagemaker-hyperpod-ClusterExecutionRole",
                    "InstanceGroupName": "workers",
                    "InstanceStorageConfigs": [{}],
                    "InstanceType": "ml.p5.48xlarge",
                    "LifeCycleConfig": {
                        "OnCreate": "on_create.sh",
                        "SourceS3Uri": "s3://sagemaker-hyperpod//LifeCycleScripts/base-config/",
                    },
                    "OnStartDeepHealthChecks": ["InstanceStress", "InstanceConnectivity"],
                    "OverrideVpcConfig": {"SecurityGroupIds": ["SecurityGroupId1"], "Subnets": ["Subnet1"]},
                    "Status": "Failed",
                    "TargetCount": 4,
                    "ThreadsPerCore": 2,
                }
            ],
        },
    }


def aws_node_health(tags: dict[str, str]) -> dict[str, Any]:
    """AWS's 'SageMaker HyperPod Cluster Node Health Event' example (../shared/aws-samples/
    sagemaker_hyperpod_node_health_event_awsdocs.json) in the demo world's account, cluster and node."""
    return {
        "version": "0",
        "id": "0bd4a141-0a02-9d8a-f977-3924c3fb2602",
        "detail-type": "SageMaker HyperPod Cluster Node Health Event",
        "source": "aws.sagemaker",
        "account": ACCOUNT,
        "time": "2026-11-20T11:55:12Z",
        "region": "us-east-1",
        "resources": [CLUSTER_ARN],
        "detail": {
            "ClusterName": "llm-pretrain-hp",
            "ClusterArn": CLUSTER_ARN,
            "InstanceId": "i-0b7e5f0000000a001",
            "Tags": tags,
            "HealthSummary": {
                "HealthStatus": "Unhealthy",
                "HealthStatusReason": "HyperPod Health Monitoring Agent (HMA) has detected fault type "
                "NvidiaErrorTerminate on this node and is unhealthy.",
                "RepairAction": "None",
                "Recommendation": "Please Replace the Faulty Node.",
            },
        },
    }


def written(tmp_path: Path, name: str, event: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(event))
    return path


def routes(sink: SlackSink) -> dict[str, str]:
    return {team: sink.url_for(team) for team in ("platform", "ml-research")}


def test_a_cluster_state_change_without_tags_goes_to_the_team_its_cluster_is_tagged_with(
    world: World, sink: SlackSink, tmp_path: Path
) -> None:
    path = written(tmp_path, "state.json", aws_state_change())
    with LocalStack(world, sink=sink, routes=routes(sink)) as stack:
        [result] = replay(stack, [path])
        calls = dict(clients.calls)
    assert result.ok, result.error
    [decision] = result.decisions
    assert decision["reason"] == "hyperpod_cluster_failed"
    assert decision["hourly_usd"] == round(3 * price("ml.p5.48xlarge"), 4)
    # llm-pretrain-hp's team tag (worlds/demo.yaml), read with ListTags
    assert [m["channel"] for m in result.slack] == ["platform"]
    assert calls.get(("sagemaker", "ListTags")) == 1


def test_a_node_health_event_with_empty_tags_goes_to_the_team_its_cluster_is_tagged_with(
    world: World, sink: SlackSink, tmp_path: Path
) -> None:
    path = written(tmp_path, "node.json", aws_node_health({}))
    with LocalStack(world, sink=sink, routes=routes(sink)) as stack:
        [result] = replay(stack, [path])
        calls = dict(clients.calls)
    assert result.ok, result.error
    [decision] = result.decisions
    assert decision["reason"] == "hyperpod_node_unhealthy"
    assert decision["hourly_usd"] == price("ml.p5.48xlarge")  # DescribeClusterNode, served by moto
    assert [m["channel"] for m in result.slack] == ["platform"]
    assert {k: v for k, v in calls.items() if k[0] == "sagemaker"} == {
        ("sagemaker", "DescribeClusterNode"): 1,
        ("sagemaker", "ListTags"): 1,
    }


def test_an_event_with_tags_is_routed_by_them_without_reading_the_clusters(
    world: World, sink: SlackSink, tmp_path: Path
) -> None:
    path = written(tmp_path, "node.json", aws_node_health({"team": "ml-research"}))
    with LocalStack(world, sink=sink, routes=routes(sink)) as stack:
        [result] = replay(stack, [path])
        calls = dict(clients.calls)
    assert result.ok, result.error
    assert [m["channel"] for m in result.slack] == ["ml-research"]
    assert ("sagemaker", "ListTags") not in calls


def flexible_world(world: World) -> World:
    cluster = {
        "name": "flex-hp",
        "eks_cluster": "flex-eks",
        "tags": {"team": "search"},
        "instance_groups": [
            {
                "name": "flex-workers",
                "instance_type": "ml.g5.12xlarge",  # made flexible in moto below: the world names one type
                "count": 3,
                "node_ids": ["i-0f1e000000000f001", "i-0f1e000000000f002", "i-0f1e000000000f003"],
                "gpu_percent": 0.5,
                "node_gpu_percent": {"i-0f1e000000000f003": 64},
            }
        ],
    }
    return World.model_validate(
        {"now": world.now, "hyperpod_clusters": [cluster], "endpoints": [], "instances": []}
    )


def make_flexible(name: str, group: str, types: dict[str, str]) -> None:
    """Turn a group moto holds into a flexible one as DescribeCluster answers it: InstanceRequirements and
    InstanceTypeDetails, no InstanceType; each node of ``types`` runs that type."""
    from moto.sagemaker.models import sagemaker_backends

    cluster = sagemaker_backends[ACCOUNT]["us-east-1"].clusters[name]
    spec = next(g for g in cluster.instance_groups if g["InstanceGroupName"] == group)
    spec.pop("InstanceType")
    kinds = sorted({*types.values(), spec_type := "ml.g5.12xlarge"})
    spec["InstanceRequirements"] = {"CurrentInstanceTypes": kinds, "DesiredInstanceTypes": kinds}
    for node_id, instance_type in types.items():
        cluster.nodes[node_id].instance_type = instance_type
    counts = {t: sum(1 for n in cluster.nodes.values() if n.instance_type == t) for t in kinds}
    spec["InstanceTypeDetails"] = [{"InstanceType": t, "CurrentCount": c} for t, c in counts.items()]
    assert spec_type in counts


def test_a_flexible_instance_group_is_judged_by_its_nodes_types_not_skipped(
    world: World, sink: SlackSink
) -> None:
    with LocalStack(flexible_world(world), sink=sink) as stack:
        make_flexible("flex-hp", "flex-workers", {"i-0f1e000000000f002": "ml.g5.24xlarge"})
        [result] = replay(stack, [SWEEP])
    assert result.ok, result.error
    [finding] = result.findings
    assert finding["reason"] == "hyperpod_idle" and finding["resource_id"] == "flex-hp/flex-workers"
    assert finding["evidence"]["idle_nodes"] == ["i-0f1e000000000f001", "i-0f1e000000000f002"]
    assert finding["hourly_usd"] == round(price("ml.g5.12xlarge") + price("ml.g5.24xlarge"), 4)
    assert "flexible instance group" in finding["summary"]
    [message] = result.slack
    assert "flex-workers" in json.dumps(message)
