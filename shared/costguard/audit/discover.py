"""What the audit judges in one region: running GPU and accelerator resources, and the priced types offered there.

EC2 instances come from aws/inventory.py (ceil(instances/1000) DescribeInstances calls); SageMaker training
jobs, notebook instances and endpoints from aws/sagemaker.py. Instance type facts come from
DescribeInstanceTypes (100 names a call) and capacity from DescribeInstanceTypeOfferings.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from costguard.audit.model import Subject, TypeFacts, TypeOption
from costguard.aws import clients, inference_components, inventory, price_list, sagemaker
from costguard.aws.inventory import DESCRIBE_TYPES_BATCH, _describe_types, describe_gpu_instances
from costguard.aws.sagemaker import in_progress_jobs_described, in_service_endpoints, in_service_notebooks
from costguard.model import ResourceKind
from costguard.permissions import needs
from costguard.pricing import PriceBook, bundled_regions, region_prices

OFFERINGS_FILTER_VALUES = 200  # DescribeInstanceTypeOfferings takes up to 200 values in one filter

# discover; an endpoint's inference components, where its requests are counted (ListInferenceComponents).
DISCOVER_PERMISSIONS = (
    inventory.PERMISSIONS | sagemaker.INVENTORY_PERMISSIONS | inference_components.PERMISSIONS
)
# priced_options: type facts, what the region offers, and (with live prices) the Price List.
PRICED_OPTIONS_PERMISSIONS = (
    inventory.TYPES_PERMISSIONS | needs("ec2:DescribeInstanceTypeOfferings") | price_list.PERMISSIONS
)


def facts_of(described: dict[str, Any]) -> TypeFacts:
    gpus = (described.get("GpuInfo") or {}).get("Gpus") or []
    neuron = (described.get("NeuronInfo") or {}).get("NeuronDevices") or []
    devices, kind = (gpus, None) if gpus else (neuron, "neuron")
    if gpus:
        kind = "nvidia_gpu" if str(gpus[0].get("Manufacturer", "")).upper() == "NVIDIA" else "gpu"
    first = devices[0] if devices else {}
    return TypeFacts(
        name=described["InstanceType"],
        accelerator_kind=kind if devices else None,
        accelerator_count=sum(int(d.get("Count", 0)) for d in devices),
        accelerator_model=first.get("Name"),
        accelerator_memory_mib=int((first.get("MemoryInfo") or {}).get("SizeInMiB") or 0),
        vcpus=int((described.get("VCpuInfo") or {}).get("DefaultVCpus") or 0),
    )


def type_facts(region: str, instance_types: Iterable[str]) -> dict[str, TypeFacts]:
    """Facts by EC2 type name (the ``ml.`` prefix dropped): ceil(types/100) DescribeInstanceTypes calls."""
    names = sorted({t.removeprefix("ml.") for t in instance_types})
    ec2 = clients.ec2(region)
    found: dict[str, TypeFacts] = {}
    for start in range(0, len(names), DESCRIBE_TYPES_BATCH):
        for name, described in _describe_types(ec2, names[start : start + DESCRIBE_TYPES_BATCH]).items():
            found[name] = facts_of(described)
    return found


def offered_types(region: str, instance_types: Iterable[str]) -> set[str]:
    """The EC2 types with capacity offered in the region."""
    names = sorted({t.removeprefix("ml.") for t in instance_types})
    ec2 = clients.ec2(region)
    offered: set[str] = set()
    for start in range(0, len(names), OFFERINGS_FILTER_VALUES):
        pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
            LocationType="region",
            Filters=[{"Name": "instance-type", "Values": names[start : start + OFFERINGS_FILTER_VALUES]}],
        )
        offered.update(o["InstanceType"] for page in pages for o in page["InstanceTypeOfferings"])
    return offered


def priced_options(
    region: str, prices: PriceBook, current_types: Iterable[str]
) -> tuple[list[TypeOption], dict[str, float]]:
    """The types a recommendation may name (offered, described, priced) and the price of every current type.

    Candidates are the types of the bundled price table in any region (priced for this region by the table, or
    by the live Price List when on); SageMaker ``ml.`` types count as offered where their EC2 type is.
    """
    candidates = {
        t for r in bundled_regions() for service in ("ec2", "sagemaker") for t in region_prices(r, service)
    }
    current = set(current_types)
    offered = offered_types(region, candidates)
    facts = type_facts(region, {t for t in candidates if t.removeprefix("ml.") in offered} | current)
    hourly: dict[str, float] = {}
    for instance_type in candidates | current:
        price = prices.hourly(instance_type, region)
        if price is not None:
            hourly[instance_type] = price.usd_per_hour
    options = [
        TypeOption(facts=facts[t.removeprefix("ml.")], instance_type=t, hourly_usd=hourly[t])
        for t in sorted(candidates)
        if t in hourly and t.removeprefix("ml.") in offered and t.removeprefix("ml.") in facts
    ]
    return options, {t: hourly[t] for t in current if t in hourly}


def _hours(since: datetime | None, now: datetime) -> float:
    return round(max(0.0, (now - since).total_seconds() / 3600), 1) if since else 0.0


def discover(region: str, now: datetime) -> list[Subject]:
    """Every running GPU or accelerator resource in the region, with its type facts."""
    subjects: list[Subject] = []
    for instance in describe_gpu_instances(region):
        subjects.append(
            Subject(
                kind=ResourceKind.EC2_INSTANCE,
                id=instance.id,
                name=instance.name,
                account=instance.account,
                region=region,
                instance_type=instance.type,
                spot=instance.lifecycle == "spot",
                running_hours=_hours(instance.launch_time, now),
                tags=instance.tags,
            )
        )
    for job in in_progress_jobs_described(region):
        config = job.get("ResourceConfig") or {}
        if not config.get("InstanceType"):
            continue  # a heterogeneous cluster names no single type
        subjects.append(
            Subject(
                kind=ResourceKind.TRAINING_JOB,
                id=job["TrainingJobName"],
                name=job["TrainingJobName"],
                account=job["TrainingJobArn"].split(":")[4],
                region=region,
                instance_type=config["InstanceType"],
                instance_count=int(config.get("InstanceCount", 1)),
                spot=bool(job.get("EnableManagedSpotTraining")),
                checkpointed=bool((job.get("CheckpointConfig") or {}).get("S3Uri")),
                running_hours=_hours(job.get("TrainingStartTime"), now),
                tags=dict(job.get("Tags") or {}),
            )
        )
    for notebook in in_service_notebooks(region):
        subjects.append(
            Subject(
                kind=ResourceKind.NOTEBOOK,
                id=notebook.name,
                name=notebook.name,
                account=notebook.account,
                region=region,
                instance_type=notebook.instance_type,
                tags=notebook.tags,
            )
        )
    endpoints = in_service_endpoints(region)
    hosted = inference_components.in_service(region) if endpoints else {}
    for endpoint in endpoints:
        components = hosted.get(endpoint.name, ())
        serving = "components" if components else "async" if endpoint.asynchronous else "realtime"
        for variant in endpoint.variants:
            if variant.has_gpu and variant.instance_type and variant.instance_count:
                subjects.append(
                    Subject(
                        kind=ResourceKind.ENDPOINT,
                        id=f"{endpoint.name}/{variant.name}",
                        name=endpoint.name,
                        account=endpoint.account,
                        region=region,
                        instance_type=variant.instance_type,
                        instance_count=variant.instance_count,
                        running_hours=_hours(endpoint.created, now),
                        tags=endpoint.tags,
                        serving=serving,
                        components=components,
                    )
                )
    facts = type_facts(region, {s.instance_type for s in subjects})
    return [s.model_copy(update={"facts": facts.get(s.instance_type.removeprefix("ml."))}) for s in subjects]
