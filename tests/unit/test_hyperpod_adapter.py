"""The HyperPod adapter against botocore's real SageMaker model (moto has no HyperPod)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from costguard.aws import clients, hyperpod

ARN = "arn:aws:sagemaker:us-east-1:123456789012:cluster/llm-pretrain-hp"


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stubber]:
    session: Any = boto3.session.Session()
    made = session.client(
        "sagemaker", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    monkeypatch.setattr(clients, "client", lambda service, region=None, account=None: made)
    with Stubber(made) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def test_node_names_its_group_and_instance_type(stubbed: Stubber) -> None:
    stubbed.add_response(
        "describe_cluster_node",
        {
            "NodeDetails": {
                "InstanceGroupName": "workers",
                "InstanceId": "i-0b7e5f0000000a001",
                "InstanceStatus": {"Status": "Running"},
                "InstanceType": "ml.p5.48xlarge",
                "LaunchTime": datetime(2026, 11, 20, tzinfo=UTC),
            }
        },
        {"ClusterName": "llm-pretrain-hp", "NodeId": "i-0b7e5f0000000a001"},
    )
    node = hyperpod.hyperpod_clusters().node(
        "us-east-1", "123456789012", "llm-pretrain-hp", "i-0b7e5f0000000a001"
    )
    launched = datetime(2026, 11, 20, tzinfo=UTC)
    assert node == hyperpod.Node("i-0b7e5f0000000a001", "workers", "ml.p5.48xlarge", "Running", launched)


def test_cluster_names_its_groups(stubbed: Stubber) -> None:
    stubbed.add_response(
        "describe_cluster",
        {
            "ClusterArn": ARN,
            "ClusterName": "llm-pretrain-hp",
            "ClusterStatus": "InService",
            "InstanceGroups": [
                {
                    "InstanceGroupName": "workers",
                    "InstanceType": "ml.p5.48xlarge",
                    "CurrentCount": 3,
                    "TargetCount": 4,
                    "Status": "InService",
                },
            ],
        },
        {"ClusterName": "llm-pretrain-hp"},
    )
    cluster = hyperpod.hyperpod_clusters().cluster("us-east-1", "123456789012", "llm-pretrain-hp")
    assert cluster.groups == (hyperpod.Group("workers", "ml.p5.48xlarge", 3, 4, "InService"),)
