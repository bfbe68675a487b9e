"""The world's hourly usage history (``usage`` on an instance) published to the embedded CloudWatch.

The right-sizing audit reads two weeks; publishing them minute by minute would be slow and tell it nothing
more, so the history is hourly and ends where the instance's recent per-minute series (gpu_metrics) begins.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from typing import Any

from moto.cloudwatch.models import MetricDatum

from costguard.local.seed_metrics import datum, datums, remembered, store
from costguard.local.world import DEFAULT_CPU_PERCENT, Instance, World

IDLE_GPU_PERCENT = 1.0
IDLE_GPU_MEMORY_GIB = 0.5


def history_points(spec: Instance, now: datetime) -> list[datetime]:
    """The hours the history covers, oldest first."""
    usage = spec.usage
    assert usage is not None
    start = now - timedelta(days=usage.days)
    if spec.launched and spec.launched > start:
        start = spec.launched
    end = now
    if spec.gpu_metrics.pattern != "none" or spec.gpu_metrics.gpus:
        end = now - timedelta(minutes=spec.gpu_metrics.lookback_minutes)
    first = start.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    hours = max(0, math.ceil((end - first).total_seconds() / 3600))
    return [first + timedelta(hours=n) for n in range(hours)]


def gpu_value(spec: Instance, index: int, at: datetime) -> tuple[float, float]:
    """(utilization percent, memory used MiB) of one GPU at one hour: deterministic, so tests can bound it."""
    usage = spec.usage
    assert usage is not None
    busy = usage.busy_gpus if usage.busy_gpus is not None else index + 1
    wave = math.sin(at.timestamp() / 3600 / 3.0 + index)
    if index < busy:
        percent = max(0.0, min(100.0, usage.gpu_percent + usage.swing * wave))
        return round(percent, 2), usage.memory_used_gib * 1024
    return round(IDLE_GPU_PERCENT + wave, 2), IDLE_GPU_MEMORY_GIB * 1024


def silent_gpus(spec: Instance) -> set[int]:
    """The GPUs its gpu_metrics say publish nothing (their own pattern none, no points of their own): no history
    either, as the CloudWatch agent sends nothing for a GPU it does not see."""
    return {
        g.index
        for g in spec.gpu_metrics.gpus
        if g.pattern == "none" and not (g.segments or g.points or g.runs)
    }


def publish_usage_history(world: World, gpu_info: dict[str, dict[str, Any]]) -> None:
    key = ("usage history", world.model_dump_json(), json.dumps(gpu_info, sort_keys=True, default=str))
    store(world.account, world.region, remembered(key, lambda: _history_datums(world, gpu_info)))


def _history_datums(world: World, gpu_info: dict[str, dict[str, Any]]) -> list[MetricDatum]:
    batches: dict[str, list[dict[str, Any]]] = {"CWAgent": [], "AWS/EC2": []}
    for spec in world.instances:
        if spec.usage is None or spec.state != "running":
            continue
        gpus = gpu_info.get(spec.type, {}).get("Gpus", [])
        count = sum(g.get("Count", 0) for g in gpus)
        model = gpus[0].get("Name", "GPU") if gpus else "GPU"
        cpu = spec.usage.cpu_percent if spec.usage.cpu_percent is not None else spec.cpu_percent
        cpu = DEFAULT_CPU_PERCENT if cpu is None else cpu
        silent = silent_gpus(spec)
        for at in history_points(spec, world.now):
            for index in range(count):
                if index in silent:
                    continue
                dims = [
                    {"Name": "InstanceId", "Value": spec.id},
                    {"Name": "index", "Value": str(index)},
                    {"Name": "name", "Value": model},
                ]
                percent, memory = gpu_value(spec, index, at)
                batches["CWAgent"].append(datum("nvidia_smi_utilization_gpu", dims, at, percent, "Percent"))
                batches["CWAgent"].append(datum("nvidia_smi_memory_used", dims, at, memory, "Megabytes"))
            ec2_dims = [{"Name": "InstanceId", "Value": spec.id}]
            batches["AWS/EC2"].append(datum("CPUUtilization", ec2_dims, at, cpu, "Percent"))
    return [d for namespace, data in batches.items() for d in datums(namespace, data)]
