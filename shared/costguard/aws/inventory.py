"""What runs: GPU and accelerator instances, with their accelerators, read in as few calls as the APIs allow."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from costguard.aws import clients
from costguard.model import DRY_RUN_STOPPED_TAG_KEY, Accelerators, Ec2Instance
from costguard.permissions import needs

DESCRIBE_INSTANCES_PAGE = 1000  # the API's maximum page
DESCRIBE_TYPES_BATCH = 100  # DescribeInstanceTypes takes at most 100 names

# The accelerator catalog alone; describing instances also describes their types.
TYPES_PERMISSIONS = needs("ec2:DescribeInstanceTypes")
PERMISSIONS = TYPES_PERMISSIONS | needs("ec2:DescribeInstances")
# stop_protected: read for the instances about to be stopped only (act/aws.py counts it among the EC2 stop needs).
STOP_PROTECTION_PERMISSIONS = needs("ec2:DescribeInstanceAttribute")


def accelerators_of(described: dict[str, Any]) -> Accelerators | None:
    gpus = (described.get("GpuInfo") or {}).get("Gpus") or []
    if gpus:
        first = gpus[0]
        kind = "nvidia_gpu" if str(first.get("Manufacturer", "")).upper() == "NVIDIA" else "gpu"
        return Accelerators(
            kind=kind,
            count=sum(int(g.get("Count", 0)) for g in gpus),
            model=str(first.get("Name", "GPU")),
            memory_mib=(first.get("MemoryInfo") or {}).get("SizeInMiB"),
        )
    neuron = (described.get("NeuronInfo") or {}).get("NeuronDevices") or []
    if neuron:
        first = neuron[0]
        return Accelerators(
            kind="neuron",
            count=sum(int(d.get("Count", 0)) for d in neuron),
            model=str(first.get("Name", "Neuron")),
            memory_mib=(first.get("MemoryInfo") or {}).get("SizeInMiB"),
        )
    return None


class AcceleratorCatalog:
    """Instance type -> accelerators, asked of DescribeInstanceTypes once per type per process."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], Accelerators | None] = {}

    def lookup(self, region: str, instance_types: Iterable[str]) -> dict[str, Accelerators | None]:
        wanted = sorted({t.removeprefix("ml.") for t in instance_types})
        missing = [t for t in wanted if (region, t) not in self._known]
        ec2 = clients.ec2(region)
        for start in range(0, len(missing), DESCRIBE_TYPES_BATCH):
            batch = missing[start : start + DESCRIBE_TYPES_BATCH]
            described = _describe_types(ec2, batch)
            for name in batch:
                self._known[(region, name)] = accelerators_of(described[name]) if name in described else None
        return {t: self._known[(region, t.removeprefix("ml."))] for t in instance_types}


def _describe_types(ec2: Any, names: list[str]) -> dict[str, dict[str, Any]]:
    try:
        pages = ec2.get_paginator("describe_instance_types").paginate(InstanceTypes=names)
        return {t["InstanceType"]: t for page in pages for t in page["InstanceTypes"]}
    except ec2.exceptions.ClientError as error:
        if error.response["Error"]["Code"] != "InvalidInstanceType" or len(names) == 1:
            if len(names) == 1:
                return {}  # a type this region does not know (an ml.-only type, say): no accelerators known
            raise
        # One unknown name fails the whole call: split and retry so the rest are still described.
        middle = len(names) // 2
        return _describe_types(ec2, names[:middle]) | _describe_types(ec2, names[middle:])


catalog = AcceleratorCatalog()


def describe_gpu_instances(
    region: str, *, instance_ids: Sequence[str] | None = None, states: Sequence[str] = ("running",)
) -> list[Ec2Instance]:
    """Running instances that carry accelerators: ceil(instances/1000) DescribeInstances calls, plus
    ceil(new types/100) DescribeInstanceTypes calls the first time a type is seen."""
    ec2 = clients.ec2(region)
    request: dict[str, Any] = {"Filters": [{"Name": "instance-state-name", "Values": list(states)}]}
    if instance_ids:
        request["InstanceIds"] = list(instance_ids)
    else:
        request["MaxResults"] = DESCRIBE_INSTANCES_PAGE
    raw: list[tuple[str, Any]] = []
    try:
        for page in ec2.get_paginator("describe_instances").paginate(**request):
            for reservation in page["Reservations"]:
                raw.extend((reservation.get("OwnerId", ""), i) for i in reservation["Instances"])
    except ec2.exceptions.ClientError as error:
        if instance_ids and error.response["Error"]["Code"] == "InvalidInstanceID.NotFound":
            return []  # gone since the event was sent
        raise
    accelerators = catalog.lookup(region, {i["InstanceType"] for _, i in raw})
    return [
        instance_from_api(i, owner, region, accelerators)
        for owner, i in raw
        if accelerators[i["InstanceType"]] is not None
    ]


def describe_instance(region: str, instance_id: str) -> Ec2Instance | None:
    """One instance of any type, with its tags and accelerators (None for a CPU type); None when it is gone."""
    ec2 = clients.ec2(region)
    try:
        reservations = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    except ec2.exceptions.ClientError as error:
        if error.response["Error"]["Code"] in ("InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"):
            return None
        raise
    found = [(r.get("OwnerId", ""), i) for r in reservations for i in r["Instances"]]
    if not found:
        return None
    owner, raw = found[0]
    return instance_from_api(raw, owner, region, catalog.lookup(region, [raw["InstanceType"]]))


def instance_from_api(
    item: Mapping[str, Any], owner: str, region: str, accelerators: Mapping[str, Accelerators | None]
) -> Ec2Instance:
    """One DescribeInstances item, with the accelerators of its type (None for a CPU type)."""
    return Ec2Instance(
        id=item["InstanceId"],
        type=item["InstanceType"],
        state=item["State"]["Name"],
        account=owner,
        region=region,
        launch_time=item.get("LaunchTime"),
        # costguard's own marker of a dry run's decided stop is added by notify mode's overlay only (act/shadow.py):
        # the same key written on the instance by anyone means nothing, and must not slow its reads.
        tags={t["Key"]: t["Value"] for t in item.get("Tags", []) if t["Key"] != DRY_RUN_STOPPED_TAG_KEY},
        lifecycle=item.get("InstanceLifecycle"),
        accelerators=accelerators.get(item["InstanceType"]),
    )


def stop_protected(region: str, instance_id: str, account: str | None = None) -> bool:
    """Whether the instance's stop protection (``DisableApiStop``) is on: EC2 then refuses every StopInstances
    (OperationNotPermitted) until its owner turns it off. DescribeInstances does not carry the attribute, so
    this is one DescribeInstanceAttribute call per instance: made for stop candidates only, never the fleet."""
    answer = clients.ec2(region, account).describe_instance_attribute(
        InstanceId=instance_id, Attribute="disableApiStop"
    )
    return bool((answer.get("DisableApiStop") or {}).get("Value", False))
