"""SageMaker HyperPod clusters and their nodes behind one adapter. moto implements none of these calls, so the
local stack serves this class from the world file (local/hyperpod.py); the real calls are tested with botocore's
Stubber against the SageMaker service model (tests/unit/test_hyperpod_adapter.py)."""

from __future__ import annotations

from typing import Any

from costguard.aws import clients
from costguard.model import HyperPodCluster as Cluster
from costguard.model import HyperPodGroup as Group
from costguard.model import HyperPodNode as Node

__all__ = [
    "READ_PERMISSIONS",
    "Cluster",
    "Group",
    "HyperPodClusters",
    "Node",
    "group_from_api",
    "hyperpod_clusters",
    "node_from_api",
]
from costguard.permissions import needs

# cluster (one DescribeCluster per event that needs its groups), node (one DescribeClusterNode per node event).
READ_PERMISSIONS = needs("sagemaker:DescribeCluster", "sagemaker:DescribeClusterNode")


def group_from_api(item: dict[str, Any]) -> Group:
    """A DescribeCluster InstanceGroups entry (the state-change event carries the same shape)."""
    return Group(
        name=str(item["InstanceGroupName"]),
        instance_type=item.get("InstanceType") or None,
        current=int(item.get("CurrentCount") or 0),
        target=int(item.get("TargetCount") or 0),
        status=item.get("Status") or None,
    )


def node_from_api(details: dict[str, Any]) -> Node:
    status = details.get("InstanceStatus") or {}
    return Node(
        instance_id=str(details["InstanceId"]),
        group=str(details.get("InstanceGroupName") or ""),
        instance_type=details.get("InstanceType") or None,
        status=status.get("Status") if isinstance(status, dict) else None,
    )


class HyperPodClusters:
    """DescribeCluster and DescribeClusterNode (moto has neither)."""

    def cluster(self, region: str, account: str, name: str) -> Cluster:
        sagemaker: Any = clients.client("sagemaker", region, account or None)
        answer = sagemaker.describe_cluster(ClusterName=name)
        return Cluster(
            name=str(answer.get("ClusterName") or name),
            status=str(answer.get("ClusterStatus") or ""),
            groups=tuple(group_from_api(g) for g in answer.get("InstanceGroups", [])),
        )

    def node(self, region: str, account: str, cluster: str, instance_id: str) -> Node:
        sagemaker: Any = clients.client("sagemaker", region, account or None)
        answer = sagemaker.describe_cluster_node(ClusterName=cluster, NodeId=instance_id)
        return node_from_api(answer["NodeDetails"])


def hyperpod_clusters() -> HyperPodClusters:
    return HyperPodClusters()
