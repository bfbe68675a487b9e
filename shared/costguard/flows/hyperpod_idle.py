"""SageMaker HyperPod instance groups whose GPUs stayed idle (``hyperpod_idle``): the scheduled sweep, told with the
scale-down to make. Notify only: nothing here resizes a cluster or deletes a node.

Each node's GPUs are read as the project reads GPUs elsewhere, each hour's Maximum per series found by ListMetrics:
on a cluster EKS orchestrates, Container Insights' ``node_gpu_utilization`` under its EKS cluster's name (per GPU,
``GpuDevice``, where published; else the node's own series), as for EKS nodes (flows/eks.py); on a Slurm cluster,
the CloudWatch agent's ``nvidia_smi_utilization_gpu`` by ``InstanceId`` (the agent's append_dimensions), as for EC2
instances.

Each node is judged and priced by its own instance type, as ListClusterNodes names it: a flexible instance group
(``InstanceRequirements``, several types and no single ``InstanceType``) is judged like any other, at no extra call.

Reads per region: ceil(clusters / 100) ListClusters, one DescribeCluster per working cluster, ceil(nodes / 100)
ListClusterNodes per cluster (aws/hyperpod.py); DescribeInstanceTypes once per type per process; one ListMetrics walk
per EKS-orchestrated cluster and one for all the Slurm clusters' nodes; ceil(queries / 500) GetMetricData calls over
``COSTGUARD_HYPERPOD_IDLE_HOURS``; one ListTags per cluster with a finding.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta

from costguard.aws import clients, hyperpod, inventory, metrics
from costguard.aws.hyperpod import Cluster, Node, hyperpod_clusters
from costguard.aws.metrics import GPU_METRIC, GPU_NAMESPACE, GPU_STAT, Dimensions, MetricSet, Query, gpu_index
from costguard.detect.hyperpod_idle import NOT_JUDGED_SLURM_TYPES, NodeUse, idle_group_findings
from costguard.model import Finding
from costguard.observability import logger
from costguard.pipeline import Report
from costguard.runtime import ACT_PERMISSIONS, PRICES_PERMISSIONS, Runtime

NAMESPACE = "ContainerInsights"
NODE_METRIC = "node_gpu_utilization"  # per node (ClusterName, InstanceId, NodeName), per GPU with GpuDevice
HYPERPOD_NODE_PREFIX = "hyperpod-"  # a HyperPod node's Kubernetes name: hyperpod-<instance id>
PERIOD = timedelta(hours=1)
AGENT_SOURCE = f"CloudWatch agent {GPU_METRIC} (InstanceId)"
INSIGHTS_SOURCE = f"Container Insights {NODE_METRIC}"

# The sweep's reads (the clusters, their nodes and tags, the GPU series and type facts), prices and the notices.
SWEEP_PERMISSIONS = (
    hyperpod.SWEEP_PERMISSIONS
    | metrics.READ_PERMISSIONS
    | metrics.LIST_PERMISSIONS
    | inventory.TYPES_PERMISSIONS  # the GPU count of a group's instance type
    | ACT_PERMISSIONS
    | PRICES_PERMISSIONS
)


def handle_sweep(runtime: Runtime, now: datetime, default_region: str, event_id: str | None) -> Report:
    combined = Report()
    for region in runtime.settings.regions or (default_region,):
        combined.extend(evaluate(region, runtime, now, event_id))
    return combined


def evaluate(region: str, runtime: Runtime, now: datetime, event_id: str | None = None) -> Report:
    """Every working cluster of the region: its nodes read, its groups judged, the findings told."""
    adapter = hyperpod_clusters()
    clusters = adapter.working_clusters(region)
    if not clusters:
        return Report()
    nodes = {c.name: adapter.nodes(region, "", c.name) for c in clusters}
    # Every type a group or a node names: a flexible group's nodes (InstanceRequirements) run several.
    types = sorted(
        {g.instance_type for c in clusters for g in c.groups if g.instance_type}
        | {n.instance_type for found in nodes.values() for n in found if n.instance_type}
    )
    _warn_untyped(clusters, nodes)
    accelerators = runtime.reads.sagemaker.instance_accelerators(region, types)
    gpus = {t: a.count for t, a in accelerators.items() if a is not None and a.kind in ("nvidia_gpu", "gpu")}
    watched = {c.name: [n for n in nodes[c.name] if _judged(c, n, gpus)] for c in clusters}
    window = timedelta(hours=runtime.settings.hyperpod_idle_hours)
    queries, sources = node_queries(region, clusters, watched)
    data = (
        runtime.reads.metrics.get_metric_data(region, queries, now - window, now, int(PERIOD.total_seconds()))
        if queries
        else MetricSet()
    )
    prices = {t: runtime.prices.hourly(t, region) for t in types}
    findings: list[Finding] = []
    for cluster in clusters:
        uses = node_uses(cluster, watched[cluster.name], data, sources, gpus)
        account = _account_of(cluster) or runtime.settings.home_account
        found = idle_group_findings(
            cluster,
            nodes[cluster.name],
            uses,
            prices,
            gpus,
            account=account,
            region=region,
            tags={},
            idle_percent=runtime.settings.idle_threshold_percent,
            window=window,
            now=now,
            event_id=event_id,
        )
        if found and cluster.arn:
            tags = adapter.tags(region, "", cluster.arn)
            found = [
                f.model_copy(update={"resource": f.resource.model_copy(update={"tags": tags})}) for f in found
            ]
        findings += found
    return runtime.act(findings, now)


def _warn_untyped(clusters: Sequence[Cluster], nodes: dict[str, list[Node]]) -> None:
    """A node of a group with no single instance type (a flexible group) that names none cannot be judged: said."""
    for cluster in clusters:
        untyped = {g.name for g in cluster.groups if not g.instance_type}
        blind = sorted(
            n.instance_id for n in nodes[cluster.name] if n.group in untyped and not n.instance_type
        )
        if blind:
            logger.warning(
                "HyperPod nodes of a flexible instance group name no instance type: not judged",
                extra={"cluster": cluster.name, "nodes": blind},
            )


def _type_of(cluster: Cluster, group: str) -> str | None:
    return next((g.instance_type for g in cluster.groups if g.name == group), None)


def _judged(cluster: Cluster, node: Node, gpus: dict[str, int]) -> bool:
    """A node whose GPUs are read: of a GPU type, in a group that runs jobs (not a Slurm controller or login)."""
    group = next((g for g in cluster.groups if g.name == node.group), None)
    if group is not None and group.slurm_node_type in NOT_JUDGED_SLURM_TYPES:
        return False
    return bool(gpus.get(node.instance_type or _type_of(cluster, node.group) or ""))


def _account_of(cluster: Cluster) -> str:
    parts = (cluster.arn or "").split(":")
    return parts[4] if len(parts) > 5 else ""


def _key(cluster: str, instance_id: str) -> str:
    return f"hyperpod|{cluster}|{instance_id}"


def insights_series(region: str, eks_cluster: str) -> dict[str, list[Dimensions]]:
    """The node_gpu_utilization series of an EKS cluster's nodes, by instance id: one ListMetrics walk of its
    recently active series (500 to a page)."""
    cloudwatch = clients.cloudwatch(region)
    found: dict[str, list[Dimensions]] = defaultdict(list)
    pages = cloudwatch.get_paginator("list_metrics").paginate(
        Namespace=NAMESPACE,
        MetricName=NODE_METRIC,
        Dimensions=[{"Name": "ClusterName", "Value": eks_cluster}],
        RecentlyActive="PT3H",
    )
    for page in pages:
        for metric in page["Metrics"]:
            dims = tuple(sorted((d["Name"], d["Value"]) for d in metric.get("Dimensions", [])))
            named = dict(dims)
            instance = named.get("InstanceId") or named.get("NodeName", "").removeprefix(HYPERPOD_NODE_PREFIX)
            if instance.startswith("i-"):
                found[instance].append(dims)
    return dict(found)


def node_queries(
    region: str, clusters: Sequence[Cluster], watched: dict[str, list[Node]]
) -> tuple[list[Query], dict[str, str]]:
    """One query per GPU series of each watched node (the node's own series where no GPU has one), and what each
    node was read from, by its key."""
    queries: list[Query] = []
    sources: dict[str, str] = {}
    slurm = [(c, n) for c in clusters if not c.eks_cluster for n in watched[c.name]]
    agent = metrics.list_gpu_series(region, [n.instance_id for _, n in slurm]) if slurm else {}
    for cluster, node in slurm:
        key = _key(cluster.name, node.instance_id)
        for dims in agent.get(node.instance_id, []):
            index = gpu_index(key, dims)
            if index is not None:
                queries.append(Query((key, "gpu", index), GPU_NAMESPACE, GPU_METRIC, dims, GPU_STAT))
                sources[key] = AGENT_SOURCE
    for cluster in clusters:
        if not cluster.eks_cluster or not watched[cluster.name]:
            continue
        listed = insights_series(region, cluster.eks_cluster)
        for node in watched[cluster.name]:
            key = _key(cluster.name, node.instance_id)
            series = listed.get(node.instance_id, [])
            devices = sorted({dict(d)["GpuDevice"] for d in series if "GpuDevice" in dict(d)})
            for dims in series:
                device = dict(dims).get("GpuDevice")
                if devices and device is None:
                    continue  # the GPUs' own series say more than the node's
                sub = ("gpu", str(devices.index(device))) if device is not None else ("node", "")
                queries.append(Query((key, *sub), NAMESPACE, NODE_METRIC, dims, GPU_STAT))
                sources[key] = INSIGHTS_SOURCE
    return queries, sources


def node_uses(
    cluster: Cluster, nodes: Sequence[Node], data: MetricSet, sources: dict[str, str], gpus: dict[str, int]
) -> dict[str, NodeUse]:
    """Each node's busiest GPU over the window and the hours it was read in. A node's own series may be the mean
    over its GPUs: its busiest GPU is taken as up to that figure times its GPU count (never called idle on a mean)."""
    uses = {}
    silent = 0
    for node in nodes:
        key = _key(cluster.name, node.instance_id)
        count = gpus.get(node.instance_type or _type_of(cluster, node.group) or "", 1)
        per_gpu = [points for (measure, _), points in data.of(key).items() if measure == "gpu"]
        whole = data.measure(key, "node")
        points = [p for series in per_gpu for p in series]
        values = [v for _, v in points] + [min(100.0, v * count) for _, v in whole]
        hours = {at for at, _ in points} | {at for at, _ in whole}
        uses[node.instance_id] = NodeUse(
            busiest_percent=round(max(values), 2) if values else None,
            hours=len(hours),
            source=sources.get(key, "none"),
        )
        silent += not values
    if silent:
        logger.info("HyperPod nodes publish no GPU series", extra={"cluster": cluster.name, "nodes": silent})
    return uses
