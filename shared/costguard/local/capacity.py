"""Capacity reservations for the local stack: moto implements none of the calls behind aws/capacity.py, so the
adapter is served from the world file here, and the reservations' AWS/EC2CapacityReservations metrics are put
into moto's CloudWatch for the sweep to read through the real GetMetricData path."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from unittest import mock

from costguard.aws import clients
from costguard.aws.capacity import LIVE_INSTANCE_STATES, CapacityReservations, from_api
from costguard.aws.inventory import catalog, instance_from_api
from costguard.local.seed_metrics import datum, publish
from costguard.local.world import CapacityReservation, World
from costguard.model import CapacityReservation as Reservation
from costguard.model import Ec2Instance

METRICS_LOOKBACK = timedelta(hours=48)  # how far back a reservation's series starts when it has no start
PERIOD = timedelta(minutes=5)


# How long before it became active (or before the world's now) a reservation of the world file was created.
CREATED_BEFORE_START = timedelta(days=1)


class LocalCapacityError(RuntimeError):
    """What EC2 would answer (an unknown reservation, one that is not active)."""


@dataclass
class WorldCapacity:
    """The world's reservations with what costguard changes on them (tags, cancellation) kept in memory."""

    world: World
    tags: dict[str, dict[str, str]] = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.places = {(place.account, place.region): place for place in self.world.places()}
        for place in self.places.values():
            for spec in place.capacity_reservations:
                self.tags[spec.id] = dict(spec.tags)
                self.states[spec.id] = spec.state

    def spec(self, reservation_id: str) -> CapacityReservation:
        for place in self.places.values():
            for spec in place.capacity_reservations:
                if spec.id == reservation_id:
                    return spec
        raise LocalCapacityError(f"InvalidCapacityReservationId.NotFound: {reservation_id}")

    def place_of(self, reservation_id: str) -> World:
        for place in self.places.values():
            if any(spec.id == reservation_id for spec in place.capacity_reservations):
                return place
        raise LocalCapacityError(f"InvalidCapacityReservationId.NotFound: {reservation_id}")

    def item(self, spec: CapacityReservation) -> dict[str, Any]:
        """The reservation as DescribeCapacityReservations returns it."""
        world = self.place_of(spec.id)
        item: dict[str, Any] = {
            "CapacityReservationId": spec.id,
            "OwnerId": world.account,
            "CapacityReservationArn": f"arn:aws:ec2:{world.region}:{world.account}:capacity-reservation/{spec.id}",
            "InstanceType": spec.instance_type,
            "TotalInstanceCount": spec.total,
            "AvailableInstanceCount": max(spec.total - spec.used, 0),
            "State": self.states[spec.id],
            "ReservationType": "capacity-block" if spec.kind == "capacity_block" else "default",
            "AvailabilityZone": spec.availability_zone,
            "Tags": [{"Key": k, "Value": v} for k, v in self.tags[spec.id].items()],
        }
        # EC2 always answers a CreateDate; the world file gives when it became active, so it was created before.
        item["CreateDate"] = (spec.start or world.now) - CREATED_BEFORE_START
        if spec.start:
            item["StartDate"] = spec.start
        if spec.end:
            item["EndDate"] = spec.end
        return item

    def reservations(
        self, region: str, account: str, wanted: Sequence[str] | None = None
    ) -> list[Reservation]:
        if clients.is_member(account, region):
            clients.reach(account, region)  # the member role's credentials, as the real call would need them
        place = self.places.get((account, region))
        if place is None:
            return []
        return [
            from_api(self.item(spec), account, region)
            for spec in place.capacity_reservations
            if wanted is None or spec.id in wanted
        ]

    def cancel(self, reservation_id: str) -> None:
        if self.states[self.spec(reservation_id).id] != "active":
            raise LocalCapacityError(f"IncorrectState: {reservation_id} is {self.states[reservation_id]}")
        self.states[reservation_id] = "cancelled"

    def instances_in(self, region: str, account: str, ids: Sequence[str]) -> dict[str, list[Ec2Instance]]:
        """Instances the world places in the reservations, as moto's DescribeInstances describes them."""
        found: dict[str, list[Ec2Instance]] = {cr: [] for cr in ids}
        placed = {
            i.id: i.capacity_reservation_id
            for place in self.places.values()
            if place.region == region and (place.account == account or not account)
            for i in place.instances
            if i.capacity_reservation_id in found
        }
        if not placed:
            return found
        ec2: Any = clients.ec2(region, account or None)
        pages = ec2.get_paginator("describe_instances").paginate(
            InstanceIds=sorted(placed),
            Filters=[{"Name": "instance-state-name", "Values": list(LIVE_INSTANCE_STATES)}],
        )
        raw = [
            (r.get("OwnerId", ""), i) for page in pages for r in page["Reservations"] for i in r["Instances"]
        ]
        accelerators = catalog.lookup(region, {i["InstanceType"] for _, i in raw}) if raw else {}
        for owner, item in raw:
            found[placed[item["InstanceId"]]].append(instance_from_api(item, owner, region, accelerators))
        return found


