"""The audit's reads beside running resources, counted: Cost Explorer's Savings Plans coverage and Compute
Optimizer's recommendations (moto has neither) against the real service models with botocore's Stubber; the
volume, finished-job and prefix walks on the embedded AWS."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from moto import mock_aws

from costguard.audit.gather import gather
from costguard.audit.rules import parse_rules
from costguard.aws import clients, compute_optimizer, savings_plans, storage

REGION = "us-east-1"
ACCOUNT = "123456789012"


@pytest.fixture
def stubbed() -> Iterator[dict[str, Stubber]]:
    clients.reset()
    stubs = {
        "ce": Stubber(clients.client("ce", savings_plans.CE_REGION)),
        "compute-optimizer": Stubber(clients.client("compute-optimizer", REGION)),
    }
    for stub in stubs.values():
        stub.activate()
    clients.calls.clear()
    yield stubs
    for stub in stubs.values():
        stub.assert_no_pending_responses()
        stub.deactivate()
    clients.reset()


def coverage(family: str, covered: str, on_demand: str) -> dict[str, Any]:
    return {
        "Attributes": {"INSTANCE_FAMILY": family},
        "Coverage": {"SpendCoveredBySavingsPlans": covered, "OnDemandCost": on_demand},
        "TimePeriod": {"Start": "2026-11-01", "End": "2026-11-20"},
    }


def test_one_coverage_walk_per_region_grouped_by_family_and_filtered_to_the_account(
    stubbed: dict[str, Stubber],
) -> None:
    expected = {
        "TimePeriod": {"Start": "2026-10-31", "End": "2026-11-20"},
        "Granularity": "MONTHLY",
        "GroupBy": [{"Type": "DIMENSION", "Key": "INSTANCE_FAMILY"}],
        "Filter": {
            "And": [
                {"Dimensions": {"Key": "REGION", "Values": [REGION]}},
                {"Dimensions": {"Key": "LINKED_ACCOUNT", "Values": ["210987654321"]}},
            ]
        },
    }
    ce = stubbed["ce"]
    # Two months in the window: one family's two periods are summed; a second page follows the token.
    ce.add_response(
        "get_savings_plans_coverage",
        {
            "SavingsPlansCoverages": [coverage("p5", "300", "100"), coverage("g5", "0", "50")],
            "NextToken": "t",
        },
        expected,
    )
    ce.add_response(
        "get_savings_plans_coverage",
        {"SavingsPlansCoverages": [coverage("p5", "100", "300")]},
        expected | {"NextToken": "t"},
    )
    shares, note = savings_plans.covered_shares(
        REGION, date(2026, 10, 31), date(2026, 11, 20), "210987654321"
    )
    assert note is None
    assert shares == {"p5": pytest.approx(0.5), "g5": 0.0}
    assert clients.calls[("ce", "GetSavingsPlansCoverage")] == 2


def test_coverage_cost_explorer_cannot_give_is_unknown_not_a_failure(stubbed: dict[str, Stubber]) -> None:
    stubbed["ce"].add_client_error(
        "get_savings_plans_coverage", service_error_code="DataUnavailableException", http_status_code=400
    )
    shares, note = savings_plans.covered_shares(REGION, date(2026, 11, 6), date(2026, 11, 20))
    assert shares is None
    assert note is not None and "DataUnavailableException" in note
    stubbed["ce"].add_client_error("get_savings_plans_coverage", service_error_code="ThrottlingException")
    with pytest.raises(Exception, match="ThrottlingException"):
        savings_plans.covered_shares(REGION, date(2026, 11, 6), date(2026, 11, 20))


def arns(count: int) -> list[str]:
    return [compute_optimizer.instance_arn(REGION, ACCOUNT, f"i-{n:017x}") for n in range(count)]


def test_recommendations_for_250_instances_take_three_calls_of_at_most_100_arns(
    stubbed: dict[str, Stubber],
) -> None:
    wanted = arns(250)
    stub = stubbed["compute-optimizer"]
    for start in range(0, 250, compute_optimizer.INSTANCE_ARNS_PER_CALL):
        batch = wanted[start : start + compute_optimizer.INSTANCE_ARNS_PER_CALL]
        stub.add_response(
            "get_ec2_instance_recommendations",
            {"instanceRecommendations": [{"instanceArn": a, "finding": "Optimized"} for a in batch[:2]]},
            {"instanceArns": batch, "accountIds": [ACCOUNT]},
        )
    found, note = compute_optimizer.instance_recommendations(REGION, wanted, ACCOUNT)
    assert note is None
    assert len(found) == 6
    assert clients.calls[("compute-optimizer", "GetEC2InstanceRecommendations")] == 3


def test_an_account_not_opted_in_gives_no_recommendations_and_says_why(stubbed: dict[str, Stubber]) -> None:
    stubbed["compute-optimizer"].add_client_error(
        "get_ec2_instance_recommendations", service_error_code="OptInRequiredException", http_status_code=403
    )
    found, note = compute_optimizer.instance_recommendations(REGION, arns(3))
    assert found == []
    assert note == "Compute Optimizer did not answer: OptInRequiredException"
    # No instance: no call.
    assert compute_optimizer.instance_recommendations(REGION, []) == ([], None)
    assert clients.calls[("compute-optimizer", "GetEC2InstanceRecommendations")] == 1


def test_a_page_token_is_followed(stubbed: dict[str, Stubber]) -> None:
    stub = stubbed["compute-optimizer"]
    stub.add_response(
        "get_ec2_instance_recommendations",
        {"instanceRecommendations": [{"instanceArn": arns(1)[0]}], "nextToken": "n"},
        {"instanceArns": arns(2)},
    )
    stub.add_response(
        "get_ec2_instance_recommendations",
        {"instanceRecommendations": [{"instanceArn": arns(2)[1]}]},
        {"instanceArns": arns(2), "nextToken": "n"},
    )
    found, _ = compute_optimizer.instance_recommendations(REGION, arns(2))
    assert [r["instanceArn"] for r in found] == arns(2)


# -- on the embedded AWS: one walk each, one ListObjectsV2 walk per distinct prefix ------------------------


@pytest.fixture
def embedded() -> Iterator[None]:
    with mock_aws():
        clients.reset()
        clients.calls.clear()
        yield
        clients.reset()


def _training_job(sagemaker: Any, name: str, checkpoint: str) -> None:
    sagemaker.create_training_job(
        TrainingJobName=name,
        AlgorithmSpecification={"TrainingImage": "image", "TrainingInputMode": "File"},
        RoleArn=f"arn:aws:iam::{ACCOUNT}:role/sagemaker",
        OutputDataConfig={"S3OutputPath": "s3://costguard-test-out/"},
        ResourceConfig={"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10},
        StoppingCondition={"MaxRuntimeInSeconds": 3600},
        CheckpointConfig={"S3Uri": checkpoint},
    )


def test_gather_makes_one_volume_walk_one_search_walk_and_one_listing_per_prefix(embedded: None) -> None:
    ec2: Any = boto3.client("ec2", REGION)
    attached = ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=8)
    instance = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    ec2.attach_volume(VolumeId=attached["VolumeId"], InstanceId=instance, Device="/dev/sdf")
    for _ in range(3):
        ec2.create_volume(AvailabilityZone=f"{REGION}a", Size=100, VolumeType="gp3")
    s3: Any = boto3.client("s3", REGION)
    for bucket in ("costguard-test-ckpt", "costguard-test-out"):
        s3.create_bucket(Bucket=bucket)
    for n in range(3):
        s3.put_object(Bucket="costguard-test-ckpt", Key=f"llama/step-{n}.pt", Body=b"x" * 1000)
    s3.put_object(Bucket="costguard-test-out", Key="llama-1/output/model.tar.gz", Body=b"x" * 10)
    sagemaker: Any = boto3.client("sagemaker", REGION)
    _training_job(sagemaker, "llama-1", "s3://costguard-test-ckpt/llama/")
    _training_job(sagemaker, "llama-2", "s3://costguard-test-ckpt/llama/")  # the same prefix: listed once
    clients.calls.clear()
    # Jobs moto created just now, judged a day later with no minimum age.
    rules = parse_rules({"storage": {"min_age_days": 0}})
    holdings = gather(REGION, datetime.now(UTC) + timedelta(days=1), rules)
    assert len(holdings.volumes) == 3  # the attached one is not asked for
    assert {(p.uri, p.jobs, p.objects, sum(p.bytes_by_class.values())) for p in holdings.prefixes} == {
        ("s3://costguard-test-ckpt/llama/", ("llama-1", "llama-2"), 3, 3000),
        ("s3://costguard-test-out/llama-1/", ("llama-1",), 1, 10),
        ("s3://costguard-test-out/llama-2/", ("llama-2",), 0, 0),
    }
    assert clients.calls[("ec2", "DescribeVolumes")] == 1
    assert clients.calls[("sagemaker", "Search")] == 1
    assert clients.calls[("s3", "ListObjectsV2")] == 3
    assert clients.calls[("sagemaker", "DescribeTrainingJob")] == 0


def test_a_refused_listing_is_reported_with_its_error(embedded: None) -> None:
    usage = storage.prefix_usage("s3://costguard-no-such-bucket/x/", REGION)
    assert (usage.objects, usage.error) == (0, "NoSuchBucket")


def test_describe_volumes_asks_only_for_available_volumes() -> None:
    clients.reset()
    ec2 = clients.client("ec2", REGION)
    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_volumes",
            {"Volumes": [{"VolumeId": "vol-1", "Size": 10, "VolumeType": "gp3", "State": "available"}]},
            {"Filters": [{"Name": "status", "Values": ["available"]}], "MaxResults": ANY},
        )
        assert [v["VolumeId"] for v in storage.unattached_volumes(REGION)] == ["vol-1"]
    clients.reset()
