"""Counted reads of the EKS GPU sweep on a 100-node, 800-pod cluster: the Kubernetes API pages 500 items a call,
and the GPU series are read at the batching floor the EC2 sweep meets, ceil(series / 500) GetMetricData calls.
The series are answered in-process (local/metric_responder.py); the Kubernetes API by the local responder
through the real client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from costguard import clock
from costguard.aws import clients
from costguard.local import eks_seed
from costguard.local.eks_world import EksCluster, EksNamespace, EksNode, EksWorkload, pods_of
from costguard.local.metric_responder import Dimensions, MetricResponder
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from tests.conftest import ROOT

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
NODES, PODS_PER_NODE = 100, 8


def big_cluster() -> EksCluster:
    """100 p4d.24xlarge nodes, each running one Deployment of 8 single-GPU pods: 800 pods, 800 GPU series.
    Every tenth Deployment idles."""
    nodes = [
        EksNode(name=f"gpu-{n:03d}", instance_type="p4d.24xlarge", instance_id=f"i-0b16{n:013x}")
        for n in range(NODES)
    ]
    workloads = [
        EksWorkload(
            kind="Deployment",
            name=f"svc-{n:03d}",
            namespace=f"team-{n % 10}",
            replicas=PODS_PER_NODE,
            nodes=[f"gpu-{n:03d}"],
            gpu_pattern="idle" if n % 10 == 0 else "busy",
        )
        for n in range(NODES)
    ]
    namespaces = [EksNamespace(name=f"team-{n}", labels={"team": f"team-{n}"}) for n in range(10)]
    return EksCluster(name="big", nodes=nodes, namespaces=namespaces, workloads=workloads)


def responder(cluster: EksCluster) -> MetricResponder:
    metrics: list[tuple[str, str, Dimensions]] = []
    idle: set[str] = set()
    for workload in cluster.workloads:
        for pod, _, _, _ in pods_of(workload):
            dims = (
                ("ClusterName", cluster.name),
                ("FullPodName", pod),
                ("GpuDevice", "nvidia0"),
                ("Namespace", workload.namespace),
                ("PodName", workload.name),
            )
            metrics.append(("ContainerInsights", "pod_gpu_utilization", dims))
            if workload.gpu_pattern == "idle":
                idle.add(pod)

    def values(namespace: str, metric: str, dims: Dimensions, times: list[datetime]) -> list[float | None]:
        level = 1.0 if dict(dims).get("FullPodName") in idle else 90.0
        return [level for _ in times]

    return MetricResponder(metrics, values)


@pytest.fixture
def stack(sink: SlackSink, sleeps: list[float], monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalStack]:
    # The series are answered in-process below: none is stored in the embedded CloudWatch.
    monkeypatch.setattr(eks_seed, "publish_cluster_metrics", lambda world, until=None: None)
    world = World(now=NOW, eks_clusters=[big_cluster()])
    with LocalStack(world, sink=sink) as running:
        responder(world.eks_clusters[0]).install(clients.cloudwatch(world.region))
        yield running


def test_a_100_node_800_pod_cluster_is_read_at_the_batching_floor(stack: LocalStack) -> None:
    event = json.loads(Path(ROOT / "events" / "schedule-eks-gpu-sweep-1200.json").read_text())
    clock.freeze(NOW)
    clients.calls.clear()
    result = stack.invoke("EksGpuFunction", event).result

    idle = {f["resource_id"] for f in result["findings"] if f["reason"] == "pod_gpu_idle"}
    assert len(idle) == NODES // 10  # every tenth Deployment, all its 8 pods idle

    # AWS: one ListClusters, one DescribeCluster; 800 per-GPU pod series listed 500 to a page and read 500 to
    # a call (no GPU node is free of GPU pods: no node series is read).
    assert clients.calls[("eks", "ListClusters")] == 1
    assert clients.calls[("eks", "DescribeCluster")] == 1
    assert clients.calls[("cloudwatch", "ListMetrics")] == 2
    assert clients.calls[("cloudwatch", "GetMetricData")] == 2  # ceil(800 / 500)
    assert clients.calls[("ec2", "DescribeInstanceTypes")] == 0  # the nodes' allocatable says their GPUs
    # Kubernetes: five list calls, the pods in two pages of 500; no write.
    assert dict(stack.kube.calls) == {
        ("big", "GET", "api/v1/nodes"): 1,
        ("big", "GET", "api/v1/pods"): 2,
        ("big", "GET", "api/v1/namespaces"): 1,
        ("big", "GET", "apis/apps/v1/replicasets"): 1,
        ("big", "GET", "apis/apps/v1/statefulsets"): 1,
    }
