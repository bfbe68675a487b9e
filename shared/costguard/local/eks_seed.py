"""A world's EKS clusters in the embedded AWS: the clusters in moto's EKS (their endpoints the local Kubernetes
API, local/kube_responder.py) and the Container Insights series their GPU pods and nodes publish."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from costguard.local.eks_world import EksCluster, pods_of
from costguard.local.kube_responder import KubeResponder
from costguard.local.org import place_client
from costguard.local.seed_metrics import datum, publish
from costguard.local.world import GpuMetrics, World, gpu_series

NAMESPACE = "ContainerInsights"
LOOKBACK_MINUTES = 180


def seed_clusters(world: World, responder: KubeResponder) -> None:
    """Create the world's clusters in moto's EKS, each with the responder's endpoint for it."""
    if not world.eks_clusters:
        return
    from moto.eks.models import eks_backends  # the embedded AWS only

    eks: Any = place_client("eks", world.account, world.region)
    backend = eks_backends[world.account][world.region]
    for cluster in world.eks_clusters:
        eks.create_cluster(
            name=cluster.name,
            roleArn=f"arn:aws:iam::{world.account}:role/{cluster.name}-cluster",
            resourcesVpcConfig={
                "subnetIds": ["subnet-0a1b2c3d"],
                "endpointPublicAccess": cluster.reachable != "private",
                "endpointPrivateAccess": True,
            },
            accessConfig={"authenticationMode": "API_AND_CONFIG_MAP"},
        )
        backend.clusters[cluster.name].endpoint = responder.endpoint(cluster.name)


def publish_cluster_metrics(world: World, until: datetime | None = None) -> None:
    """pod_gpu_utilization per pod and GPU, node_gpu_reserved_capacity per GPU node, every minute the pods ran."""
    batch: list[dict[str, Any]] = []
    for cluster in world.eks_clusters:
        batch += cluster_data(cluster, world.now, until)
    if batch:
        publish(world.account, world.region, NAMESPACE, batch)


def cluster_data(cluster: EksCluster, now: datetime, until: datetime | None = None) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = []
    requested: dict[str, int] = {}
    for workload in cluster.workloads:
        lookback = min(LOOKBACK_MINUTES, workload.running_minutes)
        if workload.gpus_per_pod == 0 or lookback < 1:
            continue
        metrics = GpuMetrics(pattern=workload.gpu_pattern, lookback_minutes=max(5, lookback))
        for n, (pod, node, _, _) in enumerate(pods_of(workload)):
            requested[node] = requested.get(node, 0) + workload.gpus_per_pod
            for device in range(workload.gpus_per_pod):
                dims = [
                    {"Name": "ClusterName", "Value": cluster.name},
                    {"Name": "Namespace", "Value": workload.namespace},
                    {"Name": "PodName", "Value": workload.name},
                    {"Name": "FullPodName", "Value": pod},
                    {"Name": "GpuDevice", "Value": f"nvidia{device}"},
                ]
                for at, value in gpu_series(metrics, n * 8 + device, now, until):
                    data.append(datum("pod_gpu_utilization", dims, at, value, "Percent"))
    clock_only = GpuMetrics(pattern="idle", lookback_minutes=LOOKBACK_MINUTES)
    for gpu_node in cluster.nodes:
        if not gpu_node.gpu_count:
            continue
        share = min(requested.get(gpu_node.name, 0), gpu_node.gpu_count) / gpu_node.gpu_count
        reserved = round(100 * share, 2)
        dims = [
            {"Name": "ClusterName", "Value": cluster.name},
            {"Name": "InstanceId", "Value": gpu_node.instance_id},
            {"Name": "NodeName", "Value": gpu_node.name},
        ]
        for at, _ in gpu_series(clock_only, 0, now, until):
            data.append(datum("node_gpu_reserved_capacity", dims, at, reserved, "Percent"))
    return data
