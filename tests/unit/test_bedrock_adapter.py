"""The Bedrock Provisioned Throughput adapter against botocore's real Bedrock model (moto has none of its calls),
and the sweep's calls counted: one list, one metric read and one tags read per throughput."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from costguard.act.aws import AwsRemediator
from costguard.aws import bedrock, clients
from costguard.flows import bedrock as flow
from costguard.model import MARK_TAG_KEY, Resource, ResourceKind
from costguard.settings import parse_settings

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
ACCOUNT = "123456789012"


def arn(name: str) -> str:
    return f"arn:aws:bedrock:us-east-1:{ACCOUNT}:provisioned-model/{name}"


def summary(name: str, **extra: object) -> dict[str, object]:
    return {
        "provisionedModelName": name,
        "provisionedModelArn": arn(name),
        "modelArn": "arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-text-express-v1",
        "desiredModelArn": "arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-text-express-v1",
        "foundationModelArn": "arn:aws:bedrock:us-east-1::foundation-model/amazon.titan-text-express-v1",
        "modelUnits": 2,
        "desiredModelUnits": 2,
        "status": "InService",
        "creationTime": NOW - timedelta(days=10),
        "lastModifiedTime": NOW - timedelta(days=10),
        **extra,
    }


def client(service: str) -> Any:
    session: Any = boto3.session.Session()
    return session.client(service, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stubber]:
    made = client("bedrock")
    monkeypatch.setattr(clients, "client", lambda service, region=None, account=None: made)
    with Stubber(made) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def test_in_service_follows_pages_and_maps_commitments(stubbed: Stubber) -> None:
    request = {"statusEquals": "InService", "maxResults": bedrock.PAGE}
    expires = NOW + timedelta(days=5)
    stubbed.add_response(
        "list_provisioned_model_throughputs",
        {"provisionedModelSummaries": [summary("a")], "nextToken": "t"},
        request,
    )
    stubbed.add_response(
        "list_provisioned_model_throughputs",
        {
            "provisionedModelSummaries": [
                summary("b", commitmentDuration="OneMonth", commitmentExpirationTime=expires)
            ]
        },
        request | {"nextToken": "t"},
    )
    found = bedrock.ProvisionedThroughputs().in_service("us-east-1", ACCOUNT)
    assert [t.name for t in found] == ["a", "b"]
    assert (found[0].commitment, found[0].model_units, found[0].base_model) == (
        None,
        2,
        "amazon.titan-text-express-v1",
    )
    assert (found[1].commitment, found[1].commitment_expires) == ("OneMonth", expires)


def test_delete_reads_again_then_deletes_a_no_commitment_throughput(stubbed: Stubber) -> None:
    stubbed.add_response("get_provisioned_model_throughput", summary("a"), {"provisionedModelId": arn("a")})
    stubbed.add_response("delete_provisioned_model_throughput", {}, {"provisionedModelId": arn("a")})
    bedrock.ProvisionedThroughputs().delete("us-east-1", ACCOUNT, arn("a"), NOW)


def test_delete_refuses_a_throughput_under_commitment_without_calling_delete(stubbed: Stubber) -> None:
    item = summary("b", commitmentDuration="SixMonths", commitmentExpirationTime=NOW + timedelta(days=90))
    stubbed.add_response("get_provisioned_model_throughput", item, {"provisionedModelId": arn("b")})
    # No delete response is queued: the Stubber would fail the test if it were called.
    with pytest.raises(bedrock.CommittedThroughput, match="SixMonths"):
        bedrock.ProvisionedThroughputs().delete("us-east-1", ACCOUNT, arn("b"), NOW)


def test_remediator_marks_deletes_and_unmarks_a_throughput(
    stubbed: Stubber, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("costguard.clock.now", lambda: NOW)
    a = arn("a")
    stubbed.add_response(
        "tag_resource", {}, {"resourceARN": a, "tags": [{"key": MARK_TAG_KEY, "value": NOW.isoformat()}]}
    )
    stubbed.add_response("get_provisioned_model_throughput", summary("a"), {"provisionedModelId": a})
    stubbed.add_response("delete_provisioned_model_throughput", {}, {"provisionedModelId": a})
    stubbed.add_response("untag_resource", {}, {"resourceARN": a, "tagKeys": [MARK_TAG_KEY]})
    resource = Resource(
        kind=ResourceKind.PROVISIONED_THROUGHPUT, id="a", arn=a, account=ACCOUNT, region="us-east-1"
    )
    remediator = AwsRemediator()
    remediator.mark(resource, NOW)
    remediator.stop(resource)
    remediator.unmark(resource)


def test_a_sweep_of_three_throughputs_makes_one_list_one_series_walk_one_metric_read_and_three_tag_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = {"bedrock": client("bedrock"), "cloudwatch": client("cloudwatch")}
    monkeypatch.setattr(clients, "client", lambda service, region=None, account=None: made[service])
    monkeypatch.setattr(clients, "cloudwatch", lambda region=None, account=None: made["cloudwatch"])
    names = ["idle", "busy", "young"]
    items = [summary(n) for n in names[:2]] + [summary("young", creationTime=NOW - timedelta(hours=2))]
    with Stubber(made["bedrock"]) as br, Stubber(made["cloudwatch"]) as cw:
        br.add_response(
            "list_provisioned_model_throughputs",
            {"provisionedModelSummaries": items},
            {"statusEquals": "InService", "maxResults": bedrock.PAGE},
        )
        # One ListMetrics walk for the region: "idle" and "busy" have a series under their ARN, "young" none.
        cw.add_response(
            "list_metrics",
            {
                "Metrics": [
                    {
                        "Namespace": "AWS/Bedrock",
                        "MetricName": "Invocations",
                        "Dimensions": [{"Name": "ModelId", "Value": arn(n)}],
                    }
                    for n in ("idle", "busy")
                ]
            },
            {"Namespace": "AWS/Bedrock", "MetricName": "Invocations"},
        )
        cw.add_response(
            "get_metric_data",
            {"MetricDataResults": [{"Id": "q1", "Timestamps": [NOW - timedelta(hours=1)], "Values": [40.0]}]},
            {"MetricDataQueries": ANY, "StartTime": ANY, "EndTime": ANY, "ScanBy": ANY},
        )
        for n in names:
            br.add_response("list_tags_for_resource", {"tags": []}, {"resourceARN": arn(n)})
        runtime = SimpleNamespace(
            settings=parse_settings(bedrock_throughput_prices="amazon.titan-text-express-v1=10"),
            shadow_marks=None,
            dry_for=lambda *reasons: None,
            observe=lambda *args: None,
        )
        found = flow.findings_for("us-east-1", ACCOUNT, runtime, NOW, None)  # type: ignore[arg-type]
        br.assert_no_pending_responses()
        cw.assert_no_pending_responses()
    # "busy" (q1, its ARN's series) served 40 calls; "young" is not a window old.
    assert [(f.resource.id, f.hourly_usd, f.cost_usd) for f in found] == [("idle", 20.0, 480.0)]
