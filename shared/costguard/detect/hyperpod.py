"""SageMaker HyperPod events told with their dollars: a node that cannot work, a cluster that failed or is stuck
creating, a node HyperPod could not provision. Notify only: HyperPod repairs and rolls back on its own. Pure.

Also what AWS's shapes carry that a single-type reading would miss: a flexible instance group (``InstanceRequirements``,
several types and no single ``InstanceType``: priced by the types it runs, ``InstanceTypeDetails``, or told as
unpriceable, named), and the providerID of a HyperPod node in an EKS cluster (``hyperpod_node_of``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

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

# A HyperPod node of an EKS-orchestrated cluster: ``aws:///<az>/sagemaker/cluster/hyperpod-<cluster id>-<i-...>``
# (the cluster id is the 12 characters its ARN ends in). An EC2 node's is ``aws:///<az>/<i-...>``.
_HYPERPOD_PROVIDER = re.compile(
    r"^aws:///(?P<az>[^/]*)/sagemaker/cluster/hyperpod-(?P<cluster>[a-z0-9]+)-(?P<instance>i-[0-9a-f]+)$"
)
_EC2_PROVIDER = re.compile(r"^aws:///(?P<az>[^/]*)/(?P<instance>i-[0-9a-f]+)$")


@dataclass(frozen=True)
class HyperPodNodeRef:
    """What a HyperPod node's providerID names: its cluster's id (not its name), its instance, its zone."""

    cluster_id: str
    instance_id: str
    availability_zone: str


def hyperpod_node_of(provider_id: str | None) -> HyperPodNodeRef | None:
    """The HyperPod cluster id and instance of a Kubernetes node's ``spec.providerID``; None for any other node."""
    found = _HYPERPOD_PROVIDER.match(provider_id or "")
    if found is None:
        return None
    return HyperPodNodeRef(found["cluster"], found["instance"], found["az"])


def provider_instance_id(provider_id: str | None) -> str | None:
    """The EC2 instance id of a Kubernetes node's ``spec.providerID``: an EC2 node's, or a HyperPod node's (whose
    last path segment is ``hyperpod-<cluster id>-<instance id>``, not the instance); None for anything else
    (Fargate, another cloud, no providerID)."""
    hyperpod = hyperpod_node_of(provider_id)
    if hyperpod is not None:
        return hyperpod.instance_id
    found = _EC2_PROVIDER.match(provider_id or "")
    return found["instance"] if found else None


@dataclass(frozen=True)
class FlexibleGroup(Group):
    """A flexible instance group: ``InstanceRequirements`` lists the types HyperPod may launch, and there is no
    single ``InstanceType`` (``instance_type`` is None); ``InstanceTypeDetails`` says how many of each run."""

    # InstanceRequirements' current (else desired) instance types, in their order of priority
    allowed_types: tuple[str, ...] = ()
    # InstanceTypeDetails: each type running and its CurrentCount
    type_counts: tuple[tuple[str, int], ...] = ()


def flexible_types(group: Group) -> tuple[str, ...]:
    """The types a flexible group may run (empty for a group of one type)."""
    return group.allowed_types if isinstance(group, FlexibleGroup) else ()


def type_counts(group: Group) -> tuple[tuple[str, int], ...]:
    """How many instances of each type a flexible group runs (empty when not known, or a group of one type)."""
    return group.type_counts if isinstance(group, FlexibleGroup) else ()


def is_flexible(group: Group) -> bool:
    return isinstance(group, FlexibleGroup)


def flexible_group_of(group: Group, item: Mapping[str, Any]) -> Group:
    """``group`` as a FlexibleGroup when its DescribeCluster (or event) entry has ``InstanceRequirements`` or
    ``InstanceTypeDetails`` and no single ``InstanceType``; unchanged otherwise."""
    if group.instance_type or not (item.get("InstanceRequirements") or item.get("InstanceTypeDetails")):
        return group
    wanted = item.get("InstanceRequirements") or {}
    allowed = (
        wanted.get("CurrentInstanceTypes")
        or wanted.get("DesiredInstanceTypes")
        or wanted.get("InstanceTypes")
        or []
    )
    details = [
        d for d in item.get("InstanceTypeDetails") or [] if isinstance(d, dict) and d.get("InstanceType")
    ]
    counts = tuple((str(d["InstanceType"]), int(d.get("CurrentCount") or 0)) for d in details)
    if not allowed:
        allowed = [t for t, _ in counts]
    return FlexibleGroup(
        name=group.name,
        instance_type=None,
        current=group.current,
        target=group.target,
        status=group.status,
        slurm_node_type=group.slurm_node_type,
        allowed_types=tuple(str(t) for t in allowed),
        type_counts=counts,
    )


def mix_text(counts: Sequence[tuple[str, int]]) -> str:
    """``2 x ml.g5.12xlarge + 1 x ml.g5.24xlarge``."""
    return " + ".join(f"{n} x {t}" for t, n in counts)


