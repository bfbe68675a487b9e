"""SageMaker HyperPod for the local stack: moto implements none of the calls behind aws/hyperpod.py, so the
adapter is served from the world file here (DescribeCluster, DescribeClusterNode), each call counted as the
real one would be."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from unittest import mock

from costguard.aws import clients
from costguard.aws.hyperpod import Cluster, Group, HyperPodClusters, Node
from costguard.local.world import HyperPodCluster, World


class LocalHyperPodError(RuntimeError):
    """What SageMaker would answer for a cluster or node it does not know (ResourceNotFound)."""


def _find(world: World, region: str, account: str, name: str) -> HyperPodCluster:
    for place in world.places():
        if place.region == region and place.account == account:
            for spec in place.hyperpod_clusters:
                if spec.name == name:
                    return spec
    raise LocalHyperPodError(f"ResourceNotFound: cluster {name}")


def _count(operation: str) -> None:
    clients.calls[("sagemaker", operation)] += 1  # as botocore's hook counts a real call


@contextlib.contextmanager
def world_hyperpod_clusters(world: World) -> Iterator[None]:
    """Serve the HyperPod adapter from the world."""

    def cluster(self: Any, region: str, account: str, name: str) -> Cluster:
        _count("DescribeCluster")
        spec = _find(world, region, account or world.account, name)
        groups = tuple(
            Group(g.name, g.instance_type, g.count, g.count if g.target is None else g.target, "InService")
            for g in spec.instance_groups
        )
        return Cluster(spec.name, spec.status, groups)

    def node(self: Any, region: str, account: str, cluster_name: str, instance_id: str) -> Node:
        _count("DescribeClusterNode")
        spec = _find(world, region, account or world.account, cluster_name)
        for group in spec.instance_groups:
            if instance_id in group.node_ids:
                return Node(instance_id, group.name, group.instance_type, "Running")
        raise LocalHyperPodError(f"ResourceNotFound: node {instance_id} of cluster {cluster_name}")

    with (
        mock.patch.object(HyperPodClusters, "cluster", cluster),
        mock.patch.object(HyperPodClusters, "node", node),
    ):
        yield
