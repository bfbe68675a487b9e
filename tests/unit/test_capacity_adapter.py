"""The capacity-reservation adapter against botocore's real EC2 model: moto implements none of its calls."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.stub import Stubber

from costguard.act.aws import AwsRemediator
from costguard.aws import capacity, clients
from costguard.aws.inventory import catalog
from costguard.model import MARK_TAG_KEY, Resource, ResourceKind


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stubber]:
    ec2 = boto3.session.Session().client(
        "ec2", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    monkeypatch.setattr(clients, "ec2", lambda region=None: ec2)
    monkeypatch.setattr(catalog, "_known", {})  # instance types are described afresh, through the stub
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


def test_active_lists_active_reservations_page_by_page_with_their_dates(stubbed: Stubber) -> None:
    request = {"Filters": [{"Name": "state", "Values": ["active"]}], "MaxResults": capacity.DESCRIBE_PAGE}
    start = datetime(2026, 11, 20, 11, tzinfo=UTC)
    stubbed.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [item("cr-0000000000000000a")], "NextToken": "t"},
        request,
    )
    stubbed.add_response(
        "describe_capacity_reservations",
        {
            "CapacityReservations": [
                item(
                    "cr-0000000000000000b",
                    ReservationType="capacity-block",
                    StartDate=start,
                    EndDate=start + timedelta(days=2),
                )
            ]
        },
        request | {"NextToken": "t"},
    )
    found = capacity.CapacityReservations().active("us-east-1", "123456789012")
    assert [r.id for r in found] == ["cr-0000000000000000a", "cr-0000000000000000b"]
    block = found[1]
    assert block.is_capacity_block and not found[0].is_capacity_block
    assert (block.start, block.end) == (start, start + timedelta(days=2))


def test_cancel_describes_then_cancels_an_odcr(stubbed: Stubber) -> None:
    cr = "cr-0000000000000000a"
    stubbed.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [item(cr)]},
        {"CapacityReservationIds": [cr]},
    )
    stubbed.add_response("cancel_capacity_reservation", {"Return": True}, {"CapacityReservationId": cr})
    capacity.CapacityReservations().cancel("us-east-1", cr)


def test_cancel_refuses_a_capacity_block_without_calling_cancel(stubbed: Stubber) -> None:
    cr = "cr-0000000000000000b"
    stubbed.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [item(cr, ReservationType="capacity-block")]},
        {"CapacityReservationIds": [cr]},
    )
    # No cancel_capacity_reservation response is queued: the Stubber would fail the test if it were called.
    with pytest.raises(capacity.CapacityBlockNotCancellable):
        capacity.CapacityReservations().cancel("us-east-1", cr)


def test_remediator_stop_of_a_reservation_cancels_it_and_mark_tags_it(stubbed: Stubber) -> None:
    cr = "cr-0000000000000000a"
    marked_at = datetime(2026, 11, 20, 12, tzinfo=UTC)
    stubbed.add_response(
        "create_tags",
        {},
        {"Resources": [cr], "Tags": [{"Key": MARK_TAG_KEY, "Value": marked_at.isoformat()}]},
    )
    stubbed.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [item(cr)]},
        {"CapacityReservationIds": [cr]},
    )
    stubbed.add_response("cancel_capacity_reservation", {"Return": True}, {"CapacityReservationId": cr})
    stubbed.add_response("delete_tags", {}, {"Resources": [cr], "Tags": [{"Key": MARK_TAG_KEY}]})
    resource = Resource(
        kind=ResourceKind.CAPACITY_RESERVATION, id=cr, account="123456789012", region="us-east-1"
    )
    remediator = AwsRemediator()
    remediator.mark(resource, marked_at)
    remediator.stop(resource)
    remediator.unmark(resource)


def test_instances_in_filters_by_reservation_and_groups_by_it(stubbed: Stubber) -> None:
    ids = ["cr-0000000000000000a", "cr-0000000000000000b"]
    stubbed.add_response(
        "describe_instances",
        {
            "Reservations": [
                {
                    "OwnerId": "123456789012",
                    "Instances": [
                        {
                            "InstanceId": "i-0000000000000000a",
                            "InstanceType": "p5.48xlarge",
                            "State": {"Name": "running", "Code": 16},
                            "CapacityReservationId": ids[0],
                            "Tags": [{"Key": "sagemaker:training-job-name", "Value": "llm"}],
                        }
                    ],
                }
            ]
        },
        {
            "Filters": [
                {"Name": "capacity-reservation-id", "Values": ids},
                {"Name": "instance-state-name", "Values": ["pending", "running"]},
            ],
            "MaxResults": capacity.INSTANCES_PAGE,
        },
    )
    stubbed.add_response(
        "describe_instance_types",
        {"InstanceTypes": [{"InstanceType": "p5.48xlarge"}]},
        {"InstanceTypes": ["p5.48xlarge"]},
    )
    found = capacity.CapacityReservations().instances_in("us-east-1", "123456789012", ids)
    assert [i.id for i in found[ids[0]]] == ["i-0000000000000000a"]
    assert found[ids[0]][0].tags == {"sagemaker:training-job-name": "llm"}
    assert found[ids[1]] == []
