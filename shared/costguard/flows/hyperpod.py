"""SageMaker HyperPod events: node health, cluster state changes and cluster events, priced and told. Notify only."""

from __future__ import annotations

from datetime import datetime

from costguard.aws.hyperpod import READ_PERMISSIONS, Group, group_from_api, hyperpod_clusters
from costguard.detect.hyperpod import PriceOf, detect_cluster_event, detect_cluster_state, detect_node_health
from costguard.events.hyperpod import ClusterEvent, ClusterStateChange, NodeHealthEvent
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


@tracer.capture_method
def handle_node_health(event: NodeHealthEvent, runtime: Runtime, now: datetime) -> Report:
    """A node not healthy, priced by its instance type: the event names none, DescribeClusterNode does."""
    detail = event.detail
    if detail.HealthSummary.HealthStatus.lower() == "healthy":
        return Report()
    try:
        node = hyperpod_clusters().node(event.region, event.account, detail.ClusterName, detail.InstanceId)
    except Exception:  # a node already gone or a call refused: told without its price, never dropped
        logger.warning("DescribeClusterNode failed", extra={"cluster": detail.ClusterName}, exc_info=True)
        node = None
    price = runtime.prices.hourly(node.instance_type if node else None, event.region)
    findings = detect_node_health(
        detail,
        node,
        price,
        account=event.account,
        region=event.region,
        observed_at=event.time,
        event_id=event.id,
    )
    return runtime.act(findings, now)


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
    return runtime.act(findings, now)


@tracer.capture_method
def handle_cluster_event(event: ClusterEvent, runtime: Runtime, now: datetime) -> Report:
    """An Error-level cluster event, priced by its instance group (DescribeCluster names the group's type)."""
    record = event.detail.EventDetails
    if (record.EventLevel or "").lower() != "error":
        return Report()
    group: Group | None = None
    if record.InstanceGroupName:
        try:
            cluster = hyperpod_clusters().cluster(event.region, event.account, record.ClusterName)
            group = next((g for g in cluster.groups if g.name == record.InstanceGroupName), None)
        except Exception:  # told without its price, never dropped
            logger.warning("DescribeCluster failed", extra={"cluster": record.ClusterName}, exc_info=True)
    price = runtime.prices.hourly(group.instance_type if group else None, event.region)
    findings = detect_cluster_event(
        record,
        group,
        price,
        account=event.account,
        region=event.region,
        observed_at=event.time,
        event_id=event.id,
    )
    return runtime.act(findings, now)
