"""SageMaker HyperPod for the local stack: the world's clusters created in moto (5.0.10 and later serves
CreateCluster, DescribeCluster, DescribeClusterNode, ListClusters, ListClusterNodes and ListTags), so the adapter
(aws/hyperpod.py) runs its botocore calls on the embedded AWS, each counted as any call is; and the GPU series the
world's nodes publish.

Where moto's CreateCluster cannot say what the world says, the cluster moto made is set after it (in moto's own
objects, so every call answers the same):
- node ids: moto names a node ``<group>-<n>``, AWS an EC2 instance id; the world's ``node_ids`` replace them, and a
  group has exactly those nodes (moto would make ``InstanceCount``);
- counts and state: moto sets ``TargetCount`` to ``CurrentCount`` and every cluster ``InService``; the world's
  ``target`` and ``status`` are set, each group ``Status`` InService;
- times: moto stamps the wall clock; the world's ``created`` (default 30 days before its now) and each group's
  ``launched`` are set;
- types: moto takes only the ``ml.`` types it lists; another type is created as ``STAND_IN_TYPE`` and set after;
- ``Orchestrator.Eks``: moto's CreateCluster drops it and its DescribeCluster answers none; it is added to the
  answer for a cluster with ``eks_cluster``.
Also unlike AWS: moto's cluster ARN ends in the cluster's name (AWS's in a 12-character id), and a node or cluster it
does not know is a ValidationException (AWS: ResourceNotFound). A flexible instance group (``InstanceRequirements``)
cannot be created in moto (it requires ``InstanceType``); tests set one on moto's objects
(tests/integration/test_hyperpod_real_events.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from costguard.aws.hyperpod import WORKING_STATES
from costguard.local.org import place_client
from costguard.local.seed_metrics import datum, publish
from costguard.local.world import HyperPodCluster, World

CLUSTER_AGE = timedelta(days=30)  # a cluster's default age: older than any idle window
GPU_LOOKBACK = timedelta(hours=48)
GPU_STEP = timedelta(minutes=15)  # the sweep reads hourly maxima: four points an hour do
STAND_IN_TYPE = "ml.g5.xlarge"  # created with this when moto does not take the world's type, then set


def arn_of(region: str, account: str, name: str) -> str:
    """The cluster's ARN as moto makes it (AWS's ends in a 12-character id, not the name)."""
    return f"arn:aws:sagemaker:{region}:{account}:cluster/{name}"


def created_of(world: World, spec: HyperPodCluster) -> datetime:
    return spec.created or world.now - CLUSTER_AGE


def _moto_takes(instance_type: str) -> bool:
    from moto.sagemaker.exceptions import ValidationError
    from moto.sagemaker.models import Cluster as MotoCluster

    try:
        MotoCluster.valid_cluster_node_instance_types(None, instance_type)  # type: ignore[arg-type]
    except ValidationError:
        return False
    return True


def _group_spec(account: str, spec: HyperPodCluster, group: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "InstanceGroupName": group.name,
        "InstanceType": group.instance_type if _moto_takes(group.instance_type) else STAND_IN_TYPE,
        "InstanceCount": group.count,
        "LifeCycleConfig": {
            "SourceS3Uri": f"s3://sagemaker-{spec.name}-lifecycle/",
            "OnCreate": "on_create.sh",
        },
        "ExecutionRole": f"arn:aws:iam::{account}:role/sagemaker-hyperpod-ClusterExecutionRole",
        "ThreadsPerCore": 1,
    }
    if group.slurm_node_type:
        entry["SlurmConfig"] = {"NodeType": group.slurm_node_type}
    return entry


def seed_cluster(world: World, place: World, spec: HyperPodCluster) -> None:
    """Create one of the world's clusters in moto (CreateCluster), then set what CreateCluster cannot say."""
    from moto.sagemaker.models import ClusterNode, sagemaker_backends

    account, region = place.account, place.region
    sagemaker: Any = place_client("sagemaker", account, region)
    sagemaker.create_cluster(
        ClusterName=spec.name,
        InstanceGroups=[_group_spec(account, spec, g) for g in spec.instance_groups],
        Tags=[{"Key": k, "Value": v} for k, v in spec.tags.items()],
    )
    made = sagemaker_backends[account][region].clusters[spec.name]
    made.status = spec.status
    made.creation_time = created_of(world, spec)
    nodes = {}
    for entry, group in zip(made.instance_groups, spec.instance_groups, strict=True):
        entry["InstanceType"] = group.instance_type
        entry["CurrentCount"] = group.count
        entry["TargetCount"] = group.count if group.target is None else group.target
        entry["Status"] = "InService"
        for node_id in group.node_ids:
            node = ClusterNode(
                region_name=region,
                account_id=account,
                cluster_name=spec.name,
                instance_group_name=group.name,
                instance_type=group.instance_type,
                life_cycle_config=entry["LifeCycleConfig"],
                execution_role=entry["ExecutionRole"],
                node_id=node_id,
                threads_per_core=entry["ThreadsPerCore"],
            )
            node.launch_time = group.launched or created_of(world, spec)
            nodes[node_id] = node
    made.nodes = nodes
    if spec.eks_cluster:
        eks = {"Eks": {"ClusterArn": f"arn:aws:eks:{region}:{account}:cluster/{spec.eks_cluster}"}}
        plain = made.describe  # moto's answer has no Orchestrator: this cluster's adds it
        made.describe = lambda: {**plain(), "Orchestrator": eks}  # type: ignore[method-assign]


@contextlib.contextmanager
def world_hyperpod_clusters(world: World) -> Iterator[None]:
    """The world's HyperPod clusters, in every account and region it names, created in the embedded AWS (moto must
    be running). Nothing to undo: they go with moto."""
    for place in world.places():
        for spec in place.hyperpod_clusters:
            seed_cluster(world, place, spec)
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
