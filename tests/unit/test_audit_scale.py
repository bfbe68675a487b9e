"""What the audit's discovery and metric reads cost in API calls for 10,000 GPU instances in one region.

The calls go through the real boto3 clients of aws/clients (which count them in ``clients.calls``), answered by
botocore's Stubber against the real service models: moto at this scale would measure moto, not the audit.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.stub import Stubber

from costguard.audit.discover import discover
from costguard.audit.reading import DATAPOINTS_PER_CALL, period_for, read_usage
from costguard.aws import clients, inventory
from costguard.aws.metrics import QUERIES_PER_CALL

FLEET = 10_000
REGION = "eu-south-2"
NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
G5_XLARGE = {
    "InstanceType": "g5.xlarge",
    "VCpuInfo": {"DefaultVCpus": 4},
    "GpuInfo": {
        "Gpus": [{"Name": "A10G", "Manufacturer": "NVIDIA", "Count": 1, "MemoryInfo": {"SizeInMiB": 22888}}]
    },
}


def instance_id(n: int) -> str:
    return f"i-{n:017x}"


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Stubber]]:
    clients.reset()
    monkeypatch.setattr(inventory, "catalog", inventory.AcceleratorCatalog())
    stubs = {name: Stubber(clients.client(name, REGION)) for name in ("ec2", "sagemaker", "cloudwatch")}
    for stub in stubs.values():
        stub.activate()
    clients.calls.clear()
    yield stubs
    for stub in stubs.values():
        stub.deactivate()
    clients.reset()


def describe_instances_pages() -> list[dict[str, Any]]:
    pages = []
    for start in range(0, FLEET, 1000):
        page: dict[str, Any] = {
            "Reservations": [
                {
                    "OwnerId": "123456789012",
                    "Instances": [
                        {
                            "InstanceId": instance_id(n),
                            "InstanceType": "g5.xlarge",
                            "State": {"Name": "running", "Code": 16},
                            "LaunchTime": NOW - timedelta(days=20),
                        }
                        for n in range(start, start + 1000)
                    ],
                }
            ]
        }
        if start + 1000 < FLEET:
            page["NextToken"] = f"page-{start + 1000}"
        pages.append(page)
    return pages


def test_discovery_makes_at_most_ceil_n_over_1000_plus_one_describe_instances(
    stubbed: dict[str, Stubber],
) -> None:
    for page in describe_instances_pages():
        stubbed["ec2"].add_response("describe_instances", page)
    stubbed["ec2"].add_response("describe_instance_types", {"InstanceTypes": [G5_XLARGE]})  # the accelerators
    stubbed["sagemaker"].add_response("list_training_jobs", {"TrainingJobSummaries": []})
    stubbed["sagemaker"].add_response("list_notebook_instances", {"NotebookInstances": []})
    stubbed["sagemaker"].add_response("list_endpoints", {"Endpoints": []})
    stubbed["ec2"].add_response("describe_instance_types", {"InstanceTypes": [G5_XLARGE]})  # the type facts

    subjects = discover(REGION, NOW)

    assert len(subjects) == FLEET
    assert subjects[0].facts is not None and subjects[0].facts.accelerator_count == 1
    assert clients.calls[("ec2", "DescribeInstances")] <= math.ceil(FLEET / 1000) + 1
    assert clients.calls[("ec2", "DescribeInstanceTypes")] <= 2
    assert sum(clients.calls.values()) <= math.ceil(FLEET / 1000) + 1 + 2 + 3
    stubbed["ec2"].assert_no_pending_responses()


def test_metric_reads_make_at_most_ceil_queries_over_500_plus_one_get_metric_data(
    stubbed: dict[str, Stubber],
) -> None:
    from costguard.audit.model import Subject
    from costguard.model import ResourceKind

    subjects = [
        Subject(
            kind=ResourceKind.EC2_INSTANCE,
            id=instance_id(n),
            account="123456789012",
            region=REGION,
            instance_type="g5.xlarge",
        )
        for n in range(FLEET)
    ]
    series = [
        {
            "Namespace": "CWAgent",
            "MetricName": "nvidia_smi_utilization_gpu",
            "Dimensions": [
                {"Name": "InstanceId", "Value": instance_id(n)},
                {"Name": "index", "Value": "0"},
                {"Name": "name", "Value": "A10G"},
            ],
        }
        for n in range(FLEET)
    ]
    for start in range(0, FLEET, 500):
        page: dict[str, Any] = {"Metrics": series[start : start + 500]}
        if start + 500 < FLEET:
            page["NextToken"] = f"page-{start + 500}"
        stubbed["cloudwatch"].add_response("list_metrics", page)
    queries = FLEET * (1 * 2 + 1)  # per instance: utilization and memory of its one GPU, and CPU
    for _ in range(math.ceil(queries / QUERIES_PER_CALL)):
        stubbed["cloudwatch"].add_response("get_metric_data", {"MetricDataResults": []})

    usage = read_usage(REGION, subjects, NOW, 14)

    assert len(usage) == FLEET
    assert clients.calls[("cloudwatch", "GetMetricData")] <= math.ceil(queries / 500) + 1
    stubbed["cloudwatch"].assert_no_pending_responses()  # every query was asked for, none twice


def test_the_period_keeps_a_full_call_under_the_datapoint_limit() -> None:
    # So no GetMetricData call needs a second page: 14 days -> 2-hour periods, 168 points a series.
    for days in (1, 7, 14, 30, 63):
        window = timedelta(days=days)
        points = window.total_seconds() / period_for(window)
        assert points * QUERIES_PER_CALL <= DATAPOINTS_PER_CALL
    assert period_for(timedelta(days=14)) == 7200
