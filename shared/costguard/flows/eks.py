"""GPUs on EKS: every cluster of the region read through its Kubernetes API, its GPU series read in batched,
Maximum-based GetMetricData calls, the verdicts (detect/eks.py) decided and acted on.

Reads per cluster: ListClusters and DescribeCluster; five Kubernetes list calls (nodes, pods, namespaces,
ReplicaSets, StatefulSets; more only past 500 items); one ListMetrics walk of the cluster's per-GPU pod series
(500 to a page). Then, for the whole region, ceil(queries / 500) GetMetricData calls: one query per GPU of a pod,
one per GPU node that no pod requests a GPU of now.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Any

from costguard.act import eks as act_eks
from costguard.act import shadow
from costguard.act.arming import Sighting
from costguard.act.ledger_book import RETURN_PERMISSIONS as LEDGER_RETURN_PERMISSIONS
from costguard.act.shadow import DynamoShadowMarks, MemoryShadowMarks, ShadowMarks, key_of, read_marks
from costguard.aws import clients, inventory, metrics
from costguard.aws import eks as aws_eks
from costguard.aws.eks import ClusterUnreachable, EksCluster, KubeApi
from costguard.aws.metrics import GPU_STAT, MetricSet, Query
from costguard.detect import eks
from costguard.detect.gpu import PERIOD, GpuReading, Thresholds, read_gpus, thresholds_from
from costguard.model import Finding, Resource, ResourceKind
from costguard.observability import logger
from costguard.pipeline import Report, close_seen_running
from costguard.runtime import ACT_PERMISSIONS, PRICES_PERMISSIONS, Runtime

NAMESPACE = "ContainerInsights"
# Per pod and GPU: dimensions ClusterName, Namespace, PodName, FullPodName, GpuDevice (AWS's metric reference
# also lists ContainerName among them: both sets are read, merged by their Maximum).
POD_METRIC = "pod_gpu_utilization"
# Per node: the percentage of its GPUs that pods request (node_gpu_request / node_gpu_limit); dimensions
# ClusterName, InstanceId, NodeName.
NODE_RESERVED_METRIC = "node_gpu_reserved_capacity"

PERMISSIONS = (
    aws_eks.PERMISSIONS
    | metrics.READ_PERMISSIONS
    | metrics.LIST_PERMISSIONS
    | inventory.TYPES_PERMISSIONS  # GPU count of a node whose allocatable does not say
    | ACT_PERMISSIONS
    | PRICES_PERMISSIONS
    | shadow.PERMISSIONS  # the marks of workloads, in both modes
    | act_eks.PERMISSIONS  # the record of a scale to zero
    | LEDGER_RETURN_PERMISSIONS  # the returns it sees (close_seen_running)
)

Connect = Callable[[EksCluster], Any]


def handle_sweep(
    runtime: Runtime,
    now: datetime,
    default_region: str,
    event_id: str | None,
    connect: Connect | None = None,
) -> Report:
    """``connect``: how a cluster's API is reached (default: the Kubernetes client, in the VPC when deployed so)."""
    connect = connect or partial(KubeApi, in_vpc=runtime.settings.eks_in_vpc)
    combined = Report()
    for region in runtime.settings.regions or (default_region,):
        combined.extend(evaluate(region, runtime, now, event_id=event_id, connect=connect))
    return combined


def marks_store(runtime: Runtime) -> ShadowMarks:
    """Where workloads' marks live: notify mode's store when the runtime has one (the same reads), else the state
    table's (a Kubernetes workload carries no costguard tag in either mode)."""
    if runtime.shadow_marks is not None:
        return runtime.shadow_marks
    if runtime.settings.state_table:
        return DynamoShadowMarks(runtime.settings.state_table)
    return MemoryShadowMarks()


