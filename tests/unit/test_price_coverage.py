"""Every instance type costguard meets in this repository has a price in its region: the worlds, the sample
events, and the accelerator types AWS describes (the embedded AWS's DescribeInstanceTypes)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from moto.ec2.models.instance_types import INSTANCE_TYPES

from costguard.pricing import bundled_price, bundled_table

ROOT = Path(__file__).resolve().parents[2]
TYPE = re.compile(r"^(ml\.)?[a-z][a-z0-9-]*\.(\d*x?large|metal(-\d+xl)?|medium|small|micro|nano)$")
TYPE_KEYS = {"instancetype", "instance_type", "type"}


def _strings(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """(key, string) for every string of a JSON document, with its key (the parent's for list items)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, str(k))
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item, key)
    elif isinstance(value, str):
        yield key, value


def event_types() -> set[tuple[str, str, str]]:
    """(file, region, type) for every instance type an event names: InstanceType/instanceType fields, and the
    types inside AWS Health's "cr-id | AZ | type | ..." summary entries."""
    found = set()
    for path in sorted((ROOT / "events").glob("*.json")):
        event = json.loads(path.read_text())
        region = event.get("region") or "us-east-1"
        for key, text in _strings(event):
            candidates = [t.strip() for t in text.split("|")] if "|" in text else [text.strip()]
            for candidate in candidates:
                if TYPE.match(candidate) and (key.lower() in TYPE_KEYS or "|" in text or "." in candidate):
                    found.add((path.name, region, candidate))
    return found


def world_types() -> set[tuple[str, str, str]]:
    found = set()
    for path in sorted((ROOT / "worlds").glob("*.yaml")):
        world = yaml.safe_load(path.read_text())
        region = world.get("region", "us-east-1")
        for section, field in (
            ("instances", "type"),
            ("training_jobs", "instance_type"),
            ("notebooks", "instance_type"),
            ("endpoints", "instance_type"),
            ("capacity_reservations", "instance_type"),
        ):
            for item in world.get(section) or []:
                found.add((path.name, region, item[field]))
    return found


def test_the_scan_finds_the_types_it_should() -> None:
    named = {t for _, _, t in event_types()}
    assert {"ml.p3.2xlarge", "ml.g5.xlarge", "g5.2xlarge", "p4d.24xlarge"} <= named
    assert {"ml.p4d.24xlarge", "p5.48xlarge", "g6e.12xlarge"} <= {t for _, _, t in world_types()}


@pytest.mark.parametrize(("where", "region", "instance_type"), sorted(event_types() | world_types()))
def test_every_type_in_the_worlds_and_events_has_a_price(where: str, region: str, instance_type: str) -> None:
    price = bundled_price(instance_type, region)
    assert price is not None, f"{where}: no price for {instance_type} in {region}"
    assert price.usd_per_hour > 0


def accelerator_types() -> list[str]:
    """The GPU and Neuron types AWS describes (costguard's accelerator catalog reads GpuInfo and NeuronInfo)."""
    return sorted(
        name
        for name, described in INSTANCE_TYPES.items()
        if (described.get("GpuInfo") or {}).get("Gpus")
        or (described.get("NeuronInfo") or {}).get("NeuronDevices")
    )


def test_the_accelerator_catalog_is_not_empty() -> None:
    assert {"p4d.24xlarge", "g5.xlarge", "trn1.32xlarge", "inf2.xlarge"} <= set(accelerator_types())


@pytest.mark.parametrize("instance_type", accelerator_types())
def test_every_accelerator_type_has_a_price_or_a_stated_reason(instance_type: str) -> None:
    """Priced in us-east-1, or named in the table as having no on-demand price, or as a known gap with why."""
    table = bundled_table()
    if bundled_price(instance_type, "us-east-1") is not None:
        return
    reason = table["no_on_demand"].get(instance_type) or table["unpriced"].get(instance_type)
    assert reason, f"{instance_type}: neither priced nor named as unpriced in prices.json"