@contextlib.contextmanager
def world_capacity_reservations(world: World) -> Iterator[WorldCapacity]:
    """Serve the capacity adapter from the world; cancels and tags change the in-memory copy."""
    served = WorldCapacity(world)

    def describe(self: Any, region: str, account: str, ids: Sequence[str]) -> list[Reservation]:
        return served.reservations(region, account or world.account, list(ids)) if ids else []

    def active(self: Any, region: str, account: str) -> list[Reservation]:
        return [r for r in served.reservations(region, account) if r.state == "active"]

    def cancel(self: Any, region: str, reservation_id: str) -> None:
        served.cancel(reservation_id)

    def tag(self: Any, region: str, reservation_id: str, key: str, value: str) -> None:
        served.tags[served.spec(reservation_id).id][key] = value

    def untag(self: Any, region: str, reservation_id: str, key: str) -> None:
        served.tags[served.spec(reservation_id).id].pop(key, None)

    def instances_in(
        self: Any, region: str, account: str, ids: Sequence[str]
    ) -> dict[str, list[Ec2Instance]]:
        return served.instances_in(region, account, ids)

    with (
        mock.patch.object(CapacityReservations, "describe", describe),
        mock.patch.object(CapacityReservations, "active", active),
        mock.patch.object(CapacityReservations, "_cancel", cancel),
        mock.patch.object(CapacityReservations, "tag", tag),
        mock.patch.object(CapacityReservations, "untag", untag),
        mock.patch.object(CapacityReservations, "instances_in", instances_in),
    ):
        yield served


def capacity_series(spec: CapacityReservation, now: datetime, until: datetime) -> list[datetime]:
    """The five-minute timestamps a reservation publishes at: from its start (at most 48 hours back) on."""
    begin = max(spec.start or now - METRICS_LOOKBACK, now - METRICS_LOOKBACK)
    begin = begin.replace(second=0, microsecond=0)
    begin += timedelta(minutes=(-begin.minute) % 5)
    end = min(max(until, now), spec.end) if spec.end else max(until, now)
    times = []
    at = begin
    while at < end:
        times.append(at)
        at += PERIOD
    return times


def publish_capacity_metrics(world: World, until: datetime | None = None) -> None:  # one place of the world
    """InstanceUtilization and UsedInstanceCount of every active reservation, every five minutes."""
    data: list[dict[str, Any]] = []
    for spec in world.capacity_reservations:
        if spec.state != "active":
            continue
        dims = [{"Name": "CapacityReservationId", "Value": spec.id}]
        for at in capacity_series(spec, world.now, until or world.now):
            data.append(datum("InstanceUtilization", dims, at, spec.utilization, "Percent"))
            data.append(datum("UsedInstanceCount", dims, at, float(spec.used), "Count"))
    if not data:
        return
    publish(world.account, world.region, "AWS/EC2CapacityReservations", data)
