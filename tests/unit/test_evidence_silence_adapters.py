"""Silence and impossible readings, pure and at the adapters: ListInferenceComponents and the AWS/Bedrock series
walk against the real service models (botocore's Stubber: moto has no inference components), a throughput with
no series found is "cannot tell", an opted-in idle one names the tag that arms its delete, and a GPU reading
outside 0-100 per GPU gives no underused advice."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from costguard.aws import bedrock, clients, inference_components
from costguard.detect.bedrock import AUTO_DELETE_TAG, throughput_findings
from costguard.detect.sagemaker import VariantUse, endpoint_underused_findings, impossible_readings
from costguard.model import (
    MARK_TAG_KEY,
    Accelerators,
    Endpoint,
    EndpointVariant,
    ProvisionedThroughput,
    Reason,
)
from costguard.pricing import Price

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
WINDOW = timedelta(hours=24)
ARN = "arn:aws:bedrock:us-east-1:123456789012:provisioned-model/a1b2c3d4e5f6"
PT = ProvisionedThroughput(
    arn=ARN,
    name="translate-pt",
    account="123456789012",
    region="us-east-1",
    model_arn="arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-text-express-v1",
    foundation_model_arn="arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-text-express-v1",
    model_units=1,
    status="InService",
    created=NOW - timedelta(days=3),
    tags={AUTO_DELETE_TAG: "True"},
)


def client(service: str) -> Any:
    session: Any = boto3.session.Session()
    return session.client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


def test_list_inference_components_follows_pages_and_groups_by_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = client("sagemaker")
    monkeypatch.setattr(clients, "sagemaker", lambda region=None, account=None: made)

    def item(name: str, endpoint: str, status: str = "InService") -> dict[str, Any]:
        return {
            "InferenceComponentName": name,
            "InferenceComponentArn": f"arn:aws:sagemaker:us-east-1:123456789012:inference-component/{name}",
            "EndpointName": endpoint,
            "EndpointArn": f"arn:aws:sagemaker:us-east-1:123456789012:endpoint/{endpoint}",
            "VariantName": "AllTraffic",
            "InferenceComponentStatus": status,
            "CreationTime": NOW,
            "LastModifiedTime": NOW,
        }

    request = {"StatusEquals": "InService", "MaxResults": inference_components.PAGE}
    with Stubber(made) as stub:
        stub.add_response(
            "list_inference_components",
            {
                "InferenceComponents": [item("mistral", "llm-shared"), item("llama", "llm-shared")],
                "NextToken": "t",
            },
            request,
        )
        stub.add_response(
            "list_inference_components",
            {"InferenceComponents": [item("ocr", "vision"), item("old", "vision", "Deleting")]},
            request | {"NextToken": "t"},
        )
        found = inference_components.in_service("us-east-1")
        stub.assert_no_pending_responses()
    assert found == {"llm-shared": ("llama", "mistral"), "vision": ("ocr",)}


def test_the_bedrock_series_walk_collects_every_model_id(monkeypatch: pytest.MonkeyPatch) -> None:
    made = client("cloudwatch")
    monkeypatch.setattr(clients, "cloudwatch", lambda region=None, account=None: made)
    metric = {"Namespace": "AWS/Bedrock", "MetricName": "Invocations"}
    with Stubber(made) as stub:
        stub.add_response(
            "list_metrics",
            {"Metrics": [metric | {"Dimensions": [{"Name": "ModelId", "Value": ARN}]}], "NextToken": "n"},
            metric,
        )
        stub.add_response(
            "list_metrics",
            {"Metrics": [metric | {"Dimensions": [{"Name": "ModelId", "Value": "amazon.nova-lite-v1:0"}]}]},
            metric | {"NextToken": "n"},
        )
        assert bedrock.published_model_ids("us-east-1") == {ARN, "amazon.nova-lite-v1:0"}


def judge(pt: ProvisionedThroughput, invocations: float | None, series: tuple[str, ...]) -> list[Any]:
    return throughput_findings(
        pt, invocations, series=series, price=Price(20.0, "test"), window=WINDOW, now=NOW
    )


def test_no_series_found_is_cannot_tell_never_remediable_and_a_pending_delete_is_off() -> None:
    [finding] = judge(PT, None, ())
    assert finding.reason is Reason.GPU_METRICS_MISSING and not finding.remediable
    assert "cannot tell whether it is used" in finding.summary and not finding.armed_by
    unread, cancel = judge(replace(PT, tags=PT.tags | {MARK_TAG_KEY: NOW.isoformat()}), None, ())
    assert unread.reason is Reason.GPU_METRICS_MISSING
    assert cancel.reason is Reason.GPU_ACTIVE_AGAIN and cancel.cancels_mark
    assert judge(replace(PT, created=NOW - timedelta(hours=2)), None, ()) == []


def test_an_idle_opted_in_throughput_names_the_tag_that_arms_its_delete() -> None:
    [finding] = judge(PT, None, (ARN,))
    assert finding.reason is Reason.BEDROCK_THROUGHPUT_IDLE and finding.remediable
    assert finding.armed_by == {AUTO_DELETE_TAG: "True"}
    [reported] = judge(replace(PT, tags={}), None, (ARN,))
    assert not reported.remediable and reported.armed_by == {}
    committed = replace(PT, commitment="OneMonth", commitment_expires=NOW + timedelta(days=20))
    [held] = judge(committed, None, (ARN,))
    assert not held.remediable and held.armed_by == {}


A10G = Accelerators(kind="nvidia_gpu", count=4, model="A10G", memory_mib=24576)
ENDPOINT = Endpoint(
    name="faq-bot",
    arn="arn:aws:sagemaker:us-east-1:123456789012:endpoint/faq-bot",
    account="123456789012",
    region="us-east-1",
    created=NOW - timedelta(days=10),
    variants=(EndpointVariant("AllTraffic", "ml.g5.12xlarge", 1, A10G),),
)


@pytest.mark.parametrize(
    ("gpu", "memory"), [(-400.0, 20.0), (401.0, 20.0), (8.0, -1.0), (float("nan"), 20.0)]
)
def test_a_reading_outside_its_physical_range_gives_no_advice(gpu: float, memory: float) -> None:
    use = VariantUse(invocations=3000.0, gpu_percent=gpu, gpu_memory_percent=memory, active_hours=24)
    assert impossible_readings(use, 4)
    [finding] = endpoint_underused_findings(
        ENDPOINT,
        {"AllTraffic": use},
        prices={"ml.g5.12xlarge": Price(7.09, "test")},
        candidates=[],
        window=WINDOW,
        now=NOW,
    )
    assert finding.reason is Reason.GPU_METRICS_MISSING and not finding.remediable
    assert "0-400%" in finding.summary


def test_a_reading_in_range_is_still_judged() -> None:
    use = VariantUse(invocations=3000.0, gpu_percent=12.0, gpu_memory_percent=15.0, active_hours=24)
    assert impossible_readings(use, 4) == ""
    [finding] = endpoint_underused_findings(
        ENDPOINT,
        {"AllTraffic": use},
        prices={"ml.g5.12xlarge": Price(7.09, "test")},
        candidates=[],
        window=WINDOW,
        now=NOW,
    )
    assert finding.reason is Reason.ENDPOINT_UNDERUSED