def evaluate(
    region: str,
    runtime: Runtime,
    now: datetime,
    *,
    event_id: str | None = None,
    connect: Connect | None = None,
) -> Report:
    """Read every cluster of the region (one that cannot be read reported, the others swept), judge, act."""
    connect = connect or partial(KubeApi, in_vpc=runtime.settings.eks_in_vpc)
    thresholds = thresholds_from(runtime.settings)
    findings: list[Finding] = []
    views: list[eks.ClusterView] = []
    apis: dict[str, Any] = {}
    clusters = {c.name: c for c in aws_eks.list_clusters(region)}
    for cluster in clusters.values():
        try:
            api = connect(cluster)
            views.append(read_cluster(cluster, api))
        except Exception as error:
            findings.append(unreadable(cluster, error, now, event_id))
            continue
        apis[cluster.name] = api
    store = marks_store(runtime)
    if views:
        failed = census(region, views, runtime, now)
        views = [view for view in views if view.name not in failed]
        judged, unjudged = judge(region, views, runtime, thresholds, now, event_id, store)
        findings += judged
        for name, failure in {**failed, **unjudged}.items():
            apis.pop(name, None)
            findings.append(unreadable(clusters[name], failure, now, event_id))
    records: act_eks.ScaleRecords = (
        act_eks.DynamoScaleRecords(runtime.settings.state_table)
        if runtime.settings.state_table
        else act_eks.MemoryScaleRecords()
    )
    acting = dataclasses.replace(runtime, remediator=act_eks.EksRemediator(apis, store, records))
    return acting.act(findings, now)


def unreadable(cluster: EksCluster, error: Exception, now: datetime, event_id: str | None) -> Finding:
    """The finding of a cluster this sweep could not read or judge: its API refused or failed a call (its status
    and what was being read are in the error), or answered an object costguard cannot read. Told once per cause
    (eks_cluster_unreachable's repeat gate); the region's other clusters are swept all the same."""
    if isinstance(error, ClusterUnreachable):
        cause, detail = error.cause, error.detail
        logger.warning(
            "EKS cluster unreachable", extra={"cluster": cluster.name, "cause": cause, "detail": detail}
        )
    else:
        cause = "bad_answer"
        detail = f"an object it listed could not be read ({type(error).__name__}: {str(error)[:200]})"
        logger.warning(
            "EKS cluster unreadable", extra={"cluster": cluster.name, "cause": cause}, exc_info=True
        )
    return eks.unreachable_finding(
        cluster=cluster.name,
        account=cluster.account,
        region=cluster.region,
        arn=cluster.arn or None,
        cause=cause,
        detail=detail,
        role_arn=None,
        now=now,
        event_id=event_id,
    )


def census(
    region: str, views: Sequence[eks.ClusterView], runtime: Runtime, now: datetime
) -> dict[str, Exception]:
    """The arming census of the region's GPU workloads (act/arming.py): each one's scale-to-zero opt-in as read
    from its pod template or namespace, kept as costguard first saw it, before its findings are decided. A
    workload is new when its ReplicaSet or StatefulSet is (a Deployment makes a ReplicaSet per template). A
    cluster whose workloads cannot be told is returned (by name, with the error) and left out."""
    sightings: dict[str, list[Sighting]] = {view.account: [] for view in views}
    failed: dict[str, Exception] = {}
    for view in views:
        try:
            seen = [
                Sighting(
                    key_of(
                        view.account,
                        view.region,
                        ResourceKind.EKS_WORKLOAD,
                        eks.workload_id(view.name, workload.namespace, workload.kind, workload.name),
                    ),
                    workload.created,
                    eks.arming_labels(view, workload, pods),
                )
                for workload, pods in eks.gpu_workloads(view)
            ]
        except Exception as error:
            failed[view.name] = error
            continue
        sightings[view.account] += seen
    for account, seen in sightings.items():
        runtime.observe(account, region, ResourceKind.EKS_WORKLOAD, seen, now)
    return failed


