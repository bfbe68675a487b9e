"""Bedrock Provisioned Throughput for the local stack: moto implements none of the calls behind aws/bedrock.py,
so the adapter is served from the world file here (deletes and tags change an in-memory copy), and each
throughput's AWS/Bedrock Invocations are put into moto's CloudWatch for the sweep to read through the real
GetMetricData path."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from unittest import mock

from costguard.aws import clients
from costguard.aws.bedrock import ProvisionedThroughputs, from_api
from costguard.local.seed_metrics import datum, publish
from costguard.local.world import ProvisionedThroughput as Spec
from costguard.local.world import World
from costguard.model import ProvisionedThroughput

DEFAULT_AGE = timedelta(days=30)
METRICS_LOOKBACK = timedelta(hours=48)
PERIOD = timedelta(minutes=5)


class LocalBedrockError(RuntimeError):
    """What Bedrock would answer (an unknown throughput, a delete before the commitment's end)."""


ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def id_of(spec: Spec) -> str:
    """The 12-character id its ARN ends in, as AWS makes them: the world's, or one derived from its name."""
    if spec.id:
        return spec.id
    digest = hashlib.sha256(spec.name.encode()).digest()
    return "".join(ID_ALPHABET[b % len(ID_ALPHABET)] for b in digest[:12])


def arn_of(world: World, spec: Spec) -> str:
    """arn:aws:bedrock:<region>:<account>:provisioned-model/<12-character id>: the name is not in it."""
    return f"arn:aws:bedrock:{world.region}:{world.account}:provisioned-model/{id_of(spec)}"


def model_id_of(world: World, spec: Spec) -> str:
    """The ModelId its Invocations are published under. AWS's metric reference does not say which value a
    provisioned model's invocations carry: unless the world states its assumption (``arn``), the stand-in
    publishes under a spelling costguard does not read, so that what costguard does then is what is tested."""
    if spec.invocations_model_id == "arn":
        return arn_of(world, spec)
    return f"provisioned/{id_of(spec)}"


def created_of(world: World, spec: Spec) -> datetime:
    return spec.created or world.now - DEFAULT_AGE


@dataclass
class WorldThroughputs:
    """The world's throughputs, with what costguard changes on them (tags, deletion) kept in memory."""

    world: World
    tags: dict[str, dict[str, str]] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.by_arn: dict[str, tuple[World, Spec]] = {}
        for place in self.world.places():
            for spec in place.provisioned_throughputs:
                self.by_arn[arn_of(place, spec)] = (place, spec)
                self.tags[arn_of(place, spec)] = dict(spec.tags)

    def find(self, arn: str) -> tuple[World, Spec]:
        if arn not in self.by_arn or arn in self.deleted:
            raise LocalBedrockError(f"ResourceNotFoundException: {arn}")
        return self.by_arn[arn]

    def item(self, place: World, spec: Spec) -> dict[str, Any]:
        """The throughput as GetProvisionedModelThroughput answers it."""
        base = f"arn:aws:bedrock:{place.region}::foundation-model/{spec.model}"
        model = (
            f"arn:aws:bedrock:{place.region}:{place.account}:custom-model/{spec.model}/{spec.custom_model}"
            if spec.custom_model
            else base
        )
        item: dict[str, Any] = {
            "provisionedModelName": spec.name,
            "provisionedModelArn": arn_of(place, spec),
            "modelArn": model,
            "desiredModelArn": model,
            "foundationModelArn": base,
            "modelUnits": spec.model_units,
            "desiredModelUnits": spec.model_units,
            "status": "InService",
            "creationTime": created_of(place, spec),
            "lastModifiedTime": created_of(place, spec),
        }
        if spec.commitment != "none":
            item["commitmentDuration"] = spec.commitment
            if spec.commitment_expires:
                item["commitmentExpirationTime"] = spec.commitment_expires
        return item

    def in_service(self, region: str, account: str) -> list[ProvisionedThroughput]:
        if clients.is_member(account, region):
            clients.reach(account, region)  # the member role's credentials, as the real call would need them
        return [
            from_api(self.item(place, spec), account, region)
            for arn, (place, spec) in self.by_arn.items()
            if arn not in self.deleted and place.region == region and place.account == account
        ]

    def delete(self, arn: str, now: datetime) -> None:
        _, spec = self.find(arn)
        if spec.commitment != "none" and (spec.commitment_expires is None or spec.commitment_expires > now):
            raise LocalBedrockError(f"ValidationException: {spec.name} is under a commitment")
        self.deleted.add(arn)


@contextlib.contextmanager
def world_provisioned_throughputs(world: World) -> Iterator[WorldThroughputs]:
    """Serve the Bedrock adapter from the world; deletes and tags change the in-memory copy."""
    served = WorldThroughputs(world)

    def in_service(self: Any, region: str, account: str) -> list[ProvisionedThroughput]:
        return served.in_service(region, account or world.account)

    def tags_of(self: Any, region: str, account: str, arns: Sequence[str]) -> dict[str, dict[str, str]]:
        for arn in arns:
            served.find(arn)
        return {arn: dict(served.tags[arn]) for arn in arns}

    def describe(self: Any, region: str, account: str, arn: str) -> ProvisionedThroughput:
        place, spec = served.find(arn)
        return from_api(served.item(place, spec), place.account, place.region, served.tags[arn])

    def delete(self: Any, region: str, account: str, arn: str) -> None:
        from costguard import clock

        served.delete(arn, clock.now())

    def tag(self: Any, region: str, account: str, arn: str, key: str, value: str) -> None:
        served.find(arn)
        served.tags[arn][key] = value

    def untag(self: Any, region: str, account: str, arn: str, key: str) -> None:
        served.find(arn)
        served.tags[arn].pop(key, None)

    with (
        mock.patch.object(ProvisionedThroughputs, "in_service", in_service),
        mock.patch.object(ProvisionedThroughputs, "tags_of", tags_of),
        mock.patch.object(ProvisionedThroughputs, "describe", describe),
        mock.patch.object(ProvisionedThroughputs, "_delete", delete),
        mock.patch.object(ProvisionedThroughputs, "tag", tag),
        mock.patch.object(ProvisionedThroughputs, "untag", untag),
    ):
        yield served


def publish_bedrock_metrics(world: World, until: datetime | None = None) -> None:  # one place of the world
    """AWS/Bedrock Invocations (ModelId: model_id_of) every five minutes of traffic, until ``invoked_until``; a
    throughput nobody calls publishes nothing, as Bedrock does."""
    data: list[dict[str, Any]] = []
    for spec in world.provisioned_throughputs:
        if not spec.invocations_per_hour:
            continue
        end = max(until or world.now, world.now)
        if spec.invoked_until is not None:
            end = min(end, spec.invoked_until)
        dims = [{"Name": "ModelId", "Value": model_id_of(world, spec)}]
        at = max(created_of(world, spec), min(world.now, end) - METRICS_LOOKBACK).replace(
            second=0, microsecond=0
        )
        per_period = round(spec.invocations_per_hour * PERIOD.total_seconds() / 3600, 4)
        while at < end:
            data.append(datum("Invocations", dims, at, per_period, "Count"))
            at += PERIOD
    if data:
        publish(world.account, world.region, "AWS/Bedrock", data)
