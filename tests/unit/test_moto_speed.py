"""The tests' cached moto serializer (tests/moto_speed.py) writes what moto's own writes, for each protocol the
stack reads: EC2's query XML, DynamoDB's JSON of nested attribute values, CloudWatch's query XML, SQS and
SageMaker's JSON; and it finds an instance by id as moto does."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import boto3
import pytest
from moto import mock_aws
from moto.core import serialize

from costguard.local.stack import STAND_IN_IMAGE
from tests import moto_speed

REGION = "us-east-1"


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


def both_ways(call: Callable[[], Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The response with the cache, then with moto's own per-member lookup, without their request ids."""
    with mock.patch.object(serialize.ResponseSerializer, "get_value", moto_speed.get_member_value):
        cached = call()
    with mock.patch.object(serialize.ResponseSerializer, "get_value", moto_speed._original_get_value):
        own = call()
    for response in (cached, own):
        response.pop("ResponseMetadata", None)
    return cached, own


def test_ec2_instances_with_tags_are_described_alike(aws: None) -> None:
    ec2: Any = boto3.client("ec2", region_name=REGION)
    image = STAND_IN_IMAGE
    made = ec2.run_instances(ImageId=image, InstanceType="g5.xlarge", MinCount=3, MaxCount=3)
    ids = [i["InstanceId"] for i in made["Instances"]]
    ec2.create_tags(Resources=ids, Tags=[{"Key": "team", "Value": "ml"}, {"Key": "Name", "Value": "a <b>"}])
    ec2.stop_instances(InstanceIds=ids[:1])
    cached, own = both_ways(lambda: ec2.describe_instances())
    assert cached == own
    assert sum(len(r["Instances"]) for r in cached["Reservations"]) == 3
    types = both_ways(lambda: ec2.describe_instance_types(InstanceTypes=["g5.xlarge", "p5.48xlarge"]))
    assert types[0] == types[1] and types[0]["InstanceTypes"][0]["GpuInfo"]["Gpus"]


def test_a_nested_dynamodb_item_is_read_alike(aws: None) -> None:
    dynamodb: Any = boto3.client("dynamodb", region_name=REGION)
    dynamodb.create_table(
        TableName="state",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    entries = {"L": [{"M": {"job": {"S": f"j{n}"}, "cost": {"N": str(n / 4)}}} for n in range(5)]}
    item = {"id": {"S": "k"}, "entries": entries, "flags": {"SS": ["a", "b"]}, "none": {"NULL": True}}
    dynamodb.put_item(TableName="state", Item=item)
    cached, own = both_ways(lambda: dynamodb.get_item(TableName="state", Key={"id": {"S": "k"}}))
    assert cached == own and cached["Item"] == item


def test_cloudwatch_alarms_and_metric_data_are_read_alike(aws: None) -> None:
    cloudwatch: Any = boto3.client("cloudwatch", region_name=REGION)
    for n in range(3):
        cloudwatch.put_metric_alarm(
            AlarmName=f"gpu-idle-i-{n}",
            Namespace="CWAgent",
            MetricName="nvidia_smi_utilization_gpu",
            Dimensions=[{"Name": "InstanceId", "Value": f"i-{n}"}],
            Statistic="Maximum",
            Period=60,
            EvaluationPeriods=5,
            Threshold=5.0,
            ComparisonOperator="LessThanThreshold",
            Tags=[{"Key": "costguard", "Value": "gpu-idle"}],
        )
    cached, own = both_ways(lambda: cloudwatch.describe_alarms())
    assert cached == own and len(cached["MetricAlarms"]) == 3
    at = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
    cloudwatch.put_metric_data(
        Namespace="CWAgent",
        MetricData=[{"MetricName": "m", "Value": 3.0, "Timestamp": at, "Unit": "Percent"}],
    )
    metric = {"Namespace": "CWAgent", "MetricName": "m"}
    data = both_ways(
        lambda: cloudwatch.get_metric_data(
            MetricDataQueries=[
                {"Id": "q", "MetricStat": {"Metric": metric, "Period": 60, "Stat": "Maximum"}}
            ],
            StartTime=datetime(2026, 11, 20, 11, 0, tzinfo=UTC),
            EndTime=datetime(2026, 11, 20, 13, 0, tzinfo=UTC),
        )
    )
    assert data[0] == data[1] and data[0]["MetricDataResults"][0]["Values"] == [3.0]


def test_sqs_messages_and_sagemaker_jobs_are_read_alike(aws: None) -> None:
    sqs: Any = boto3.client("sqs", region_name=REGION)
    url = sqs.create_queue(QueueName="q", Attributes={"VisibilityTimeout": "0"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"a": 1}))
    cached, own = both_ways(lambda: sqs.receive_message(QueueUrl=url, AttributeNames=["All"]))
    assert [m["Body"] for m in cached["Messages"]] == [m["Body"] for m in own["Messages"]]
    assert [set(m["Attributes"]) for m in cached["Messages"]] == [
        set(m["Attributes"]) for m in own["Messages"]
    ]
    attributes = both_ways(lambda: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"]))
    assert set(attributes[0]["Attributes"]) == set(attributes[1]["Attributes"])
    sagemaker: Any = boto3.client("sagemaker", region_name=REGION)
    sagemaker.create_notebook_instance(
        NotebookInstanceName="nb",
        InstanceType="ml.t3.medium",
        RoleArn="arn:aws:iam::123456789012:role/r",
        Tags=[{"Key": "team", "Value": "ml"}],
    )
    notebook = both_ways(lambda: sagemaker.describe_notebook_instance(NotebookInstanceName="nb"))
    assert notebook[0] == notebook[1] and notebook[0]["InstanceType"] == "ml.t3.medium"


def test_an_instance_is_found_by_id_as_moto_finds_it(aws: None) -> None:
    from moto.ec2.models import ec2_backends

    ec2: Any = boto3.client("ec2", region_name=REGION)
    image = STAND_IN_IMAGE
    for _ in range(3):  # three reservations of two
        ec2.run_instances(ImageId=image, InstanceType="g5.xlarge", MinCount=2, MaxCount=2)
    backend = ec2_backends["123456789012"][REGION]
    ids = [i["InstanceId"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    assert len(ids) == 6
    for instance_id in [*ids, "i-00000000000000000"]:
        assert moto_speed.get_instance_by_id(backend, instance_id) is moto_speed._original_get_instance_by_id(
            backend, instance_id
        )
    found = moto_speed.get_instance_by_id(backend, ids[4])
    assert found is not None and found.id == ids[4]


def test_a_message_is_retained_as_moto_judges_it(aws: None) -> None:
    from moto.sqs.models import sqs_backends

    sqs: Any = boto3.client("sqs", region_name=REGION)
    sqs.create_queue(QueueName="kept", Attributes={"MessageRetentionPeriod": "60"})
    url = sqs.get_queue_url(QueueName="kept")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="fresh")
    sqs.send_message(QueueUrl=url, MessageBody="old")
    backend = sqs_backends["123456789012"][REGION]
    fresh, old = backend.get_queue("kept")._messages
    old.sent_timestamp -= 61_000  # sent a minute and a second ago: past its retention
    for message, kept in ((fresh, True), (old, False)):
        assert moto_speed._original_retained(backend, "kept", message) is kept
        assert moto_speed.is_message_retained(backend, "kept", message) is kept
