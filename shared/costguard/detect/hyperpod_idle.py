"""``hyperpod_idle``: a SageMaker HyperPod instance group whose nodes' GPUs stayed idle for the window, told with
what the idle nodes cost and the scale-down to make. Never acted on: resizing a cluster is its owner's call, and
deleting a node loses what its root volume holds. Pure.

A node is judged from its own GPU series (flows/hyperpod_idle.py reads them): every hour of the window read, the
busiest GPU's hourly Maximum never above the idle threshold. A node with no GPU series, too few hours of them, or
launched inside the window is not judged, and never proposed for deletion. Each node is judged and priced by its
own instance type (ListClusterNodes names it): a flexible instance group (``InstanceRequirements``, several types
and no single ``InstanceType``) is judged like any other, its idle nodes told with the mix of types they run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from costguard.detect.hyperpod import flexible_types, is_flexible, mix_text
from costguard.model import Finding, Reason, Resource, ResourceKind
from costguard.model import HyperPodCluster as Cluster
from costguard.model import HyperPodGroup as Group
from costguard.model import HyperPodNode as Node
from costguard.pricing import Price

# BatchDeleteClusterNodes takes at most this many node ids a call (AWS: "If you need to delete more than 99
# instances, contact Support").
DELETE_BATCH = 99
# The share of the window's hours a node must have GPU readings in to be judged.
MIN_COVERAGE = 0.9
# Slurm nodes BatchDeleteClusterNodes refuses to delete (the controller) or that run no jobs (login): not judged.
NOT_JUDGED_SLURM_TYPES = frozenset({"Controller", "Login"})
ROOT_VOLUME_WARNING = (
    "AWS warns that data on a deleted node's root volume is lost: back it up to S3 or FSx for Lustre first"
)


@dataclass(frozen=True)
class NodeUse:
    """One node's GPUs over the window, from its hourly series."""

    busiest_percent: float | None  # the highest hourly Maximum of any of its GPUs; None: no GPU series
    hours: int  # hours of the window with a reading
    source: str  # what was read: "Container Insights node_gpu_utilization", "CloudWatch agent ..."


@dataclass
class _Judged:
    """A group's nodes sorted by verdict."""

    idle: list[Node] = field(default_factory=list)
    busy: list[Node] = field(default_factory=list)
    unknown: list[tuple[Node, str]] = field(default_factory=list)
    busiest: float = 0.0  # over the idle nodes
    sources: set[str] = field(default_factory=set)  # what the idle nodes' readings came from


def _judge(
    nodes: Sequence[Node], uses: Mapping[str, NodeUse], window: timedelta, now: datetime, idle: float
) -> _Judged:
    hours = window.total_seconds() / 3600
    judged = _Judged()
    for node in nodes:
        use = uses.get(node.instance_id)
        if node.launched is not None and now - node.launched < window:
            judged.unknown.append(
                (node, f"launched {(now - node.launched).total_seconds() / 3600:.0f} h ago")
            )
        elif use is None or use.busiest_percent is None:
            judged.unknown.append((node, "no GPU series"))
        elif use.hours < MIN_COVERAGE * hours:
            judged.unknown.append((node, f"GPU readings in {use.hours} of {hours:g} hours"))
        elif use.busiest_percent > idle:
            judged.busy.append(node)
        else:
            judged.idle.append(node)
            judged.busiest = max(judged.busiest, use.busiest_percent)
            judged.sources.add(use.source)
    return judged


def scale_down(cluster: str, group: Group, idle: Sequence[Node]) -> tuple[str, list[str]]:
    """The UpdateCluster count to set, and the BatchDeleteClusterNodes calls (at most DELETE_BATCH ids each) that
    would remove exactly the idle nodes."""
    keep = max(0, group.current - len(idle))
    update = (
        f"UpdateCluster on {cluster}, instance group {group.name}: InstanceCount from {group.current} to {keep} "
        "(its other settings as they are: UpdateCluster takes the group's whole specification; HyperPod picks "
        "which nodes go)"
    )
    ids = sorted(n.instance_id for n in idle)
    calls = [
        f"aws sagemaker batch-delete-cluster-nodes --cluster-name {cluster} --node-ids "
        + " ".join(ids[start : start + DELETE_BATCH])
        for start in range(0, len(ids), DELETE_BATCH)
    ]
    return update, calls


def _usd(value: float) -> str:
    return f"${value:,.2f}"


def type_of(node: Node, group: Group) -> str | None:
    """A node's instance type: its own (ListClusterNodes names it), else its group's."""
    return node.instance_type or group.instance_type


def idle_group_findings(
    cluster: Cluster,
    nodes: Sequence[Node],
    uses: Mapping[str, NodeUse],
    prices: Mapping[str, Price | None],
    gpus: Mapping[str, int],
    *,
    account: str,
    region: str,
    tags: Mapping[str, str],
    idle_percent: float,
    window: timedelta,
    now: datetime,
    event_id: str | None = None,
) -> list[Finding]:
    """One ``hyperpod_idle`` finding per instance group of GPU instances with at least one node idle for the whole
    window (``gpus``: the GPU count per instance type; a type absent or 0 has none). Each node is judged and priced
    by its own type: a flexible group (``InstanceRequirements``, no single type) runs several."""
    findings = []
    for group in cluster.groups:
        if group.slurm_node_type in NOT_JUDGED_SLURM_TYPES:
            continue
        mine = [n for n in nodes if n.group == group.name and (n.status or "Running") == "Running"]
        with_gpus = [n for n in mine if gpus.get(type_of(n, group) or "", 0)]
        if not with_gpus:
            continue
        judged = _judge(with_gpus, uses, window, now, idle_percent)
        if not judged.idle:
            continue
        findings.append(
            _finding(
                cluster,
                group,
                gpus,
                judged,
                prices,
                account,
                region,
                tags,
                idle_percent,
                window,
                now,
                event_id,
            )
        )
    return findings


