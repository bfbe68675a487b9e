"""EC2 capacity reservations behind one adapter: moto does not implement DescribeCapacityReservations, so the
local stack swaps ``CapacityReservations.describe`` for one that reads the world file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from costguard.aws import clients
from costguard.model import CapacityReservation

DESCRIBE_PAGE = 1000  # DescribeCapacityReservations' MaxResults


def from_api(item: dict[str, Any], account: str, region: str) -> CapacityReservation:
    return CapacityReservation(
        id=item["CapacityReservationId"],
        account=item.get("OwnerId", account),
        region=region,
        instance_type=item["InstanceType"],
        total=int(item.get("TotalInstanceCount", 0)),
        available=int(item.get("AvailableInstanceCount", 0)),
        state=item.get("State", "active"),
        reservation_type=item.get("ReservationType", "default"),
        availability_zone=item.get("AvailabilityZone"),
        arn=item.get("CapacityReservationArn"),
        tags={t["Key"]: t["Value"] for t in item.get("Tags", [])},
    )


class CapacityReservations:
    """DescribeCapacityReservations by id (paginated); ids EC2 does not know are left out."""

    def describe(self, region: str, account: str, ids: Sequence[str]) -> list[CapacityReservation]:
        if not ids:
            return []
        ec2: Any = clients.ec2(region)
        found: list[CapacityReservation] = []
        for page in ec2.get_paginator("describe_capacity_reservations").paginate(
            CapacityReservationIds=list(ids)
        ):
            found += [from_api(item, account, region) for item in page.get("CapacityReservations", [])]
        return found


def capacity_reservations() -> CapacityReservations:
    return CapacityReservations()
