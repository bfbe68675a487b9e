"""SageMaker HyperPod clusters and their nodes behind one adapter. moto (5.0.10 and later) serves DescribeCluster,
DescribeClusterNode, ListClusters, ListClusterNodes and ListTags: the local stack seeds it with CreateCluster
(local/hyperpod.py) and these calls run on it; the real answers' shapes moto does not produce (a flexible instance
group, the Orchestrator) are tested with botocore's Stubber against the SageMaker service model
(tests/unit/test_hyperpod_adapter.py, test_hyperpod_sweep_adapter.py, test_hyperpod_real.py).

The idle sweep's reads in a region: ceil(clusters / 100) ListClusters, one DescribeCluster per cluster at work,
ceil(nodes / 100) ListClusterNodes per cluster, and one ListTags per cluster it has something to say about. An
event whose ``Tags`` are missing or empty (AWS's own examples: the Cluster State Change carries none, the Node
Health Event ``{}``; a Cluster Event has no such field) costs one ListTags, by the cluster's ARN. Tags are read once
per cluster per adapter, and a handler makes one adapter per invocation: never kept across invocations."""

from __future__ import annotations

from typing import Any

from costguard.aws import clients
from costguard.detect.hyperpod import (
    FlexibleGroup,
    flexible_group_of,
    flexible_types,
    hyperpod_node_of,
    provider_instance_id,
    type_counts,
)
from costguard.model import HyperPodCluster as Cluster
from costguard.model import HyperPodGroup as Group
from costguard.model import HyperPodNode as Node

__all__ = [
    "READ_PERMISSIONS",
    "SWEEP_PERMISSIONS",
    "WORKING_STATES",
    "Cluster",
    "FlexibleGroup",
    "Group",
    "HyperPodClusters",
    "Node",
    "flexible_types",
    "group_from_api",
    "hyperpod_clusters",
    "hyperpod_node_of",
    "node_from_api",
    "provider_instance_id",
    "type_counts",
]
from costguard.permissions import needs

# cluster (one DescribeCluster per event that needs its groups), node (one DescribeClusterNode per node event),
# tags (one ListTags per event that carries none).
READ_PERMISSIONS = needs("sagemaker:DescribeCluster", "sagemaker:DescribeClusterNode", "sagemaker:ListTags")
# clusters, nodes and tags: the idle sweep's (flows/hyperpod_idle.py).
SWEEP_PERMISSIONS = needs(
    "sagemaker:ListClusters", "sagemaker:DescribeCluster", "sagemaker:ListClusterNodes", "sagemaker:ListTags"
)
LIST_PAGE = 100  # ListClusters' and ListClusterNodes' largest page
# The states in which a cluster's nodes run and bill, and its groups can be scaled.
WORKING_STATES = frozenset({"InService", "Updating", "SystemUpdating"})


def group_from_api(item: dict[str, Any]) -> Group:
    """A DescribeCluster InstanceGroups entry (the state-change event carries the same shape). A flexible group
    (``InstanceRequirements``, no single ``InstanceType``) is a FlexibleGroup: the types it may run and how many of
    each it runs (``InstanceTypeDetails``)."""
    slurm = item.get("SlurmConfig") or {}
    group = Group(
        name=str(item["InstanceGroupName"]),
        instance_type=item.get("InstanceType") or None,
        current=int(item.get("CurrentCount") or 0),
        target=int(item.get("TargetCount") or 0),
        status=item.get("Status") or None,
        slurm_node_type=slurm.get("NodeType") if isinstance(slurm, dict) else None,
    )
    return flexible_group_of(group, item)


def node_from_api(details: dict[str, Any]) -> Node:
    """A DescribeClusterNode NodeDetails, or a ListClusterNodes ClusterNodeSummaries entry (the same fields)."""
    status = details.get("InstanceStatus") or {}
    return Node(
        instance_id=str(details["InstanceId"]),
        group=str(details.get("InstanceGroupName") or ""),
        instance_type=details.get("InstanceType") or None,
        status=status.get("Status") if isinstance(status, dict) else None,
        launched=details.get("LaunchTime"),
    )


def eks_cluster_name(described: dict[str, Any]) -> str | None:
    """The EKS cluster orchestrating a HyperPod cluster (``Orchestrator.Eks.ClusterArn``'s name); None: Slurm."""
    arn = str(((described.get("Orchestrator") or {}).get("Eks") or {}).get("ClusterArn") or "")
    return arn.rsplit("/", 1)[-1] or None


def _pages(call: Any, key: str, **request: Any) -> list[dict[str, Any]]:
    """Every item of a list call, following NextToken, LIST_PAGE to a page."""
    items: list[dict[str, Any]] = []
    while True:
        answer = call(MaxResults=LIST_PAGE, **request)
        items += answer.get(key, [])
        token = answer.get("NextToken")
        if not token:
            return items
        request["NextToken"] = token


class HyperPodClusters:
    """DescribeCluster and DescribeClusterNode, and the sweep's ListClusters, ListClusterNodes and ListTags. One per
    invocation: it keeps the tags it read (``tags``) for as long as it lives."""

    def __init__(self) -> None:
        self._tags: dict[tuple[str, str], dict[str, str]] = {}

    def cluster(self, region: str, account: str, name: str) -> Cluster:
        sagemaker: Any = clients.client("sagemaker", region, account or None)
        answer = sagemaker.describe_cluster(ClusterName=name)
        return Cluster(
            name=str(answer.get("ClusterName") or name),
            status=str(answer.get("ClusterStatus") or ""),
            groups=tuple(group_from_api(g) for g in answer.get("InstanceGroups", [])),
            arn=answer.get("ClusterArn") or None,
            created=answer.get("CreationTime"),
            eks_cluster=eks_cluster_name(answer),
        )

    def working_clusters(self, region: str, account: str = "") -> list[Cluster]:
        """Every cluster of the region whose nodes run (WORKING_STATES), described: one ListClusters per 100
        clusters, one DescribeCluster per working one."""
        sagemaker: Any = clients.client("sagemaker", region, account or None)
        summaries = _pages(sagemaker.list_clusters, "ClusterSummaries")
        return [
            self.cluster(region, account, str(s["ClusterName"]))
            for s in summaries
            if s.get("ClusterStatus") in WORKING_STATES
        ]

    def nodes(self, region: str, account: str, cluster: str) -> list[Node]:
        """A cluster's nodes: one ListClusterNodes per 100."""
        sagemaker: Any = clients.client("sagemaker", region, account or None)
        found = _pages(sagemaker.list_cluster_nodes, "ClusterNodeSummaries", ClusterName=cluster)
        return [node_from_api(n) for n in found]

    def tags(self, region: str, account: str, arn: str) -> dict[str, str]:
        """A cluster's tags (its team, its owner), by its ARN: one ListTags per 100 tags, the first time this
        adapter is asked for them."""
        key = (account, arn)
        if key not in self._tags:
            sagemaker: Any = clients.client("sagemaker", region, account or None)
            found = _pages(sagemaker.list_tags, "Tags", ResourceArn=arn)
            self._tags[key] = {t["Key"]: t["Value"] for t in found}
        return dict(self._tags[key])

    def node(self, region: str, account: str, cluster: str, instance_id: str) -> Node:
        sagemaker: Any = clients.client("sagemaker", region, account or None)
        answer = sagemaker.describe_cluster_node(ClusterName=cluster, NodeId=instance_id)
        return node_from_api(answer["NodeDetails"])


def hyperpod_clusters() -> HyperPodClusters:
    return HyperPodClusters()
