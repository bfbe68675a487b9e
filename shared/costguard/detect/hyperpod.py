"""SageMaker HyperPod events told with their dollars: a node that cannot work, a cluster that failed or is stuck
creating, a node HyperPod could not provision. Notify only: HyperPod repairs and rolls back on its own. Pure."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from costguard.events.hyperpod import ClusterEventRecord, ClusterStateDetail, NodeHealthDetail
from costguard.model import Finding, Reason, Resource, ResourceKind
from costguard.model import HyperPodGroup as Group
from costguard.model import HyperPodNode as Node
from costguard.policy import utc_text
from costguard.pricing import Price

# A cluster still Creating this long after its CreationTime is told as stuck (creation normally takes minutes to
# an hour, deep health checks included).
STUCK_CREATING = timedelta(hours=2)
FAILED_STATES = frozenset({"Failed", "RollingBack"})
_REPAIRS = {
    "Replace": "HyperPod is replacing it",
    "Reboot": "HyperPod is rebooting it",
}

PriceOf = Callable[[str | None], Price | None]


def _usd(value: float) -> str:
    return f"${value:,.2f}"


def _cluster_resource(
    name: str, arn: str | None, account: str, region: str, tags: dict[str, str]
) -> Resource:
    return Resource(
        kind=ResourceKind.HYPERPOD_CLUSTER,
        id=name,
        name=name,
        arn=arn,
        account=account,
        region=region,
        tags=tags,
    )


def detect_node_health(
    detail: NodeHealthDetail,
    node: Node | None,
    price: Price | None,
    *,
    account: str,
    region: str,
    observed_at: datetime,
    event_id: str | None = None,
) -> list[Finding]:
    """One ``hyperpod_node_unhealthy`` finding for a node HyperPod reports as not healthy; nothing otherwise."""
    health = detail.HealthSummary
    if health.HealthStatus.lower() == "healthy":
        return []
    instance_type = node.instance_type if node else None
    repair = health.RepairAction or "None"
    doing = _REPAIRS.get(repair, "HyperPod takes no repair action on its own")
    where = f" in group {node.group}" if node and node.group else ""
    parts = [
        f"HyperPod node {detail.InstanceId} of cluster {detail.ClusterName}{where} is {health.HealthStatus}: "
        f"{doing}.",
    ]
    if health.HealthStatusReason:
        parts.append(health.HealthStatusReason)
    if price is not None:
        parts.append(
            f"While it cannot work it still costs {_usd(price.usd_per_hour)}/h ({instance_type}), "
            f"{_usd(price.usd_per_hour * 24)} a day, and jobs spanning it stall or restart from their checkpoint."
        )
    else:
        parts.append(
            f"Its hourly price is unknown ({'instance type ' + instance_type if instance_type else 'no instance type'}"
            "): DescribeClusterNode did not name a priced type."
        )
    if health.Recommendation:
        parts.append(f"AWS recommends: {health.Recommendation}")
    resource = Resource(
        kind=ResourceKind.HYPERPOD_NODE,
        id=f"{detail.ClusterName}/{detail.InstanceId}",
        name=f"{detail.ClusterName}/{detail.InstanceId}",
        arn=detail.ClusterArn,
        account=account,
        region=region,
        instance_type=instance_type,
        tags=detail.Tags,
    )
    return [
        Finding(
            reason=Reason.HYPERPOD_NODE_UNHEALTHY,
            resource=resource,
            summary=" ".join(parts),
            observed_at=observed_at,
            event_id=event_id,
            hourly_usd=price.usd_per_hour if price else None,
            remediable=False,
            repeat_scope=f"{health.HealthStatus}/{repair}",
            evidence={
                "cluster": detail.ClusterName,
                "instance_id": detail.InstanceId,
                "instance_group": node.group if node else None,
                "health_status": health.HealthStatus,
                "health_status_reason": health.HealthStatusReason,
                "repair_action": repair,
                "price_usd_per_hour": price.usd_per_hour if price else None,
                "price_source": price.source if price else "unknown",
            },
        )
    ]


def groups_hourly(
    groups: Sequence[Group], price_of: PriceOf, *, counted: str
) -> tuple[float | None, list[str]]:
    """What the groups' ``counted`` instances (``current`` or ``target``) cost per hour, and one line per group;
    None when a group with instances has no known price."""
    total: float | None = 0.0
    lines: list[str] = []
    for group in groups:
        count = group.current if counted == "current" else group.target
        price = price_of(group.instance_type)
        if price is None:
            lines.append(f"{group.name}: {count} x {group.instance_type or 'unknown type'} (price unknown)")
            total = None if count else total
            continue
        hourly = price.usd_per_hour * count
        lines.append(f"{group.name}: {count} x {group.instance_type} = {_usd(hourly)}/h")
        total = None if total is None else total + hourly
    return (round(total, 4) if total is not None else None), lines


def detect_cluster_state(
    detail: ClusterStateDetail,
    groups: Sequence[Group],
    price_of: PriceOf,
    *,
    account: str,
    region: str,
    observed_at: datetime,
    now: datetime,
    event_id: str | None = None,
) -> list[Finding]:
    """One ``hyperpod_cluster_failed`` finding for a cluster that Failed or is rolling back, or has been Creating
    for ``STUCK_CREATING``; nothing for any other state."""
    status = detail.ClusterStatus
    created = detail.CreationTime
    age = now - created if created else None
    stuck = status == "Creating" and age is not None and age >= STUCK_CREATING
    if status not in FAILED_STATES and not stuck:
        return []
    running, lines = groups_hourly(groups, price_of, counted="current")
    wanted, _ = groups_hourly(groups, price_of, counted="target")
    if stuck:
        assert age is not None and created is not None
        head = (
            f"HyperPod cluster {detail.ClusterName} has been Creating for {age.total_seconds() / 3600:.1f}h "
            f"(since {utc_text(created)})."
        )
    else:
        head = f"HyperPod cluster {detail.ClusterName} is {status}."
    parts = [head]
    if detail.FailureMessage:
        parts.append(detail.FailureMessage)
    if running is not None:
        parts.append(
            f"Its instance groups run nodes costing {_usd(running)}/h while the cluster cannot work:"
        )
    else:
        parts.append("Its instance groups (a price is unknown):")
    parts.append("; ".join(lines) + ".")
    if wanted is not None:
        parts.append(f"At full size it would cost {_usd(wanted)}/h.")
    resource = _cluster_resource(detail.ClusterName, detail.ClusterArn, account, region, detail.Tags)
    return [
        Finding(
            reason=Reason.HYPERPOD_CLUSTER_FAILED,
            resource=resource,
            summary=" ".join(parts),
            observed_at=observed_at,
            event_id=event_id,
            hourly_usd=running,
            remediable=False,
            repeat_scope="stuck-creating" if stuck else status,
            evidence={
                "cluster_status": status,
                "stuck_creating": stuck,
                "creating_hours": round(age.total_seconds() / 3600, 2) if stuck and age else None,
                "failure_message": detail.FailureMessage,
                "instance_groups": [
                    {"name": g.name, "type": g.instance_type, "current": g.current, "target": g.target}
                    for g in groups
                ],
                "running_usd_per_hour": running,
                "target_usd_per_hour": wanted,
            },
        )
    ]


def detect_cluster_event(
    record: ClusterEventRecord,
    group: Group | None,
    price: Price | None,
    *,
    account: str,
    region: str,
    observed_at: datetime,
    event_id: str | None = None,
) -> list[Finding]:
    """One ``hyperpod_provisioning_failed`` finding for an Error-level cluster event (a node or group HyperPod
    could not create); Info and Warn events are not told."""
    if (record.EventLevel or "").lower() != "error":
        return []
    parts = [
        record.Description or f"HyperPod reported an error on {record.ResourceType} of {record.ClusterName}."
    ]
    if record.failure_message:
        parts.append(record.failure_message)
    instance_type = group.instance_type if group else None
    running = price.usd_per_hour * group.current if price and group else None
    if group is not None and price is not None and running is not None:
        parts.append(
            f"Group {group.name} runs {group.current} of {group.target} {instance_type} nodes, "
            f"{_usd(price.usd_per_hour)}/h each: {_usd(running)}/h paid while it is short "
            "(a job sized for the full group waits)."
        )
    else:
        parts.append("The group's instance type or price is unknown (DescribeCluster did not name it).")
    resource = _cluster_resource(record.ClusterName, record.ClusterArn, account, region, {})
    return [
        Finding(
            reason=Reason.HYPERPOD_PROVISIONING_FAILED,
            resource=resource,
            summary=" ".join(parts),
            observed_at=observed_at,
            event_id=event_id,
            hourly_usd=round(running, 4) if running is not None else None,
            remediable=False,
            repeat_scope=f"{record.ResourceType}/{record.InstanceGroupName or record.ClusterName}",
            evidence={
                "cluster_event_id": record.EventId,
                "resource_type": record.ResourceType,
                "instance_group": record.InstanceGroupName,
                "instance_id": record.InstanceId,
                "failure_message": record.failure_message,
                "instance_type": instance_type,
                "group_current": group.current if group else None,
                "group_target": group.target if group else None,
                "price_usd_per_hour": price.usd_per_hour if price else None,
                "price_source": price.source if price else "unknown",
            },
        )
    ]