def read_cluster(cluster: EksCluster, api: Any) -> eks.ClusterView:
    """The cluster as its API lists it: five list calls (more only past 500 items of a kind)."""
    raw_nodes = api.nodes()
    untold = {
        t
        for item in raw_nodes
        if not eks.gpu_count(((item.get("status") or {}).get("allocatable") or {}).get(eks.GPU_RESOURCE))
        and (t := ((item.get("metadata") or {}).get("labels") or {}).get("node.kubernetes.io/instance-type"))
    }
    known = inventory.catalog.lookup(cluster.region, untold) if untold else {}

    def gpus_of_type(instance_type: str | None) -> int:
        found = known.get(instance_type) if instance_type else None
        return found.count if found is not None and found.kind in ("nvidia_gpu", "gpu") else 0

    nodes = tuple(eks.node_of(item, gpus_of_type) for item in raw_nodes)
    pods = tuple(eks.pod_of(item) for item in api.pods())
    controllers: dict[tuple[str, str, str], eks.Controller] = {}
    for kind, items in (("ReplicaSet", api.replica_sets()), ("StatefulSet", api.stateful_sets())):
        for item in items:
            made = eks.controller_of(kind, item)
            controllers[(kind, made.namespace, made.name)] = made
    namespaces = {
        str((n.get("metadata") or {}).get("name", "")): dict((n.get("metadata") or {}).get("labels") or {})
        for n in api.namespaces()
    }
    return eks.ClusterView(
        cluster.name, cluster.account, cluster.region, cluster.arn, nodes, pods, controllers, namespaces
    )


def pod_series(region: str, cluster: str) -> dict[tuple[str, str], list[tuple[str, metrics.Dimensions]]]:
    """Each pod's per-GPU utilization series (device, exact dimensions), by (namespace, pod): one ListMetrics walk
    of the cluster's recently active series, 500 to a page. Discovered rather than guessed, as for EC2."""
    cloudwatch = clients.cloudwatch(region)
    found: dict[tuple[str, str], list[tuple[str, metrics.Dimensions]]] = defaultdict(list)
    pages = cloudwatch.get_paginator("list_metrics").paginate(
        Namespace=NAMESPACE,
        MetricName=POD_METRIC,
        Dimensions=[{"Name": "ClusterName", "Value": cluster}],
        RecentlyActive="PT3H",
    )
    for page in pages:
        for metric in page["Metrics"]:
            dims = tuple(sorted((d["Name"], d["Value"]) for d in metric.get("Dimensions", [])))
            named = dict(dims)
            if {"Namespace", "FullPodName", "GpuDevice"} <= named.keys():
                found[(named["Namespace"], named["FullPodName"])].append((named["GpuDevice"], dims))
    return dict(found)


def _pod_id(cluster: str, namespace: str, pod: str) -> str:
    return f"{cluster}|{namespace}|{pod}"


def _node_id(cluster: str, node: str) -> str:
    return f"{cluster}|node|{node}"


def queries_for(
    view: eks.ClusterView, series: dict[tuple[str, str], list[tuple[str, metrics.Dimensions]]]
) -> list[Query]:
    """One query per GPU series of each running GPU pod (its GPUs numbered in device order), one per GPU node no
    pod requests a GPU of now."""
    queries: list[Query] = []
    for pod in view.gpu_pods:
        listed = series.get(pod.key, [])
        devices = sorted({device for device, _ in listed})
        for device, dims in listed:
            key = (_pod_id(view.name, *pod.key), "gpu", str(devices.index(device)))
            queries.append(Query(key, NAMESPACE, POD_METRIC, dims, GPU_STAT))
    requested = {p.node for p in view.gpu_pods}
    for node in view.nodes:
        if node.gpus > 0 and node.name not in requested and node.instance_id:
            dims = (("ClusterName", view.name), ("InstanceId", node.instance_id), ("NodeName", node.name))
            key = (_node_id(view.name, node.name), "reserved", "")
            queries.append(Query(key, NAMESPACE, NODE_RESERVED_METRIC, dims, GPU_STAT))
    return queries


