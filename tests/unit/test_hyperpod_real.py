"""HyperPod as AWS sends it (issue 39): the providerID of a HyperPod node in an EKS cluster, a flexible instance group
(``InstanceRequirements``, no single ``InstanceType``) as DescribeCluster answers it, its nodes judged by their own
types, and the cluster's tags read once per invocation when an event carries none."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from costguard.aws import clients, hyperpod
from costguard.detect.hyperpod import (
    HyperPodNodeRef,
    detect_cluster_event,
    detect_cluster_state,
    hyperpod_node_of,
    provider_instance_id,
)
from costguard.detect.hyperpod_idle import NodeUse, idle_group_findings
from costguard.events.hyperpod import ClusterEventRecord, ClusterStateDetail
from costguard.model import HyperPodCluster, HyperPodNode
from costguard.pricing import Price

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
ACCOUNT = "123456789012"
# AWS's cluster ARNs end in a 12-character id, not the name (DescribeCluster's ClusterArn pattern).
ARN = f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster/abc123def456"
PRICES = {"ml.g5.12xlarge": Price(7.09, "bundled table"), "ml.g5.24xlarge": Price(10.18, "bundled table")}


# -- the providerID of a HyperPod node ------------------------------------------------------------------------


def test_a_hyperpod_providerid_names_its_cluster_and_instance() -> None:
    provider = "aws:///us-east-1a/sagemaker/cluster/hyperpod-abc123def456-i-0123456789abcdef0"
    assert hyperpod_node_of(provider) == HyperPodNodeRef("abc123def456", "i-0123456789abcdef0", "us-east-1a")
    assert provider_instance_id(provider) == "i-0123456789abcdef0"
    assert hyperpod.hyperpod_node_of is hyperpod_node_of  # the adapter module names it too


@pytest.mark.parametrize(
    ("provider", "instance_id"),
    [
        ("aws:///us-east-1a/i-0123456789abcdef0", "i-0123456789abcdef0"),  # an EC2 node
        ("aws:///us-west-2b/i-0abc", "i-0abc"),
        ("aws:///us-east-1a/fargate-ip-192-168-1-1.ec2.internal", None),  # Fargate: no instance
        ("aws:///us-east-1a/sagemaker/cluster/hyperpod-abc123def456", None),  # truncated
        ("aws:///us-east-1a/sagemaker/cluster/hyperpod-abc123def456-node-1", None),
        ("gce://project/zone/name", None),
        ("", None),
    ],
)
def test_other_providerids_are_not_hyperpod_nodes(provider: str, instance_id: str | None) -> None:
    assert hyperpod_node_of(provider) is None
    assert provider_instance_id(provider) == instance_id


# -- a flexible instance group, as the service model shapes it ------------------------------------------------


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stubber]:
    session: Any = boto3.session.Session()
    made = session.client(
        "sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    made.meta.events.register("before-call.*.*", clients._count)
    monkeypatch.setattr(clients, "client", lambda service, region=None, account=None: made)
    with Stubber(made) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


FLEXIBLE = {
    "InstanceGroupName": "flex-workers",
    "InstanceRequirements": {
        "CurrentInstanceTypes": ["ml.g5.12xlarge", "ml.g5.24xlarge"],
        "DesiredInstanceTypes": ["ml.g5.12xlarge", "ml.g5.24xlarge"],
    },
    "InstanceTypeDetails": [
        {"InstanceType": "ml.g5.12xlarge", "CurrentCount": 2, "ThreadsPerCore": 1},
        {"InstanceType": "ml.g5.24xlarge", "CurrentCount": 1, "ThreadsPerCore": 1},
    ],
    "CurrentCount": 3,
    "TargetCount": 4,
    "Status": "InService",
}


def test_describe_cluster_reads_a_flexible_groups_types(stubbed: Stubber) -> None:
    stubbed.add_response(  # the Stubber checks the answer against botocore's SageMaker model
        "describe_cluster",
        {
            "ClusterArn": ARN,
            "ClusterName": "rec-eval-hp",
            "ClusterStatus": "InService",
            "InstanceGroups": [FLEXIBLE],
        },
        {"ClusterName": "rec-eval-hp"},
    )
    [group] = hyperpod.hyperpod_clusters().cluster("us-east-1", ACCOUNT, "rec-eval-hp").groups
    assert group.instance_type is None and group.name == "flex-workers"
    assert hyperpod.flexible_types(group) == ("ml.g5.12xlarge", "ml.g5.24xlarge")
    assert hyperpod.type_counts(group) == (("ml.g5.12xlarge", 2), ("ml.g5.24xlarge", 1))


def test_tags_are_read_once_an_invocation(stubbed: Stubber) -> None:
    stubbed.add_response(
        "list_tags", {"Tags": [{"Key": "team", "Value": "search"}]}, {"ResourceArn": ARN, "MaxResults": 100}
    )
    clients.calls.clear()
    adapter = hyperpod.hyperpod_clusters()
    assert adapter.tags("us-east-1", ACCOUNT, ARN) == {"team": "search"}
    assert adapter.tags("us-east-1", ACCOUNT, ARN) == {"team": "search"}  # kept: no second call
    assert clients.calls[("sagemaker", "ListTags")] == 1


def state_detail(group: dict[str, Any]) -> ClusterStateDetail:
    return ClusterStateDetail.model_validate(
        {
            "ClusterArn": ARN,
            "ClusterName": "rec-eval-hp",
            "ClusterStatus": "Failed",
            "FailureMessage": "",
            "InstanceGroups": [group],
        }
    )


def cluster_state(group: dict[str, Any]) -> tuple[str, float | None]:
    detail = state_detail(group)
    groups = [hyperpod.group_from_api(g.model_dump()) for g in detail.InstanceGroups]
    [finding] = detect_cluster_state(
        detail,
        groups,
        lambda t: PRICES.get(t or ""),
        account=ACCOUNT,
        region="us-east-1",
        observed_at=NOW,
        now=NOW,
    )
    return finding.summary, finding.hourly_usd


def test_a_failed_clusters_flexible_group_is_priced_by_the_types_it_runs() -> None:
    summary, hourly = cluster_state(FLEXIBLE)
    assert hourly == round(2 * 7.09 + 10.18, 4)
    assert "flex-workers" in summary and "flexible" in summary
    assert "2 x ml.g5.12xlarge + 1 x ml.g5.24xlarge" in summary


def test_a_flexible_group_that_names_no_type_counts_is_told_it_cannot_be_priced() -> None:
    bare = {k: v for k, v in FLEXIBLE.items() if k != "InstanceTypeDetails"}
    summary, hourly = cluster_state(bare)
    assert hourly is None
    assert "flex-workers" in summary and "InstanceRequirements" in summary
    assert "no single instance type" in summary and "cannot price" in summary


def test_a_provisioning_error_in_a_flexible_group_is_priced_by_the_types_it_runs() -> None:
    record = ClusterEventRecord.model_validate(
        {
            "EventId": "83ea0bb5-be77-45e8-a458-0a87f778a205",
            "ClusterName": "rec-eval-hp",
            "ClusterArn": ARN,
            "InstanceGroupName": "flex-workers",
            "ResourceType": "Instance",
            "EventLevel": "Error",
            "Description": "Instance creation in Cluster rec-eval-hp and InstanceGroup flex-workers failed",
        }
    )
    group = hyperpod.group_from_api(FLEXIBLE)
    [finding] = detect_cluster_event(
        record,
        group,
        None,
        price_of=lambda t: PRICES.get(t or ""),
        account=ACCOUNT,
        region="us-east-1",
        observed_at=NOW,
    )
    assert finding.hourly_usd == round(2 * 7.09 + 10.18, 4)
    assert "flexible" in finding.summary and "3 of 4" in finding.summary


# -- the idle sweep judges a flexible group's nodes by their own types --------------------------------------


def test_a_flexible_groups_idle_nodes_are_judged_and_priced_by_their_own_types() -> None:
    long_ago = NOW - timedelta(days=30)
    group = hyperpod.group_from_api(FLEXIBLE)
    cluster = HyperPodCluster("rec-eval-hp", "InService", (group,), arn=ARN, created=long_ago)
    nodes = [
        HyperPodNode("i-0c4d2e0000000e001", "flex-workers", "ml.g5.12xlarge", "Running", long_ago),
        HyperPodNode("i-0c4d2e0000000e002", "flex-workers", "ml.g5.24xlarge", "Running", long_ago),
        HyperPodNode("i-0c4d2e0000000e003", "flex-workers", "ml.g5.12xlarge", "Running", long_ago),
    ]
    uses = {n.instance_id: NodeUse(0.5, 24, "Container Insights node_gpu_utilization") for n in nodes[:2]}
    uses[nodes[2].instance_id] = NodeUse(64.0, 24, "Container Insights node_gpu_utilization")
    [finding] = idle_group_findings(
        cluster,
        nodes,
        uses,
        PRICES,
        {"ml.g5.12xlarge": 4, "ml.g5.24xlarge": 4},
        account=ACCOUNT,
        region="us-east-1",
        tags={"team": "search"},
        idle_percent=5.0,
        window=timedelta(hours=24),
        now=NOW,
    )
    assert finding.resource.id == "rec-eval-hp/flex-workers"
    assert finding.hourly_usd == round(7.09 + 10.18, 4)
    assert finding.evidence["idle_nodes"] == ["i-0c4d2e0000000e001", "i-0c4d2e0000000e002"]
    assert finding.evidence["instance_types"] == {"ml.g5.12xlarge": 1, "ml.g5.24xlarge": 1}
    assert "flexible instance group" in finding.summary and "2 of 3" in finding.summary
    assert "1 x ml.g5.12xlarge + 1 x ml.g5.24xlarge" in finding.summary
