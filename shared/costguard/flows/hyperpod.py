"""SageMaker HyperPod events: node health, cluster state changes and cluster events, priced and told. Notify only.

Each is told to the team its cluster is tagged with. An event's own ``Tags`` are used when it carries some; AWS's
Cluster State Change example carries none, its Node Health example ``Tags: {}``, and a Cluster Event has no such
field: then the cluster's tags are read, one ListTags by its ARN (the adapter keeps them for the invocation). A
refused or failed ListTags tells the finding untagged (the default channel), never drops it.

Calls per event: node health, one DescribeClusterNode (+ one ListTags without tags); a cluster state change, none
(+ one ListTags without tags); an Error-level cluster event, one DescribeCluster when it names a group, + one
ListTags.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from costguard.aws.hyperpod import (
    READ_PERMISSIONS,
    Group,
    HyperPodClusters,
    group_from_api,
    hyperpod_clusters,
)
from costguard.detect.hyperpod import PriceOf, detect_cluster_event, detect_cluster_state, detect_node_health
from costguard.events.hyperpod import ClusterEvent, ClusterStateChange, NodeHealthEvent
from costguard.model import Finding
from costguard.observability import logger, tracer
from costguard.pipeline import Report
from costguard.pricing import Price
from costguard.runtime import ACT_PERMISSIONS, PRICES_PERMISSIONS, Runtime

# The node's or the cluster's groups (DescribeClusterNode, DescribeCluster), prices; reported, never acted on.
EVENT_PERMISSIONS = READ_PERMISSIONS | ACT_PERMISSIONS | PRICES_PERMISSIONS


def _price_of(runtime: Runtime, region: str) -> PriceOf:
    def price_of(instance_type: str | None) -> Price | None:
        return runtime.prices.hourly(instance_type, region)

    return price_of


def cluster_arn(arn: str | None, resources: Sequence[str]) -> str | None:
    """The cluster's ARN: the event's detail's, else the envelope's ``resources`` entry naming a cluster."""
    if arn:
        return arn
    return next((r for r in resources if r.startswith("arn:") and ":cluster/" in r), None)


def team_tags(
    adapter: HyperPodClusters,
    sent: Mapping[str, str],
    region: str,
    account: str,
    arn: str | None,
    cluster: str,
) -> dict[str, str]:
    """The event's tags when it carries some; else the cluster's (one ListTags by its ARN, once an invocation);
    none when it names no ARN or the call fails (the finding is told to the default channel)."""
    if sent:
        return dict(sent)
    if not arn:
        logger.warning(
            "HyperPod event names no cluster ARN: its tags are not read", extra={"cluster": cluster}
        )
        return {}
    try:
        return adapter.tags(region, account, arn)
    except Exception:  # told untagged, never dropped
        logger.warning("ListTags failed", extra={"cluster": cluster}, exc_info=True)
        return {}


@tracer.capture_method
def handle_node_health(event: NodeHealthEvent, runtime: Runtime, now: datetime) -> Report:
    """A node not healthy, priced by its instance type: the event names none, DescribeClusterNode does."""
    detail = event.detail
    if detail.HealthSummary.HealthStatus.lower() == "healthy":
        return Report()
    adapter = hyperpod_clusters()
    unread: str | None = None
    try:
        node = adapter.node(event.region, event.account, detail.ClusterName, detail.InstanceId)
    except Exception as error:  # a node already gone or a call refused: told without its price, never dropped
        logger.warning("DescribeClusterNode failed", extra={"cluster": detail.ClusterName}, exc_info=True)
        node, unread = None, _node_unread(error, detail.ClusterName, detail.InstanceId)
    price = runtime.prices.hourly(node.instance_type if node else None, event.region)
    arn = cluster_arn(detail.ClusterArn, event.resources)
    tags = team_tags(adapter, detail.Tags, event.region, event.account, arn, detail.ClusterName)
    findings = detect_node_health(
        detail,
        node,
        price,
        account=event.account,
        region=event.region,
        observed_at=event.time,
        event_id=event.id,
        tags=tags,
        node_unread=unread,
    )
    return runtime.act(findings, now)


def _node_unread(error: Exception, cluster: str, instance_id: str) -> str:
    """Why DescribeClusterNode named no type, for the message: the node not found (ResourceNotFound, or a
    ValidationException saying it could not find it), or the call failing."""
    response = getattr(error, "response", None)
    said = response.get("Error", {}) if isinstance(response, dict) else {}
    code, message = str(said.get("Code", "")), str(said.get("Message", "")).lower()
    if code == "ResourceNotFound" or (code == "ValidationException" and "could not find" in message):
        return f"node not found: DescribeClusterNode knows no node {instance_id} in cluster {cluster}"
    return f"DescribeClusterNode failed ({code or type(error).__name__})"


@tracer.capture_method
def handle_cluster_state(event: ClusterStateChange, runtime: Runtime, now: datetime) -> Report:
    """A cluster Failed, rolling back or stuck Creating, priced from the instance groups the event carries."""
    detail = event.detail
    groups = [group_from_api(g.model_dump()) for g in detail.InstanceGroups]
    findings = detect_cluster_state(
        detail,
        groups,
        _price_of(runtime, event.region),
        account=event.account,
        region=event.region,
        observed_at=event.time,
        now=now,
        event_id=event.id,
    )
    if findings:  # the tags are read only for what is told
        arn = cluster_arn(detail.ClusterArn, event.resources)
        tags = team_tags(
            hyperpod_clusters(), detail.Tags, event.region, event.account, arn, detail.ClusterName
        )
        findings = [with_tags(f, tags) for f in findings]
    return runtime.act(findings, now)


@tracer.capture_method
def handle_cluster_event(event: ClusterEvent, runtime: Runtime, now: datetime) -> Report:
    """An Error-level cluster event, priced by its instance group (DescribeCluster names the group's type)."""
    record = event.detail.EventDetails
    if (record.EventLevel or "").lower() != "error":
        return Report()
    group: Group | None = None
    adapter = hyperpod_clusters()
    if record.InstanceGroupName:
        try:
            cluster = adapter.cluster(event.region, event.account, record.ClusterName)
            group = next((g for g in cluster.groups if g.name == record.InstanceGroupName), None)
        except Exception:  # told without its price, never dropped
            logger.warning("DescribeCluster failed", extra={"cluster": record.ClusterName}, exc_info=True)
    price = runtime.prices.hourly(group.instance_type if group else None, event.region)
    arn = cluster_arn(record.ClusterArn, event.resources)
    findings = detect_cluster_event(
        record,
        group,
        price,
        account=event.account,
        region=event.region,
        observed_at=event.time,
        event_id=event.id,
        price_of=_price_of(runtime, event.region),
        tags=team_tags(adapter, {}, event.region, event.account, arn, record.ClusterName),
    )
    return runtime.act(findings, now)


def with_tags(finding: Finding, tags: Mapping[str, str]) -> Finding:
    return finding.model_copy(update={"resource": finding.resource.model_copy(update={"tags": dict(tags)})})