def judge(
    region: str,
    views: Sequence[eks.ClusterView],
    runtime: Runtime,
    thresholds: Thresholds,
    now: datetime,
    event_id: str | None,
    store: ShadowMarks,
) -> tuple[list[Finding], dict[str, Exception]]:
    """Read every cluster's series in one batched read, then each cluster's verdicts: a cluster whose objects
    cannot be judged is returned apart (by name, with the error), the others judged all the same."""
    queries: list[Query] = []
    listed: dict[str, dict[tuple[str, str], list[tuple[str, metrics.Dimensions]]]] = {}
    for view in views:
        listed[view.name] = pod_series(region, view.name) if view.gpu_pods else {}
        queries += queries_for(view, listed[view.name])
    data = (
        runtime.reads.metrics.get_metric_data(
            region, queries, now - thresholds.lookback, now, int(PERIOD.total_seconds())
        )
        if queries
        else MetricSet()
    )
    findings: list[Finding] = []
    failed: dict[str, Exception] = {}
    for view in views:
        try:
            findings += judge_cluster(
                view, data, listed[view.name], runtime, thresholds, now, event_id, store
            )
        except Exception as error:
            failed[view.name] = error
    return findings, failed


def workload_starts(view: eks.ClusterView) -> dict[str, datetime]:
    """Each workload with GPU pods, by key, with its earliest pod's start (what Kubernetes wrote): a workload
    costguard scaled to zero and its owner scaled back up has its ledger entry closed there."""
    starts: dict[str, datetime] = {}
    for pod in view.gpu_pods:
        if pod.started is None:
            continue
        w = view.workload_of(pod)
        key = f"{view.account}/{view.region}/{ResourceKind.EKS_WORKLOAD}/" + eks.workload_id(
            view.name, w.namespace, w.kind, w.name
        )
        starts[key] = min(starts.get(key, pod.started), pod.started)
    return starts


def judge_cluster(
    view: eks.ClusterView,
    data: MetricSet,
    listed: dict[tuple[str, str], list[tuple[str, metrics.Dimensions]]],
    runtime: Runtime,
    thresholds: Thresholds,
    now: datetime,
    event_id: str | None,
    store: ShadowMarks,
) -> list[Finding]:
    readings: dict[tuple[str, str], GpuReading] = {
        pod.key: read_gpus(data.gpus(_pod_id(view.name, *pod.key)), now, thresholds, pod.gpus)
        for pod in view.gpu_pods
    }
    settings = runtime.settings

    def price_of(instance_type: str | None) -> float | None:
        price = runtime.prices.hourly(instance_type, view.region)
        return price.usd_per_hour if price else None

    # The marks of the cluster's workloads (one BatchGetItem per 100), as the tag a live run decides on.
    keys = {
        Resource.model_construct(
            kind=ResourceKind.EKS_WORKLOAD,
            id=eks.workload_id(view.name, w.namespace, w.kind, w.name),
            account=view.account,
            region=view.region,
        ).key
        for w in (view.workload_of(p) for p in view.gpu_pods)
    }
    marks = {k: s.mark for k, s in read_marks(store, keys, now).items() if s.mark}
    close_seen_running(runtime.ledger, workload_starts(view))
    findings = eks.workload_findings(
        view,
        readings,
        price_of=price_of,
        thresholds=thresholds,
        now=now,
        team_label=settings.routing_tag_key,
        protect_tag_key=settings.protect_tag_key,
        marks=marks,
        event_id=event_id,
    )
    reserved = {node.name: data.measure(_node_id(view.name, node.name), "reserved") for node in view.nodes}
    findings += eks.node_findings(
        view, reserved, price_of=price_of, thresholds=thresholds, now=now, event_id=event_id
    )
    running = [p for p in view.gpu_pods if not eks.pod_starting(p, thresholds, now)]
    if running and not any(listed.get(p.key) for p in view.gpu_pods):
        findings.append(eks.metrics_missing_finding(view, running, now=now, event_id=event_id))
    return findings
