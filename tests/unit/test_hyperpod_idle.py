"""``hyperpod_idle`` on plain data: a HyperPod instance group whose nodes' GPUs stayed idle for the window, told
with its dollars and the scale-down to make; and how a node's GPU series become its reading."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.aws.metrics import MetricSet
from costguard.detect.hyperpod_idle import DELETE_BATCH, NodeUse, idle_group_findings, scale_down
from costguard.flows.hyperpod_idle import node_uses
from costguard.model import Finding, HyperPodCluster, HyperPodGroup, HyperPodNode, Reason, ResourceKind
from costguard.pricing import Price

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
WINDOW = timedelta(hours=24)
LONG_AGO = NOW - timedelta(days=30)
G5_12X = "ml.g5.12xlarge"
PRICE = Price(7.09, "bundled table")
ARN = "arn:aws:sagemaker:us-east-1:123456789012:cluster/rec-eval-hp"


def node(
    n: int,
    group: str = "eval",
    instance_type: str = G5_12X,
    status: str = "Running",
    launched: datetime = LONG_AGO,
) -> HyperPodNode:
    return HyperPodNode(f"i-0c4d2e{n:011x}", group, instance_type, status, launched)


def cluster(*groups: HyperPodGroup, eks: str | None = "rec-eval-eks") -> HyperPodCluster:
    return HyperPodCluster("rec-eval-hp", "InService", groups, arn=ARN, created=LONG_AGO, eks_cluster=eks)


def group(
    count: int, name: str = "eval", instance_type: str = G5_12X, slurm_node_type: str | None = None
) -> HyperPodGroup:
    return HyperPodGroup(name, instance_type, count, count, "InService", slurm_node_type)


def idle(percent: float = 0.5, hours: int = 24) -> NodeUse:
    return NodeUse(percent, hours, "Container Insights node_gpu_utilization")


def judge(c: HyperPodCluster, nodes: list[HyperPodNode], uses: dict[str, NodeUse]) -> list[Finding]:
    return idle_group_findings(
        c,
        nodes,
        uses,
        {G5_12X: PRICE},
        {G5_12X: 4},
        account="123456789012",
        region="us-east-1",
        tags={"team": "search"},
        idle_percent=5.0,
        window=WINDOW,
        now=NOW,
    )


def test_an_idle_group_is_reported_with_its_dollars_and_the_scale_down_and_never_acted_on() -> None:
    nodes = [node(n) for n in range(3)]
    [finding] = judge(cluster(group(3)), nodes, {n.instance_id: idle() for n in nodes})
    assert finding.reason is Reason.HYPERPOD_IDLE and finding.remediable is False
    assert finding.resource.kind is ResourceKind.HYPERPOD_GROUP
    assert (finding.resource.id, finding.resource.instance_count) == ("rec-eval-hp/eval", 3)
    assert finding.resource.tags == {"team": "search"}
    assert finding.hourly_usd == round(3 * 7.09, 4)
    text = finding.summary
    assert "all ml.g5.12xlarge nodes (4 GPUs each)" in text and "under 5% for 24 hours" in text
    assert f"${3 * 7.09:,.2f}/h" in text and f"${3 * 7.09 * 24:,.2f} over the window" in text
    assert (
        "InstanceCount from 3 to 0" in text
        and "BatchDeleteClusterNodes (1 call, at most 99 nodes each)" in text
    )
    assert "root volume is lost" in text and "never resizes" in text
    evidence = finding.evidence
    assert evidence["idle_nodes"] == sorted(n.instance_id for n in nodes)
    assert evidence["batch_delete_cluster_nodes"] == [
        "aws sagemaker batch-delete-cluster-nodes --cluster-name rec-eval-hp --node-ids "
        + " ".join(sorted(n.instance_id for n in nodes))
    ]
    assert evidence["orchestrator"] == "EKS (rec-eval-eks)"


def test_only_the_idle_nodes_are_named_for_deletion_and_a_busy_group_says_nothing() -> None:
    nodes = [node(n) for n in range(4)]
    uses = {
        nodes[0].instance_id: idle(),
        nodes[1].instance_id: idle(4.9),
        nodes[2].instance_id: idle(64.0),  # busy
        nodes[3].instance_id: idle(0.0, hours=12),  # read half the window: not judged
    }
    [finding] = judge(cluster(group(4)), nodes, uses)
    assert finding.evidence["idle_nodes"] == [nodes[0].instance_id, nodes[1].instance_id]
    assert finding.hourly_usd == round(2 * 7.09, 4)
    assert "2 of 4" in finding.summary and "InstanceCount from 4 to 2" in finding.summary
    assert finding.evidence["busy_nodes"] == 1
    assert finding.evidence["not_judged"] == [f"{nodes[3].instance_id}: GPU readings in 12 of 24 hours"]
    assert judge(cluster(group(4)), nodes, {n.instance_id: idle(6.0) for n in nodes}) == []


@pytest.mark.parametrize(
    ("extra", "use"),
    [
        ({"launched": NOW - timedelta(hours=5)}, idle()),  # younger than the window
        ({}, NodeUse(None, 0, "none")),  # no GPU series: unknown, never idle
        ({"status": "ShuttingDown"}, idle()),  # not running
    ],
)
def test_a_node_that_cannot_be_judged_is_never_proposed(extra: dict[str, Any], use: NodeUse) -> None:
    lone = node(0, **extra)
    assert judge(cluster(group(1)), [lone], {lone.instance_id: use}) == []


def test_a_slurm_controller_and_a_group_without_gpus_are_not_judged() -> None:
    controller = node(0, group="controller")
    cpu = node(1, group="login-cpu", instance_type="ml.m5.xlarge")
    groups = (group(1, "controller", slurm_node_type="Controller"), group(1, "login-cpu", "ml.m5.xlarge"))
    uses = {controller.instance_id: idle(), cpu.instance_id: idle()}
    assert judge(cluster(*groups, eks=None), [controller, cpu], uses) == []


def test_deletes_come_99_nodes_a_call() -> None:
    many = [node(n) for n in range(150)]
    update, calls = scale_down("big", group(160), many)
    assert "InstanceCount from 160 to 10" in update
    assert len(calls) == 2 == -(-150 // DELETE_BATCH)
    assert [len(c.split("--node-ids ")[1].split()) for c in calls] == [99, 51]


def test_an_unknown_price_is_said_never_zero() -> None:
    lone = node(0)
    [finding] = idle_group_findings(
        cluster(group(1)),
        [lone],
        {lone.instance_id: idle()},
        {G5_12X: None},
        {G5_12X: 4},
        account="123456789012",
        region="us-east-1",
        tags={},
        idle_percent=5.0,
        window=WINDOW,
        now=NOW,
    )
    assert finding.hourly_usd is None and "price is unknown" in finding.summary


def test_a_nodes_own_series_counts_as_a_mean_over_its_gpus() -> None:
    """Where Container Insights gives a node no per-GPU series, its one figure may be a mean: 1.5% over four GPUs
    could be one GPU at 6%, so the node is read as up to 6% (never idle on a mean), and its GPUs' own series win."""
    c = cluster(group(2))
    whole, per_gpu = node(0), node(1)
    data = MetricSet()
    hours = [NOW - timedelta(hours=h) for h in range(24)]
    data.series[f"hyperpod|rec-eval-hp|{whole.instance_id}"][("node", "")] = [(t, 1.5) for t in hours]
    for gpu in range(4):
        key = (f"hyperpod|rec-eval-hp|{per_gpu.instance_id}", ("gpu", str(gpu)))
        data.series[key[0]][key[1]] = [(t, 1.5 if gpu else 3.0) for t in hours]
    uses = node_uses(c, [whole, per_gpu], data, {}, {G5_12X: 4})
    assert uses[whole.instance_id] == NodeUse(6.0, 24, "none")
    assert uses[per_gpu.instance_id].busiest_percent == 3.0
    [finding] = judge(c, [whole, per_gpu], uses)
    assert finding.evidence["idle_nodes"] == [per_gpu.instance_id]
