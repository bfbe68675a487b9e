"""From metric series to a subject's Usage: percentiles, peaks and a small chart (pure)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime

from costguard.audit.model import Usage

Series = Sequence[tuple[datetime, float]]
CHART_HOURS = 6  # one chart point per six hours: 56 points over 14 days


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile of unsorted values (share in 0..100)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(share / 100 * len(ordered)))
    return ordered[rank - 1]


def summarize(
    *,
    start: datetime,
    window_hours: float,
    period_hours: float,
    gpu: Mapping[int, Series],
    memory_used_mib: Mapping[int, Series] | None = None,
    cpu: Series = (),
) -> Usage:
    """GPU percentiles over the periods' busiest GPU, per-GPU p95s, memory peaks and CPU p95."""
    busiest: dict[datetime, float] = {}
    per_gpu_p95 = []
    for index in sorted(gpu):
        points = gpu[index]
        if points:
            per_gpu_p95.append(round(percentile([v for _, v in points], 95), 2))
        for at, value in points:
            if value > busiest.get(at, -1.0):
                busiest[at] = value
    memory_peak = None
    memory_total_peak = None
    if memory_used_mib:
        totals: dict[datetime, float] = {}
        for points in memory_used_mib.values():
            for at, value in points:
                totals[at] = totals.get(at, 0.0) + value
                if memory_peak is None or value > memory_peak:
                    memory_peak = value
        memory_total_peak = max(totals.values()) if totals else None
    values = list(busiest.values())
    chart: dict[int, float] = {}
    for at, value in busiest.items():
        slot = int((at - start).total_seconds() // (CHART_HOURS * 3600))
        chart[slot] = max(chart.get(slot, 0.0), value)
    slots = math.ceil(window_hours / CHART_HOURS)
    return Usage(
        window_hours=window_hours,
        period_hours=period_hours,
        hours_observed=len(values) * period_hours,
        gpu_p50=round(percentile(values, 50), 2) if values else None,
        gpu_p95=round(percentile(values, 95), 2) if values else None,
        gpu_max=round(max(values), 2) if values else None,
        per_gpu_p95=tuple(per_gpu_p95),
        gpus_reporting=tuple(sorted(index for index, points in gpu.items() if points)),
        memory_peak_mib=memory_peak,
        memory_total_peak_mib=memory_total_peak,
        cpu_p95=round(percentile([v for _, v in cpu], 95), 2) if cpu else None,
        # A slot with no datapoint (before the resource was launched, or a gap) is no point, not 0%.
        chart=tuple(round(chart[slot], 1) if slot in chart else None for slot in range(slots))
        if values
        else (),
    )
