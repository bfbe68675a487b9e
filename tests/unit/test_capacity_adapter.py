"""The capacity-reservation adapter against botocore's real EC2 model (moto has no DescribeCapacityReservations)."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from botocore.stub import Stubber

from costguard.aws import capacity, clients


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stubber]:
    ec2 = boto3.session.Session().client(
        "ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    monkeypatch.setattr(clients, "ec2", lambda region=None: ec2)
    with Stubber(ec2) as stubber:
        yield stubber
        stubber.assert_no_pending_responses()


def item(cr: str, **extra: object) -> dict[str, object]:
    return {
        "CapacityReservationId": cr,
        "OwnerId": "123456789012",
        "CapacityReservationArn": f"arn:aws:ec2:us-east-1:123456789012:capacity-reservation/{cr}",
        "InstanceType": "p4d.24xlarge",
        "AvailabilityZone": "us-east-1a",
        "TotalInstanceCount": 2,
        "AvailableInstanceCount": 1,
        "State": "active",
        "Tags": [{"Key": "team", "Value": "ml"}],
        **extra,
    }


def test_describe_follows_pages_and_maps_fields(stubbed: Stubber) -> None:
    ids = ["cr-0000000000000000a", "cr-0000000000000000b"]
    stubbed.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [item(ids[0])], "NextToken": "t"},
        {"CapacityReservationIds": ids},
    )
    stubbed.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [item(ids[1], ReservationType="capacity-block")]},
        {"CapacityReservationIds": ids, "NextToken": "t"},
    )
    found = capacity.CapacityReservations().describe("us-east-1", "123456789012", ids)
    assert [r.id for r in found] == ids
    first = found[0]
    assert (first.instance_type, first.total, first.available, first.state) == (
        "p4d.24xlarge",
        2,
        1,
        "active",
    )
    assert first.tags == {"team": "ml"}
    assert first.reservation_type == "default"
    assert found[1].reservation_type == "capacity-block"


def test_no_ids_makes_no_call(stubbed: Stubber) -> None:
    assert capacity.CapacityReservations().describe("us-east-1", "123456789012", []) == []