def unpriced_flexible_text(group: Group) -> str:
    allowed = ", ".join(flexible_types(group)) or "types not named"
    return (
        f"{group.name} is a flexible instance group (InstanceRequirements: {allowed}; no single instance type) "
        "and no InstanceTypeDetails saying how many of each type run: costguard cannot price it"
    )


def flexible_hourly(group: Group, price_of: PriceOf) -> float | None:
    """What a flexible group's running instances cost per hour, by the types it runs; None when not known."""
    counts = type_counts(group)
    if not counts:
        return None
    total = 0.0
    for instance_type, count in counts:
        price = price_of(instance_type)
        if price is None:
            return None if count else total
        total += price.usd_per_hour * count
    return round(total, 4)


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
    tags: Mapping[str, str] | None = None,
    node_unread: str | None = None,
) -> list[Finding]:
    """One ``hyperpod_node_unhealthy`` finding for a node HyperPod reports as not healthy; nothing otherwise.
    ``tags``: the cluster's (ListTags) when the event carries none; default the event's. ``node_unread``: why
    DescribeClusterNode named no node (not found, or the call failed)."""
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
            f"): {node_unread or 'DescribeClusterNode did not name a priced type'}."
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
        tags=dict(detail.Tags if tags is None else tags),
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
        if is_flexible(group):
            # Priced by the types it runs; at any other size, which types HyperPod would launch is its own choice.
            hourly_flex = flexible_hourly(group, price_of) if count == group.current else None
            if hourly_flex is None:
                mix = mix_text(type_counts(group))
                unknown = (
                    f"{group.name} (flexible): {mix} (price unknown)"
                    if mix
                    else unpriced_flexible_text(group)
                )
                lines.append(unknown)
                total = None if count else total
                continue
            lines.append(f"{group.name} (flexible): {mix_text(type_counts(group))} = {_usd(hourly_flex)}/h")
            total = None if total is None else total + hourly_flex
            continue
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
    tags: Mapping[str, str] | None = None,
) -> list[Finding]:
    """One ``hyperpod_cluster_failed`` finding for a cluster that Failed or is rolling back, or has been Creating
    for ``STUCK_CREATING``; nothing for any other state. ``tags``: the cluster's (ListTags) when the event carries
    none; default the event's."""
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
    resource = _cluster_resource(
        detail.ClusterName, detail.ClusterArn, account, region, dict(detail.Tags if tags is None else tags)
    )
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
                "instance_groups": [_group_evidence(g) for g in groups],
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
    price_of: PriceOf | None = None,
    tags: Mapping[str, str] | None = None,
) -> list[Finding]:
    """One ``hyperpod_provisioning_failed`` finding for an Error-level cluster event (a node or group HyperPod
    could not create); Info and Warn events are not told. ``price_of`` prices a flexible group by the types it
    runs; ``tags``: the cluster's (the event carries none)."""
    if (record.EventLevel or "").lower() != "error":
        return []
    parts = [
        record.Description or f"HyperPod reported an error on {record.ResourceType} of {record.ClusterName}."
    ]
    if record.failure_message:
        parts.append(record.failure_message)
    instance_type = group.instance_type if group else None
    running = price.usd_per_hour * group.current if price and group else None
    flexible = group is not None and is_flexible(group)
    if group is not None and flexible:
        running = flexible_hourly(group, price_of) if price_of is not None else None
        if running is not None:
            parts.append(
                f"Group {group.name}, a flexible instance group, runs {group.current} of {group.target} nodes "
                f"({mix_text(type_counts(group))}): {_usd(running)}/h paid while it is short "
                "(a job sized for the full group waits)."
            )
        else:
            parts.append(f"{unpriced_flexible_text(group)}.")
    elif group is not None and price is not None and running is not None:
        parts.append(
            f"Group {group.name} runs {group.current} of {group.target} {instance_type} nodes, "
            f"{_usd(price.usd_per_hour)}/h each: {_usd(running)}/h paid while it is short "
            "(a job sized for the full group waits)."
        )
    else:
        parts.append("The group's instance type or price is unknown (DescribeCluster did not name it).")
    resource = _cluster_resource(record.ClusterName, record.ClusterArn, account, region, dict(tags or {}))
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
                "flexible_types": list(flexible_types(group)) if group else [],
                "type_counts": dict(type_counts(group)) if group else {},
                "group_current": group.current if group else None,
                "group_target": group.target if group else None,
                "price_usd_per_hour": price.usd_per_hour if price else None,
                "price_source": price.source if price else "unknown",
            },
        )
    ]


def _group_evidence(group: Group) -> dict[str, object]:
    told: dict[str, object] = {
        "name": group.name,
        "type": group.instance_type,
        "current": group.current,
        "target": group.target,
    }
    if is_flexible(group):
        told["flexible_types"] = list(flexible_types(group))
        told["type_counts"] = dict(type_counts(group))
    return told
