"""GPU verdicts from per-GPU utilization series: idle, starved, busy, or no metrics. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from functools import cached_property
from statistics import fmean

from costguard.model import MARK_TAG_KEY, Ec2Instance, Finding, Reason, Resource, ResourceKind
from costguard.pricing import Price

Series = list[tuple[datetime, float]]

# A window counts as observed when at least this share of its periods carry a datapoint.
MIN_COVERAGE = 0.8


class Verdict(StrEnum):
    IDLE = "idle"
    STARVED = "starved"
    BUSY = "busy"
    NO_METRICS = "no_metrics"
    TOO_EARLY = "too_early"  # metrics exist but do not yet cover the window


@dataclass(frozen=True)
class Thresholds:
    idle_percent: float = 5.0
    idle_window: timedelta = timedelta(minutes=30)
    starved_percent: float = 70.0
    starved_window: timedelta = timedelta(hours=2)
    period: timedelta = timedelta(minutes=1)

    # Worked out once per thresholds rather than at every reading.
    @cached_property
    def lookback(self) -> timedelta:
        """How far back a reading looks: the longer of the two windows."""
        return max(self.idle_window, self.starved_window)

    @cached_property
    def idle_periods(self) -> int:
        """The datapoints a fully covered idle window holds."""
        return max(1, int(self.idle_window / self.period))

    @cached_property
    def starved_periods(self) -> int:
        """The datapoints a fully covered starved window holds."""
        return max(1, int(self.starved_window / self.period))


@dataclass(frozen=True)
class GpuReading:
    """What the series say about one instance: the verdict and the figures behind it."""

    verdict: Verdict
    gpu_count: int
    busiest_gpu_percent: float | None = None  # max over GPUs and time in the idle window
    mean_percent: float | None = None  # mean over GPUs and time in the starved window
    busiest_gpu_index: int | None = None
    coverage: float = 0.0


def _coverage(values_by_gpu: dict[int, list[float]], expected: int) -> float:
    if not values_by_gpu:
        return 0.0
    return min(map(len, values_by_gpu.values())) / expected


def read_gpus(
    gpus: dict[int, Series], now: datetime, thresholds: Thresholds, expected_gpus: int
) -> GpuReading:
    """Classify an instance from its per-GPU series. A GPU with no series never counts as idle."""
    if not any(gpus.values()):
        return GpuReading(Verdict.NO_METRICS, expected_gpus)
    # Values as plain lists, so that max and fmean run over them in C: the verdict is read for every
    # instance at every sweep, and at every step of a backtest (a million reads for a week of 1,000).
    idle_start = now - thresholds.idle_window
    idle_values = {i: [v for t, v in s if idle_start < t <= now] for i, s in gpus.items()}
    idle_cover = _coverage(idle_values, thresholds.idle_periods)
    peaks = {i: max(values) for i, values in idle_values.items() if values}
    busiest = max(peaks, key=peaks.__getitem__) if peaks else None
    busiest_value = peaks[busiest] if busiest is not None else None
    # Every GPU the instance has must have reported: a silent GPU might be the busy one.
    all_reporting = len(peaks) >= expected_gpus
    if (
        busiest_value is not None
        and busiest_value < thresholds.idle_percent
        and idle_cover >= MIN_COVERAGE
        and all_reporting
    ):
        return GpuReading(Verdict.IDLE, expected_gpus, busiest_value, None, busiest, idle_cover)

    starved_start = now - thresholds.starved_window
    starved_values = {i: [v for t, v in s if starved_start < t <= now] for i, s in gpus.items()}
    starved_cover = _coverage(starved_values, thresholds.starved_periods)
    values = [v for per_gpu in starved_values.values() for v in per_gpu]
    mean = round(fmean(values), 2) if values else None
    # Starvation is every GPU waiting: one GPU busy beside idle ones is a sizing matter, not a data one.
    per_gpu_means = [fmean(per_gpu) for per_gpu in starved_values.values() if per_gpu]
    uniformly_underused = bool(per_gpu_means) and max(per_gpu_means) < thresholds.starved_percent
    if busiest_value is None and mean is None:
        return GpuReading(Verdict.NO_METRICS, expected_gpus)
    if (
        mean is not None
        and thresholds.idle_percent <= mean < thresholds.starved_percent
        and uniformly_underused
        and starved_cover >= MIN_COVERAGE
        and all_reporting
    ):
        return GpuReading(Verdict.STARVED, expected_gpus, busiest_value, mean, busiest, starved_cover)
    if (
        idle_cover < MIN_COVERAGE
        and starved_cover < MIN_COVERAGE
        and (busiest_value or 0) < thresholds.idle_percent
    ):
        return GpuReading(Verdict.TOO_EARLY, expected_gpus, busiest_value, mean, busiest, idle_cover)
    return GpuReading(
        Verdict.BUSY, expected_gpus, busiest_value, mean, busiest, max(idle_cover, starved_cover)
    )


def mean_of(series: Series, start: datetime, end: datetime) -> float | None:
    values = [v for t, v in series if start < t <= end]
    return round(fmean(values), 2) if values else None


# -- findings for EC2 instances -----------------------------------------------------------------

AGENT_HELP = (
    "Install the CloudWatch agent with the NVIDIA section so costguard can see the GPUs: "
    '"metrics": {"append_dimensions": {"InstanceId": "${aws:InstanceId}"}, '
    '"metrics_collected": {"nvidia_gpu": {"measurement": ["utilization_gpu", "memory_used", "memory_total"]}}}'
)


def instance_resource(instance: Ec2Instance) -> Resource:
    """The instance as costguard's decisions see it, with anything that makes a stop unsafe."""
    blocker = None
    if instance.auto_scaling_group:
        blocker = f"in Auto Scaling group {instance.auto_scaling_group}, which would launch a replacement"
    elif instance.lifecycle == "spot":
        blocker = "a spot instance (a one-time spot request cannot be stopped, only terminated)"
    elif instance.lifecycle == "capacity-block":
        blocker = "it runs in a Capacity Block, which is paid for whether the instance runs or not"
    return Resource(
        kind=ResourceKind.EC2_INSTANCE,
        id=instance.id,
        account=instance.account,
        region=instance.region,
        name=instance.name,
        arn=f"arn:aws:ec2:{instance.region}:{instance.account}:instance/{instance.id}",
        instance_type=instance.type,
        tags=instance.tags,
        stop_blocker=blocker,
    )


