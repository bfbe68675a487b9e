"""The Metrics Insights alarm quota adapter against botocore's real Service Quotas model (moto lists no
CloudWatch quota)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from costguard.aws import clients, quotas


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stubber]:
    made = boto3.session.Session().client(
        "service-quotas", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    monkeypatch.setattr(clients, "client", lambda service, region=None, account=None: made)
    with Stubber(made) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def quota(name: str, value: float, code: str = "L-0000ABCD") -> dict[str, Any]:
    return {"ServiceCode": "monitoring", "QuotaName": name, "QuotaCode": code, "Value": value}


MONITORING = {"ServiceCode": "monitoring"}


def test_the_applied_quota_is_found_by_name_across_pages(stubbed: Stubber) -> None:
    stubbed.add_response(
        "list_service_quotas",
        {"Quotas": [quota("Number of Contributor Insights rules", 100)], "NextToken": "t"},
        MONITORING,
    )
    stubbed.add_response(
        "list_service_quotas",
        {"Quotas": [quota("Number of Metrics Insights alarms", 300)]},
        {**MONITORING, "NextToken": "t"},
    )
    assert quotas.metrics_insights_alarm_quota("us-east-1") == quotas.Quota(300, "applied to the account")


def test_the_default_is_read_when_none_is_applied(stubbed: Stubber) -> None:
    stubbed.add_response("list_service_quotas", {"Quotas": []}, MONITORING)
    stubbed.add_response(
        "list_aws_default_service_quotas",
        {"Quotas": [quota("Number of Metrics Insights alarms", 200)]},
        MONITORING,
    )
    assert quotas.metrics_insights_alarm_quota("us-east-1") == quotas.Quota(200, "AWS default")


def test_none_when_service_quotas_lists_neither(stubbed: Stubber) -> None:
    stubbed.add_response("list_service_quotas", {"Quotas": []}, MONITORING)
    stubbed.add_response(
        "list_aws_default_service_quotas", {"Quotas": [quota("Canary limit", 500)]}, MONITORING
    )
    assert quotas.metrics_insights_alarm_quota("us-east-1") is None
