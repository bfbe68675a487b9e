"""The HyperPod idle sweep's reads against botocore's real SageMaker model (moto has no HyperPod): ListClusters,
DescribeCluster, ListClusterNodes and ListTags, their pages followed, each call counted."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from costguard.aws import clients, hyperpod

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
ACCOUNT = "123456789012"


def arn(name: str) -> str:
    return f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:cluster/{name}"


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stubber]:
    session: Any = boto3.session.Session()
    made = session.client(
        "sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    made.meta.events.register("before-call.*.*", clients._count)  # counted as the factory's clients are
    monkeypatch.setattr(clients, "client", lambda service, region=None, account=None: made)
    with Stubber(made) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def summary(name: str, status: str) -> dict[str, Any]:
    return {"ClusterArn": arn(name), "ClusterName": name, "CreationTime": NOW, "ClusterStatus": status}


def test_working_clusters_follow_the_pages_and_describe_only_clusters_at_work(stubbed: Stubber) -> None:
    stubbed.add_response(
        "list_clusters",
        {
            "ClusterSummaries": [summary("rec-eval-hp", "InService"), summary("old", "Failed")],
            "NextToken": "t",
        },
        {"MaxResults": 100},
    )
    stubbed.add_response(
        "list_clusters",
        {"ClusterSummaries": [summary("llm-pretrain-hp", "Updating"), summary("new", "Creating")]},
        {"MaxResults": 100, "NextToken": "t"},
    )
    stubbed.add_response(
        "describe_cluster",
        {
            "ClusterArn": arn("rec-eval-hp"),
            "ClusterName": "rec-eval-hp",
            "ClusterStatus": "InService",
            "CreationTime": NOW,
            "InstanceGroups": [
                {
                    "InstanceGroupName": "eval-workers",
                    "InstanceType": "ml.g5.12xlarge",
                    "CurrentCount": 3,
                    "TargetCount": 3,
                    "Status": "InService",
                }
            ],
            "Orchestrator": {"Eks": {"ClusterArn": f"arn:aws:eks:us-east-1:{ACCOUNT}:cluster/rec-eval-eks"}},
        },
        {"ClusterName": "rec-eval-hp"},
    )
    stubbed.add_response(
        "describe_cluster",
        {
            "ClusterArn": arn("llm-pretrain-hp"),
            "ClusterName": "llm-pretrain-hp",
            "ClusterStatus": "Updating",
            "InstanceGroups": [
                {
                    "InstanceGroupName": "controller",
                    "InstanceType": "ml.m5.xlarge",
                    "CurrentCount": 1,
                    "TargetCount": 1,
                    "SlurmConfig": {"NodeType": "Controller"},
                }
            ],
        },
        {"ClusterName": "llm-pretrain-hp"},
    )
    clients.calls.clear()
    eks, slurm = hyperpod.hyperpod_clusters().working_clusters("us-east-1")
    assert (eks.name, eks.arn, eks.eks_cluster, eks.created) == (
        "rec-eval-hp",
        arn("rec-eval-hp"),
        "rec-eval-eks",
        NOW,
    )
    assert eks.groups == (hyperpod.Group("eval-workers", "ml.g5.12xlarge", 3, 3, "InService"),)
    assert (slurm.name, slurm.eks_cluster, slurm.groups[0].slurm_node_type) == (
        "llm-pretrain-hp",
        None,
        "Controller",
    )
    # Two pages of the list, a describe for each cluster at work: none for the failed or the creating one.
    assert dict(clients.calls) == {("sagemaker", "ListClusters"): 2, ("sagemaker", "DescribeCluster"): 2}


def test_nodes_follow_the_pages(stubbed: Stubber) -> None:
    def entry(n: int) -> dict[str, Any]:
        return {
            "InstanceGroupName": "eval-workers",
            "InstanceId": f"i-0c4d2e{n:011x}",
            "InstanceStatus": {"Status": "Running"},
            "InstanceType": "ml.g5.12xlarge",
            "LaunchTime": NOW,
        }

    first = {"ClusterNodeSummaries": [entry(n) for n in range(100)], "NextToken": "t"}
    stubbed.add_response("list_cluster_nodes", first, {"ClusterName": "rec-eval-hp", "MaxResults": 100})
    stubbed.add_response(
        "list_cluster_nodes",
        {"ClusterNodeSummaries": [entry(100)]},
        {"ClusterName": "rec-eval-hp", "MaxResults": 100, "NextToken": "t"},
    )
    nodes = hyperpod.hyperpod_clusters().nodes("us-east-1", ACCOUNT, "rec-eval-hp")
    assert len(nodes) == 101
    assert nodes[-1] == hyperpod.Node("i-0c4d2e00000000064", "eval-workers", "ml.g5.12xlarge", "Running", NOW)


def test_tags_of_a_cluster(stubbed: Stubber) -> None:
    stubbed.add_response(
        "list_tags",
        {"Tags": [{"Key": "team", "Value": "search"}, {"Key": "owner", "Value": "li@example.com"}]},
        {"ResourceArn": arn("rec-eval-hp"), "MaxResults": 100},
    )
    tags = hyperpod.hyperpod_clusters().tags("us-east-1", ACCOUNT, arn("rec-eval-hp"))
    assert tags == {"team": "search", "owner": "li@example.com"}


def test_the_sweep_is_granted_exactly_the_reads_it_makes() -> None:
    assert {
        "sagemaker:ListClusters",
        "sagemaker:DescribeCluster",
        "sagemaker:ListClusterNodes",
        "sagemaker:ListTags",
    } == hyperpod.SWEEP_PERMISSIONS
