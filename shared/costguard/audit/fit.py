"""Compute fit: what a measured workload would use of another accelerator, from the dated device table gpus.json.

The load of one instance is the sum of its GPUs' p95 utilizations (GPU-percent of the source model; for a balanced
workload, p95 per GPU x GPU count). On the target it takes ``slowdown`` times as long per unit of work, where the
slowdown is the larger of the compute ratio (dense BF16 TFLOPS) and the memory-bandwidth ratio, so the more
conservative of the two is always the one used, and the evidence says which. The projected p95 per target GPU is

    max(load x slowdown / target GPUs, busiest GPU's p95 x slowdown)

the first term spreading the work over the target's GPUs (which needs the workload to re-shard), the second
keeping at least the busiest GPU's share on one device (work that does not spread stays where it is).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from costguard.audit.model import TypeFacts, Usage

MIB_PER_GB = 1e9 / 2**20


@dataclass(frozen=True)
class Device:
    """One accelerator model's published throughput."""

    model: str
    names: tuple[str, ...]
    memory_gb: float
    dense_bf16_tflops: float
    memory_bandwidth_gbps: float
    source: str
    url: str
    max_memory_gb: float | None = None  # tells an A100 40GB from an A100 80GB, both named "A100"


@dataclass(frozen=True)
class Projection:
    """A workload's projected p95 per GPU on a target, and how it was reached; ``percent`` None: unknown."""

    percent: float | None
    slowdown: float | None = None  # source device time x this = target device time (1: the same device)
    basis: str = ""  # which ratio decided, or why nothing could be projected
    load_percent: float | None = None  # the instance's measured load in GPU-percent of the source model
    source_device: str | None = None
    target_device: str | None = None

    def evidence(self) -> dict[str, Any]:
        return {
            "projected_gpu_p95_percent": self.percent,
            "projection_basis": self.basis,
            "slowdown": self.slowdown,
            "measured_load_gpu_percent": self.load_percent,
            "source_device": self.source_device,
            "target_device": self.target_device,
        }


@cache
def device_table() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("gpus.json").read_text(encoding="utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


@cache
def devices() -> tuple[Device, ...]:
    return tuple(
        Device(
            model=d["model"],
            names=tuple(d["names"]),
            memory_gb=float(d["memory_gb"]),
            dense_bf16_tflops=float(d["dense_bf16_tflops"]),
            memory_bandwidth_gbps=float(d["memory_bandwidth_gbps"]),
            source=d["source"],
            url=d["url"],
            max_memory_gb=d.get("max_memory_gb"),
        )
        for d in device_table()["devices"]
    )


def device_of(facts: TypeFacts | None) -> Device | None:
    """The table's row for a type's accelerator (by the name DescribeInstanceTypes gives and its memory)."""
    if facts is None or not facts.accelerator_model:
        return None
    name = facts.accelerator_model.strip().upper()
    memory_gb = facts.accelerator_memory_mib / MIB_PER_GB if facts.accelerator_memory_mib else None
    for device in devices():
        if name not in (n.upper() for n in device.names):
            continue
        if device.max_memory_gb is not None and memory_gb is not None and memory_gb > device.max_memory_gb:
            continue
        return device
    return None


def load_percent(used: Usage, facts: TypeFacts) -> float | None:
    """The instance's load: the sum of its GPUs' p95 (p95 x GPU count when only the busiest is known)."""
    if used.per_gpu_p95:
        return round(sum(used.per_gpu_p95), 2)
    if used.gpu_p95 is None:
        return None
    return round(used.gpu_p95 * max(1, facts.accelerator_count), 2)


def project(source: TypeFacts | None, used: Usage | None, target: TypeFacts | None) -> Projection:
    """The measured workload of one ``source`` instance, projected onto one ``target`` instance."""
    if target is None or not target.accelerator_count:
        return Projection(None, basis="the target's accelerators are unknown")
    if used is None or used.gpu_p95 is None or source is None or not source.accelerator_count:
        return Projection(None, basis="no utilization measured: compute fit not verified")
    load = load_percent(used, source)
    busiest = used.gpu_p95
    assert load is not None
    same_model = source.accelerator_model == target.accelerator_model and (
        source.accelerator_memory_mib == target.accelerator_memory_mib
    )
    if same_model:
        slowdown, basis = 1.0, f"same accelerator ({source.accelerator_model})"
        src_name = tgt_name = source.accelerator_model
    else:
        src, tgt = device_of(source), device_of(target)
        if src is None or tgt is None:
            missing = source.accelerator_model if src is None else target.accelerator_model
            return Projection(
                None,
                basis=f"no published throughput for {missing} in the device table: compute fit not verified",
                load_percent=load,
            )
        compute = src.dense_bf16_tflops / tgt.dense_bf16_tflops
        bandwidth = src.memory_bandwidth_gbps / tgt.memory_bandwidth_gbps
        if compute >= bandwidth:
            slowdown = compute
            basis = (
                f"compute: {src.model} {src.dense_bf16_tflops:g} vs {tgt.model} {tgt.dense_bf16_tflops:g} "
                f"dense BF16 TFLOPS (bandwidth ratio {bandwidth:.2f} is milder)"
            )
        else:
            slowdown = bandwidth
            basis = (
                f"memory bandwidth: {src.model} {src.memory_bandwidth_gbps:g} vs {tgt.model} "
                f"{tgt.memory_bandwidth_gbps:g} GB/s (compute ratio {compute:.2f} is milder)"
            )
        src_name, tgt_name = src.model, tgt.model
    spread = load * slowdown / target.accelerator_count
    percent = round(max(spread, busiest * slowdown), 1)
    return Projection(
        percent,
        slowdown=round(slowdown, 3),
        basis=basis,
        load_percent=load,
        source_device=src_name,
        target_device=tgt_name,
    )
