"""EC2 capacity reservations behind one adapter. moto implements none of these calls (describe, cancel, tags on a
reservation, the capacity-reservation-id instance filter), so the local stack serves this class from the world
file (local/capacity.py); the real calls are tested with botocore's Stubber against the EC2 service model."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from costguard.aws import clients, inventory
from costguard.aws.inventory import catalog, instance_from_api
from costguard.events.common import to_datetime
from costguard.model import CapacityReservation, Ec2Instance
from costguard.permissions import needs

DESCRIBE_PAGE = 1000  # DescribeCapacityReservations' MaxResults
INSTANCES_PAGE = 1000
LIVE_INSTANCE_STATES = ("pending", "running")

# describe, active, instances_in (which describes the instances' types too).
READ_PERMISSIONS = needs("ec2:DescribeCapacityReservations") | inventory.PERMISSIONS
# cancel, tag, untag: what AwsRemediator does to a reservation.
REMEDIATE_PERMISSIONS = needs("ec2:CancelCapacityReservation", "ec2:CreateTags", "ec2:DeleteTags")


class CapacityBlockNotCancellable(RuntimeError):
    """AWS does not allow cancelling a Capacity Block; costguard refuses before asking."""


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
        start=_aware(item.get("StartDate")),
        created=_aware(item.get("CreateDate")),
        end=_aware(item.get("EndDate")),
    )


def _aware(value: datetime | None) -> datetime | None:
    return to_datetime(value) if value is not None else None


class CapacityReservations:
    """DescribeCapacityReservations, CancelCapacityReservation, and the mark tag on a reservation."""

    def describe(self, region: str, account: str, ids: Sequence[str]) -> list[CapacityReservation]:
        """By id (paginated); ids EC2 does not know are left out."""
        if not ids:
            return []
        return self._pages(region, account, {"CapacityReservationIds": list(ids)})

    def active(self, region: str, account: str) -> list[CapacityReservation]:
        """Every active reservation of the region, ODCRs and Capacity Blocks: ceil(n/1000) calls."""
        return self._pages(
            region,
            account,
            {"Filters": [{"Name": "state", "Values": ["active"]}], "MaxResults": DESCRIBE_PAGE},
        )

    def _pages(self, region: str, account: str, request: dict[str, Any]) -> list[CapacityReservation]:
        ec2: Any = clients.ec2(region)
        found: list[CapacityReservation] = []
        for page in ec2.get_paginator("describe_capacity_reservations").paginate(**request):
            found += [from_api(item, account, region) for item in page.get("CapacityReservations", [])]
        return found

    def cancel(self, region: str, reservation_id: str) -> None:
        """Cancel an ODCR. It is described first: a Capacity Block is refused here, whatever the caller decided."""
        if any(r.is_capacity_block for r in self.describe(region, "", [reservation_id])):
            raise CapacityBlockNotCancellable(
                f"{reservation_id} is a Capacity Block: AWS does not allow cancelling it"
            )
        self._cancel(region, reservation_id)

    def _cancel(self, region: str, reservation_id: str) -> None:
        clients.ec2(region).cancel_capacity_reservation(CapacityReservationId=reservation_id)

    def tag(self, region: str, reservation_id: str, key: str, value: str) -> None:
        clients.ec2(region).create_tags(Resources=[reservation_id], Tags=[{"Key": key, "Value": value}])

    def untag(self, region: str, reservation_id: str, key: str) -> None:
        clients.ec2(region).delete_tags(Resources=[reservation_id], Tags=[{"Key": key}])

    def instances_in(self, region: str, account: str, ids: Sequence[str]) -> dict[str, list[Ec2Instance]]:
        """Pending and running instances in each reservation (DescribeInstances, filter capacity-reservation-id)."""
        found: dict[str, list[Ec2Instance]] = {cr: [] for cr in ids}
        if not ids:
            return found
        ec2: Any = clients.ec2(region)
        request = {
            "Filters": [
                {"Name": "capacity-reservation-id", "Values": list(ids)},
                {"Name": "instance-state-name", "Values": list(LIVE_INSTANCE_STATES)},
            ],
            "MaxResults": INSTANCES_PAGE,
        }
        raw = [
            (reservation.get("OwnerId", account), instance)
            for page in ec2.get_paginator("describe_instances").paginate(**request)
            for reservation in page["Reservations"]
            for instance in reservation["Instances"]
        ]
        accelerators = catalog.lookup(region, {i["InstanceType"] for _, i in raw}) if raw else {}
        for owner, item in raw:
            reservation_id = item.get("CapacityReservationId")
            if reservation_id in found:
                found[reservation_id].append(instance_from_api(item, owner, region, accelerators))
        return found


def capacity_reservations() -> CapacityReservations:
    return CapacityReservations()