def gpu_instance_findings(
    instance: Ec2Instance,
    reading: GpuReading,
    *,
    price: Price | None,
    thresholds: Thresholds,
    now: datetime,
    cpu_percent: float | None = None,
    network_in_mb: float | None = None,
    event_id: str | None = None,
    resource: Resource | None = None,
) -> list[Finding]:
    """The findings one reading gives: at most one verdict, plus a cancelled mark if it works again.

    ``resource`` is ``instance_resource(instance)`` when the caller holds it already: a backtest judges the
    same instance at every step of its period.
    """
    if reading.verdict is Verdict.TOO_EARLY or (
        reading.verdict is Verdict.BUSY and MARK_TAG_KEY not in instance.tags
    ):
        return []  # nothing to say (most instances of a sweep are busy): build nothing
    if resource is None:
        resource = instance_resource(instance)
    hourly = price.usd_per_hour if price else None
    gpus = f"{reading.gpu_count} x {instance.accelerators.model if instance.accelerators else 'GPU'}"
    evidence: dict[str, object] = {
        "gpus": gpus,
        "price_source": price.source if price else "unknown",
        "launched": instance.launch_time.isoformat() if instance.launch_time else None,
    }
    window = int(thresholds.idle_window.total_seconds() // 60)

    def finding(reason: Reason, summary: str, **extra: object) -> Finding:
        return Finding(
            reason=reason,
            resource=resource,
            summary=summary,
            observed_at=now,
            event_id=event_id,
            hourly_usd=hourly,
            remediable=bool(extra.pop("remediable", False)),
            cancels_mark=bool(extra.pop("cancels_mark", False)),
            evidence=evidence | extra,
        )

    findings: list[Finding] = []
    if reading.verdict is Verdict.IDLE:
        findings.append(
            finding(
                Reason.GPU_IDLE,
                f"All {gpus} GPUs of {resource.display_name} stayed under {thresholds.idle_percent:g}% for "
                f"{window} minutes (busiest peaked at {reading.busiest_gpu_percent:.1f}%).",
                remediable=True,
                busiest_gpu_percent=reading.busiest_gpu_percent,
                busiest_gpu_index=reading.busiest_gpu_index,
                window_minutes=window,
                cpu_percent=cpu_percent,
            )
        )
    elif reading.verdict is Verdict.STARVED:
        mean = reading.mean_percent or 0.0
        waste = round(hourly * (1 - mean / 100), 2) if hourly is not None else None
        starved_window = int(thresholds.starved_window.total_seconds() // 60)
        findings.append(
            finding(
                Reason.GPU_STARVED,
                f"The {gpus} GPUs of {resource.display_name} averaged {mean:.1f}% over {starved_window} minutes: "
                "they are waiting for data. The input pipeline (data loader workers, storage throughput, "
                "preprocessing on the CPU) is the likely cause"
                + (f"; the unused share costs ${waste:,.2f}/h." if waste is not None else "."),
                mean_gpu_percent=mean,
                cpu_percent=cpu_percent,
                network_in_mb_per_minute=network_in_mb,
                underuse_usd_per_hour=waste,
                window_minutes=starved_window,
            )
        )
    elif reading.verdict is Verdict.NO_METRICS:
        findings.append(
            finding(
                Reason.GPU_METRICS_MISSING,
                f"{resource.display_name} is a running {instance.type} ({gpus}) that publishes no GPU metrics: "
                "costguard cannot tell whether it is idle, and will not call it idle.",
                how_to_fix=AGENT_HELP,
            )
        )
    if reading.verdict in (Verdict.BUSY, Verdict.STARVED) and MARK_TAG_KEY in resource.tags:
        findings.append(
            finding(
                Reason.GPU_ACTIVE_AGAIN,
                f"{resource.display_name} is working again (busiest GPU at {reading.busiest_gpu_percent or 0:.1f}%): "
                "its pending stop is cancelled.",
                cancels_mark=True,
            )
        )
    return findings
