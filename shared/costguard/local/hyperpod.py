"""SageMaker HyperPod for the local stack: moto implements none of the calls behind aws/hyperpod.py, so the
adapter is served from the world file here (DescribeCluster, DescribeClusterNode, ListClusters, ListClusterNodes,
ListTags), each call counted as the real one would be; and the GPU series the world's nodes publish."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any
from unittest import mock

from costguard.aws import clients
from costguard.aws.hyperpod import LIST_PAGE, WORKING_STATES, Cluster, Group, HyperPodClusters, Node
from costguard.local.seed_metrics import datum, publish
from costguard.local.world import HyperPodCluster, World

CLUSTER_AGE = timedelta(days=30)  # a cluster's default age: older than any idle window
GPU_LOOKBACK = timedelta(hours=48)
GPU_STEP = timedelta(minutes=15)  # the sweep reads hourly maxima: four points an hour do


class LocalHyperPodError(RuntimeError):
    """What SageMaker would answer for a cluster or node it does not know (ResourceNotFound)."""


def _find(world: World, region: str, account: str, name: str) -> HyperPodCluster:
    for spec in _clusters(world, region, account):
        if spec.name == name:
            return spec
    raise LocalHyperPodError(f"ResourceNotFound: cluster {name}")


def _clusters(world: World, region: str, account: str) -> list[HyperPodCluster]:
    return [
        spec
        for place in world.places()
        if place.region == region and place.account == account
        for spec in place.hyperpod_clusters
    ]


def _count(operation: str, calls: int = 1) -> None:
    clients.calls[("sagemaker", operation)] += calls  # as botocore's hook counts a real call


def _pages(items: int) -> int:
    return max(1, math.ceil(items / LIST_PAGE))


def arn_of(region: str, account: str, name: str) -> str:
    return f"arn:aws:sagemaker:{region}:{account}:cluster/{name}"


def created_of(world: World, spec: HyperPodCluster) -> datetime:
    return spec.created or world.now - CLUSTER_AGE


def _described(world: World, region: str, account: str, spec: HyperPodCluster) -> Cluster:
    groups = tuple(
        Group(
            g.name,
            g.instance_type,
            g.count,
            g.count if g.target is None else g.target,
            "InService",
            g.slurm_node_type,
        )
        for g in spec.instance_groups
    )
    return Cluster(
        spec.name,
        spec.status,
        groups,
        arn=arn_of(region, account, spec.name),
        created=created_of(world, spec),
        eks_cluster=spec.eks_cluster,
    )


def _nodes(world: World, spec: HyperPodCluster) -> list[Node]:
    return [
        Node(node_id, group.name, group.instance_type, "Running", group.launched or created_of(world, spec))
        for group in spec.instance_groups
        for node_id in group.node_ids
    ]


@contextlib.contextmanager
def world_hyperpod_clusters(world: World) -> Iterator[None]:
    """Serve the HyperPod adapter from the world."""

    def cluster(self: Any, region: str, account: str, name: str) -> Cluster:
        _count("DescribeCluster")
        account = account or world.account
        return _described(world, region, account, _find(world, region, account, name))

    def node(self: Any, region: str, account: str, cluster_name: str, instance_id: str) -> Node:
        _count("DescribeClusterNode")
        spec = _find(world, region, account or world.account, cluster_name)
        for found in _nodes(world, spec):
            if found.instance_id == instance_id:
                return found
        raise LocalHyperPodError(f"ResourceNotFound: node {instance_id} of cluster {cluster_name}")

    def working_clusters(self: Any, region: str, account: str = "") -> list[Cluster]:
        account = account or world.account
        specs = _clusters(world, region, account)
        _count("ListClusters", _pages(len(specs)))
        return [self.cluster(region, account, s.name) for s in specs if s.status in WORKING_STATES]

    def nodes(self: Any, region: str, account: str, cluster_name: str) -> list[Node]:
        found = _nodes(world, _find(world, region, account or world.account, cluster_name))
        _count("ListClusterNodes", _pages(len(found)))
        return found

    def tags(self: Any, region: str, account: str, arn: str) -> dict[str, str]:
        _count("ListTags")
        name = arn.rsplit("/", 1)[-1]
        return dict(_find(world, region, account or world.account, name).tags)

    with (
        mock.patch.object(HyperPodClusters, "cluster", cluster),
        mock.patch.object(HyperPodClusters, "node", node),
        mock.patch.object(HyperPodClusters, "working_clusters", working_clusters),
        mock.patch.object(HyperPodClusters, "nodes", nodes),
        mock.patch.object(HyperPodClusters, "tags", tags),
    ):
        yield


def publish_hyperpod_metrics(world: World, gpus: dict[str, tuple[int, str]], until: datetime) -> None:
    """Each node's GPUs every 15 minutes over the last 48 hours (from its launch) to ``until``: Container Insights'
    node_gpu_utilization per GpuDevice on an EKS-orchestrated cluster, the CloudWatch agent's per-GPU series by
    InstanceId (its append_dimensions) on a Slurm one. ``gpus``: GPU count and model by (ml.) type."""
    batches: dict[str, list[dict[str, Any]]] = {"ContainerInsights": [], "CWAgent": []}
    for spec in world.hyperpod_clusters:
        if spec.status not in WORKING_STATES:
            continue
        for group in spec.instance_groups:
            count, model = gpus.get(group.instance_type, (0, "GPU"))
            if group.gpu_percent is None or not count:
                continue
            start = max(world.now - GPU_LOOKBACK, group.launched or created_of(world, spec))
            times = []
            at = start
            while at <= until:
                times.append(at)
                at += GPU_STEP
            for node_id in group.node_ids:
                percent = group.node_gpu_percent.get(node_id, group.gpu_percent)
                for index in range(count):
                    if spec.eks_cluster:
                        namespace, name = "ContainerInsights", "node_gpu_utilization"
                        dims = [
                            {"Name": "ClusterName", "Value": spec.eks_cluster},
                            {"Name": "InstanceId", "Value": node_id},
                            {"Name": "NodeName", "Value": f"hyperpod-{node_id}"},
                            {"Name": "GpuDevice", "Value": f"nvidia{index}"},
                        ]
                    else:
                        namespace, name = "CWAgent", "nvidia_smi_utilization_gpu"
                        dims = [
                            {"Name": "InstanceId", "Value": node_id},
                            {"Name": "index", "Value": str(index)},
                            {"Name": "name", "Value": model},
                        ]
                    batches[namespace] += [datum(name, dims, t, percent, "Percent") for t in times]
    for namespace, data in batches.items():
        if data:
            publish(world.account, world.region, namespace, data)