def _others_text(judged: _Judged) -> list[str]:
    parts = []
    if judged.busy:
        parts.append(f"{len(judged.busy)} other node(s) of the group were busy.")
    if judged.unknown:
        parts.append(
            f"{len(judged.unknown)} node(s) not judged (no GPU readings for the window, or too young)."
        )
    return parts


def _nodes_text(
    group: Group, judged: _Judged, gpus: Mapping[str, int], mixed: list[tuple[str, int]], single: str | None
) -> str:
    """Which of the group's nodes are idle, and of which types (a flexible group's by each node's own)."""
    idle = judged.idle
    everyone = len(idle) == group.current and not judged.busy and not judged.unknown
    which = "all" if everyone else f"{len(idle)} of {group.current}"
    if single is not None and not is_flexible(group):
        count = gpus.get(single, 0)
        return f"{which} {single} nodes ({count} GPU{'s' if count != 1 else ''} each)"
    allowed = ", ".join(flexible_types(group)) or "several types"
    return (
        f"{which} nodes of the flexible instance group (InstanceRequirements: {allowed}), "
        f"{mix_text([(t, n) for t, n in mixed])},"
    )


def _finding(
    cluster: Cluster,
    group: Group,
    gpus: Mapping[str, int],
    judged: _Judged,
    prices: Mapping[str, Price | None],
    account: str,
    region: str,
    tags: Mapping[str, str],
    idle_percent: float,
    window: timedelta,
    now: datetime,
    event_id: str | None,
) -> Finding:
    hours = window.total_seconds() / 3600
    idle = judged.idle
    kinds = Counter(type_of(n, group) or "" for n in idle)
    mixed = sorted(kinds.items())
    single = mixed[0][0] if len(mixed) == 1 else None
    price = prices.get(single) if single else None
    known = [prices.get(t) for t, _ in mixed]
    hourly = (
        round(sum(p.usd_per_hour * n for p, (_, n) in zip(known, mixed, strict=True) if p), 4)
        if all(p is not None for p in known)
        else None
    )
    update, deletes = scale_down(cluster.name, group, idle)
    what = _nodes_text(group, judged, gpus, mixed, single)
    parts = [
        f"HyperPod cluster {cluster.name}, instance group {group.name}: {what} kept every GPU under "
        f"{idle_percent:g}% for {hours:g} hours (busiest GPU {judged.busiest:g}%)."
    ]
    if hourly is not None:
        parts.append(
            f"They cost {_usd(hourly)}/h: {_usd(hourly * hours)} over the window, {_usd(hourly * 730)} a month."
        )
    else:
        unpriced = ", ".join(t for (t, _), p in zip(mixed, known, strict=True) if p is None)
        parts.append(f"Their hourly price is unknown ({unpriced}).")
    parts += _others_text(judged)
    parts.append(
        f"Scale down: {update}; or remove exactly these nodes with BatchDeleteClusterNodes "
        f"({len(deletes)} call{'s' if len(deletes) != 1 else ''}, at most {DELETE_BATCH} nodes each). "
        f"{ROOT_VOLUME_WARNING}. costguard never resizes a HyperPod cluster: this is for its owner."
    )
    return Finding(
        reason=Reason.HYPERPOD_IDLE,
        resource=Resource(
            kind=ResourceKind.HYPERPOD_GROUP,
            id=f"{cluster.name}/{group.name}",
            name=f"{cluster.name}/{group.name}",
            arn=cluster.arn,
            account=account,
            region=region,
            instance_type=single,
            instance_count=len(idle),
            tags=dict(tags),
        ),
        summary=" ".join(parts),
        observed_at=now,
        event_id=event_id,
        hourly_usd=hourly,
        remediable=False,
        repeat_scope=f"{len(idle)}/{group.current}",
        evidence={
            "cluster": cluster.name,
            "instance_group": group.name,
            "orchestrator": f"EKS ({cluster.eks_cluster})" if cluster.eks_cluster else "Slurm",
            **_judged_evidence(judged, group, hours),
            "update_cluster": update,
            "batch_delete_cluster_nodes": deletes,
            "root_volume": ROOT_VOLUME_WARNING,
            "instance_types": dict(mixed),
            "flexible_types": list(flexible_types(group)),
            "price_usd_per_instance_hour": price.usd_per_hour if price else None,
            "price_source": next((p.source for p in known if p is not None), "unknown"),
        },
    )


def _judged_evidence(judged: _Judged, group: Group, hours: float) -> dict[str, object]:
    return {
        "idle_nodes": sorted(n.instance_id for n in judged.idle),
        "busy_nodes": len(judged.busy),
        "not_judged": [f"{n.instance_id}: {why}" for n, why in judged.unknown],
        "group_current_count": group.current,
        "window_hours": round(hours),
        "busiest_gpu_percent": judged.busiest,
        "metric": ", ".join(sorted(judged.sources)),
    }
