"""GPU verdicts from per-GPU utilization series: idle, starved, busy, partial or no metrics. Pure.

The series are each period's Maximum (aws/metrics.GPU_STAT): a datapoint someone adds can only make a GPU look
busier. Idle compares the largest of them with the threshold; starved averages the periods in which each GPU
was working (at or above the idle threshold), and only when it was working in most of them.

A reading outside a GPU's physical range (below 0% or above 100%) is no reading: nvidia-smi never writes one, so
the series holds something someone else wrote, and no verdict (idle, starved or busy) is built on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from functools import cached_property
from statistics import fmean
from typing import Protocol

from costguard.model import MARK_TAG_KEY, Ec2Instance, Finding, Reason, Resource, ResourceKind
from costguard.pricing import Price

Series = list[tuple[datetime, float]]

# A window counts as observed when at least this share of its periods carry a datapoint.
MIN_COVERAGE = 0.8

# Starved needs every GPU working (at or above the idle threshold) in at least this share of the starved
# window's reported periods. Starvation is a running job whose GPUs wait on their input: they work all along,
# under-fed. A GPU idle for more than a quarter of the window is something else (a notebook between bursts, a
# job restarting or between runs, a GPU nobody uses beside a busy one) and its idle periods must not drag the
# mean down into "starved". A quarter still lets short stops through (a checkpoint save, an evaluation pass):
# with the default windows it is 30 of 120 minutes, the length of the idle window itself.
STARVED_MIN_WORKING_SHARE = 0.75


class Verdict(StrEnum):
    IDLE = "idle"
    STARVED = "starved"
    BUSY = "busy"
    NO_METRICS = "no_metrics"
    PARTIAL = "partial_metrics"  # some GPUs report in the idle window, others publish nothing: never idle
    TOO_EARLY = "too_early"  # metrics exist but do not yet cover the window
    OUT_OF_RANGE = "out_of_range"  # a reading below 0% or above 100%: unreadable, never idle, starved or busy


# A GPU's utilization is a percentage of that one GPU: anything outside this range was not written by nvidia-smi.
GPU_PERCENT_RANGE = (0.0, 100.0)


PERIOD = timedelta(minutes=1)  # the metrics' period: one datapoint a minute


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


class ThresholdSettings(Protocol):
    """What the thresholds are read from (costguard.settings.Settings is one: the settings sit above detect/)."""

    @property
    def idle_threshold_percent(self) -> float: ...
    @property
    def idle_window_minutes(self) -> int: ...
    @property
    def starved_threshold_percent(self) -> float: ...
    @property
    def starved_window_minutes(self) -> int: ...


def thresholds_from(settings: ThresholdSettings) -> Thresholds:
    """The verdicts' thresholds as the stack is configured."""
    return Thresholds(
        idle_percent=settings.idle_threshold_percent,
        idle_window=timedelta(minutes=settings.idle_window_minutes),
        starved_percent=settings.starved_threshold_percent,
        starved_window=timedelta(minutes=settings.starved_window_minutes),
        period=PERIOD,
    )


@dataclass(frozen=True)
class GpuReading:
    """What the series say about one instance: the verdict and the figures behind it."""

    verdict: Verdict
    gpu_count: int
    busiest_gpu_percent: float | None = None  # max over GPUs and time in the idle window
    mean_percent: float | None = None  # mean over GPUs and time in the starved window, idle periods included
    busiest_gpu_index: int | None = None
    coverage: float = 0.0
    reporting: tuple[int, ...] = ()  # PARTIAL: the GPUs (hosts, for a training job) with data in the window
    silent: tuple[int, ...] = ()  # PARTIAL: the GPUs expected that published nothing in it
    # Over the starved window (read unless IDLE, PARTIAL or NO_METRICS): the smallest share of a GPU's
    # reported periods in which it was working, and the mean of all GPUs over the periods they were working.
    working_share: float | None = None
    working_mean_percent: float | None = None
    # OUT_OF_RANGE: each GPU (series key) with a reading outside GPU_PERCENT_RANGE in the lookback, and the
    # reading furthest outside it, with its time.
    out_of_range: tuple[tuple[int, float, datetime], ...] = ()


def out_of_range(
    gpus: dict[int, Series], start: datetime, end: datetime
) -> tuple[tuple[int, float, datetime], ...]:
    """Each series with a reading in (start, end] outside GPU_PERCENT_RANGE, and its reading furthest outside."""
    low, high = GPU_PERCENT_RANGE
    found = []
    for index, series in gpus.items():
        values = [v for t, v in series if start < t <= end]
        if not values or (low <= min(values) and max(values) <= high):
            continue
        at, worst = max(
            ((t, v) for t, v in series if start < t <= end), key=lambda p: max(low - p[1], p[1] - high)
        )
        found.append((index, worst, at))
    return tuple(sorted(found))


def _coverage(values_by_gpu: dict[int, list[float]], expected: int) -> float:
    if not values_by_gpu:
        return 0.0
    return min(map(len, values_by_gpu.values())) / expected


def read_gpus(
    gpus: dict[int, Series],
    now: datetime,
    thresholds: Thresholds,
    expected_gpus: int,
    indices: Iterable[int] | None = None,
) -> GpuReading:
    """Classify an instance from its per-GPU series. A GPU with no series never counts as idle.

    ``indices`` are the keys every one of which must report (default ``0 .. expected_gpus - 1``, nvidia-smi's
    GPU numbers). When some of them report in the idle window and others do not, the reading is PARTIAL,
    whatever the values: costguard cannot see the silent ones. A series under any other key only counts
    towards the busiest GPU, never towards the coverage.
    """
    if not any(gpus.values()):
        return GpuReading(Verdict.NO_METRICS, expected_gpus)
    # Any reading outside the physical range makes the whole read unreadable: no verdict rests on it.
    bad = out_of_range(gpus, now - thresholds.lookback, now)
    if bad:
        return GpuReading(Verdict.OUT_OF_RANGE, expected_gpus, out_of_range=bad)
    # Values as plain lists, so that max and fmean run over them in C: the verdict is read for every
    # instance at every sweep, and at every step of a backtest (a million reads for a week of 1,000).
    idle_start = now - thresholds.idle_window
    idle_values = {i: [v for t, v in s if idle_start < t <= now] for i, s in gpus.items()}
    idle_cover = _coverage(idle_values, thresholds.idle_periods)
    peaks = {i: max(values) for i, values in idle_values.items() if values}
    busiest = max(peaks, key=peaks.__getitem__) if peaks else None
    busiest_value = peaks[busiest] if busiest is not None else None
    # Every GPU the instance has must have reported: a silent GPU might be the busy one.
    silent = [i for i in (range(expected_gpus) if indices is None else indices) if i not in peaks]
    if silent and peaks:
        return GpuReading(
            Verdict.PARTIAL,
            expected_gpus,
            busiest_value,
            None,
            busiest,
            idle_cover,
            reporting=tuple(sorted(peaks)),
            silent=tuple(silent),
        )
    all_reporting = not silent
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
    if busiest_value is None and not values:
        return GpuReading(Verdict.NO_METRICS, expected_gpus)
    mean = round(fmean(values), 2) if values else None
    working_share, working_mean, underfed = _working(starved_values, thresholds)
    verdict, coverage = _settled(
        thresholds, underfed and all_reporting, idle_cover, starved_cover, busiest_value
    )
    return GpuReading(
        verdict,
        expected_gpus,
        busiest_value,
        mean,
        busiest,
        coverage,
        working_share=working_share,
        working_mean_percent=working_mean,
    )


def _working(
    starved_values: dict[int, list[float]], thresholds: Thresholds
) -> tuple[float | None, float | None, bool]:
    """Over the starved window: the smallest share of a GPU's periods in which it was working, the mean of all
    GPUs over their working periods, and whether every GPU was working, under-fed, through most of it.

    Starvation is every GPU working, under-fed, through most of the window: the idle periods of a GPU never
    pull its mean down into "starved" (a notebook between bursts, a job after a restart), and a GPU idle beside
    busy ones is a sizing matter (the audit's rightsize_downsize), not a data one.
    """
    idle_percent = thresholds.idle_percent
    working_share: float | None = None
    working_sum, working_count = 0.0, 0
    every_gpu_underfed = True
    for per_gpu in starved_values.values():
        if not per_gpu:
            continue
        working = [v for v in per_gpu if v >= idle_percent]
        share = len(working) / len(per_gpu)
        working_share = share if working_share is None else min(working_share, share)
        gpu_sum = sum(working)
        working_sum += gpu_sum
        working_count += len(working)
        # (A share of at least STARVED_MIN_WORKING_SHARE means ``working`` is not empty.)
        if share < STARVED_MIN_WORKING_SHARE or gpu_sum / len(working) >= thresholds.starved_percent:
            every_gpu_underfed = False
    if working_share is not None:
        working_share = round(working_share, 4)
    working_mean = round(working_sum / working_count, 2) if working_count else None
    return working_share, working_mean, every_gpu_underfed and bool(working_count)


def _settled(
    thresholds: Thresholds,
    underfed: bool,
    idle_cover: float,
    starved_cover: float,
    busiest_value: float | None,
) -> tuple[Verdict, float]:
    """The verdict of a reading that is neither idle nor partial, with the coverage it stands on.

    ``underfed`` is every GPU reporting and working, under-fed, through most of the starved window."""
    if underfed and starved_cover >= MIN_COVERAGE:
        return Verdict.STARVED, starved_cover
    if (
        idle_cover < MIN_COVERAGE
        and starved_cover < MIN_COVERAGE
        and (busiest_value or 0) < thresholds.idle_percent
    ):
        return Verdict.TOO_EARLY, idle_cover
    return Verdict.BUSY, max(idle_cover, starved_cover)


def mean_of(series: Series, start: datetime, end: datetime) -> float | None:
    values = [v for t, v in series if start < t <= end]
    return round(fmean(values), 2) if values else None


# -- findings for EC2 instances -----------------------------------------------------------------

AGENT_HELP = (
    "Install the CloudWatch agent with the NVIDIA section so costguard can see the GPUs; the stack ships it as the "
    "SSM parameter AmazonCloudWatch-<stack>-gpu (amazon-cloudwatch-agent-ctl -a fetch-config -m ec2 -s -c "
    'ssm:AmazonCloudWatch-<stack>-gpu, README "Prerequisite: the CloudWatch agent on GPU hosts"): '
    '"metrics": {"append_dimensions": {"InstanceId": "${aws:InstanceId}"}, '
    '"metrics_collected": {"nvidia_gpu": {"measurement": ["utilization_gpu", "memory_used"]}}}'
)


PARTIAL_HELP = (
    "A GPU missing from the agent's series has usually failed or left the bus (run nvidia-smi on the instance, "
    "look for Xid errors in dmesg), or the agent's nvidia_gpu section leaves it out: check the agent's "
    "configuration and its log (/opt/aws/amazon-cloudwatch-agent/logs/amazon-cloudwatch-agent.log)."
)


OUT_OF_RANGE_HELP = (
    "nvidia-smi reports each GPU's utilization from 0 to 100%: a reading outside that range was written by "
    "something other than the CloudWatch agent. Anyone allowed cloudwatch:PutMetricData (the agent's managed "
    "policy grants it on every namespace) can write into the agent's series: find who does (CloudTrail, "
    "if CloudWatch data events are logged; the roles granted cloudwatch:PutMetricData) and narrow that grant "
    "with a cloudwatch:namespace condition."
)


def out_of_range_text(reading: GpuReading) -> str:
    """The readings outside the range, as a message says them: ``GPU 3: -400% at 11:42 UTC``."""
    return "; ".join(
        f"GPU {index}: {value:g}% at {at.strftime('%H:%M UTC')}" for index, value, at in reading.out_of_range
    )


def out_of_range_summary(name: str, what: str, reading: GpuReading, window_minutes: int) -> str:
    """What an OUT_OF_RANGE reading says, for any resource with per-GPU series."""
    return (
        f"{name} ({what}) has a GPU utilization reading out of range in the last {window_minutes} minutes "
        f"({out_of_range_text(reading)}): a GPU reads 0 to 100%, so its series holds datapoints the CloudWatch "
        "agent did not write. costguard cannot read its GPUs, so it cannot tell whether it is idle, and "
        "will not call it idle, starved or busy."
    )


def numbers(indices: Iterable[int]) -> str:
    """GPU (or host) numbers, runs shortened: ``0-3, 5, 7``."""
    runs: list[list[int]] = []
    for n in sorted(set(indices)):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def partial_summary(name: str, what: str, reading: GpuReading, window_minutes: int) -> str:
    """What a PARTIAL reading says, for any resource with per-GPU series."""
    return (
        f"{name} ({what}) reports GPU utilization for GPU {numbers(reading.reporting)} only; "
        f"GPU {numbers(reading.silent)} published nothing in the last {window_minutes} minutes. costguard "
        "cannot see the silent GPUs, so it cannot tell whether it is idle, and will not call it idle."
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
        started=instance.launch_time,
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
            repeat_scope=str(extra.pop("repeat_scope")) if "repeat_scope" in extra else None,
            evidence=evidence | extra,
        )

    findings: list[Finding] = []
    news = _verdict_news(
        instance,
        reading,
        resource.display_name,
        gpus,
        thresholds,
        hourly=hourly,
        cpu_percent=cpu_percent,
        network_in_mb=network_in_mb,
    )
    if news is not None:
        reason, summary, extra = news
        findings.append(finding(reason, summary, **extra))
    if MARK_TAG_KEY in resource.tags:
        again = _active_again_summary(reading, resource.display_name)
        if again is not None:
            findings.append(finding(Reason.GPU_ACTIVE_AGAIN, again, cancels_mark=True))
    return findings


# What a verdict says: its reason, its summary, and the finding's other fields and evidence (see ``finding``).
_News = tuple[Reason, str, dict[str, object]]


def _verdict_news(
    instance: Ec2Instance,
    reading: GpuReading,
    name: str,
    gpus: str,
    thresholds: Thresholds,
    *,
    hourly: float | None,
    cpu_percent: float | None,
    network_in_mb: float | None,
) -> _News | None:
    """The finding of the reading's verdict, in words: None for a verdict with nothing to say (BUSY)."""
    window = int(thresholds.idle_window.total_seconds() // 60)
    if reading.verdict is Verdict.IDLE:
        return (
            Reason.GPU_IDLE,
            f"All {gpus} GPUs of {name} stayed under {thresholds.idle_percent:g}% for "
            f"{window} minutes (busiest peaked at {reading.busiest_gpu_percent:.1f}%).",
            {
                "remediable": True,
                "busiest_gpu_percent": reading.busiest_gpu_percent,
                "busiest_gpu_index": reading.busiest_gpu_index,
                "window_minutes": window,
                "cpu_percent": cpu_percent,
            },
        )
    if reading.verdict is Verdict.STARVED:
        return _starved_news(reading, name, gpus, thresholds, hourly, cpu_percent, network_in_mb)
    if reading.verdict is Verdict.NO_METRICS:
        return (
            Reason.GPU_METRICS_MISSING,
            f"{name} is a running {instance.type} ({gpus}) that publishes no GPU metrics: "
            "costguard cannot tell whether it is idle, and will not call it idle.",
            {"how_to_fix": AGENT_HELP},
        )
    if reading.verdict is Verdict.PARTIAL:
        return (
            Reason.GPU_METRICS_PARTIAL,
            partial_summary(name, f"a running {instance.type}, {gpus}", reading, window),
            {
                "reporting_gpus": numbers(reading.reporting),
                "silent_gpus": numbers(reading.silent),
                "busiest_reporting_gpu_percent": reading.busiest_gpu_percent,
                "how_to_fix": PARTIAL_HELP,
                # Which GPUs are silent is the news: a different set is reported again.
                "repeat_scope": f"silent:{numbers(reading.silent)}",
            },
        )
    if reading.verdict is Verdict.OUT_OF_RANGE:
        lookback = int(thresholds.lookback.total_seconds() // 60)
        return (
            Reason.GPU_METRICS_PARTIAL,
            out_of_range_summary(name, f"a running {instance.type}, {gpus}", reading, lookback),
            {
                "out_of_range_readings": out_of_range_text(reading),
                "how_to_fix": OUT_OF_RANGE_HELP,
                # Which GPUs read out of range is the news: another set is reported again.
                "repeat_scope": f"out_of_range:{numbers(i for i, _, _ in reading.out_of_range)}",
            },
        )
    return None


def _starved_news(
    reading: GpuReading,
    name: str,
    gpus: str,
    thresholds: Thresholds,
    hourly: float | None,
    cpu_percent: float | None,
    network_in_mb: float | None,
) -> _News:
    """A STARVED verdict in words, priced on the working minutes only: idle minutes are not starvation."""
    mean = reading.working_mean_percent or 0.0
    share = reading.working_share or 0.0
    waste = round(hourly * (1 - mean / 100), 2) if hourly is not None else None
    starved_window = int(thresholds.starved_window.total_seconds() // 60)
    cost = f"; the unused share while they work costs ${waste:,.2f}/h." if waste is not None else "."
    working = "in every reported minute" if share >= 1 else f"in at least {share:.0%} of the reported minutes"
    return (
        Reason.GPU_STARVED,
        f"Each of the {gpus} GPUs of {name} was working (at or above "
        f"{thresholds.idle_percent:g}%) {working} of the last {starved_window}, and they averaged "
        f"only {mean:.1f}% while working (per-minute peaks): they "
        "are waiting for data. The input pipeline (data loader workers, storage throughput, "
        f"preprocessing on the CPU) is the likely cause{cost}",
        {
            "mean_gpu_percent_while_working": mean,
            "working_share_of_minutes": f"{share:.0%}",
            "cpu_percent": cpu_percent,
            "network_in_mb_per_minute": network_in_mb,
            "underuse_usd_per_hour": waste,
            "window_minutes": starved_window,
        },
    )


def _active_again_summary(reading: GpuReading, name: str) -> str | None:
    """Why a marked instance's pending stop is cancelled, if the reading cancels it: it works again (BUSY,
    STARVED), or no longer reports on every GPU (PARTIAL)."""
    if reading.verdict in (Verdict.BUSY, Verdict.STARVED):
        return (
            f"{name} is working again (busiest GPU at {reading.busiest_gpu_percent or 0:.1f}%): "
            "its pending stop is cancelled."
        )
    if reading.verdict is Verdict.PARTIAL:
        return (
            f"{name} no longer reports on every GPU (GPU {numbers(reading.silent)} silent): "
            "costguard cannot confirm it is idle, so its pending stop is cancelled."
        )
    if reading.verdict is Verdict.OUT_OF_RANGE:
        return (
            f"{name} has a GPU reading out of range ({out_of_range_text(reading)}): costguard cannot read its "
            "GPUs, so it cannot confirm it is idle, and its pending stop is cancelled."
        )
    return None


# -- GPU-idle alarms that name no running GPU instance ----------------------------------------------


def unmatched_alarm_finding(
    alarm_name: str,
    *,
    account: str,
    region: str,
    now: datetime,
    instance_id: str | None,
    instance: Ec2Instance | None,
    event_id: str | None = None,
) -> Finding:
    """A GPU-idle alarm fired, but costguard found no running NVIDIA GPU instance to judge: its name names no
    instance (``instance_id`` None), or the instance is gone, not running, or has no NVIDIA GPU. Reported,
    never acted on: the resource is the alarm itself."""
    if instance_id is None:
        problem = "its name does not end in an EC2 instance id"
        summary = (
            f"The GPU-idle alarm {alarm_name} fired, but {problem} (costguard names its alarms after the "
            "instance they watch): costguard cannot tell which instance it is about and judged nothing. "
            "costguard did not create it: find who did (CloudTrail, PutMetricAlarm). The hourly reconcile "
            "deletes alarms under costguard's prefix that watch no running GPU instance."
        )
    elif instance is None:
        problem = f"{instance_id} does not exist (any more)"
        summary = (
            f"The GPU-idle alarm {alarm_name} fired for {instance_id}, which does not exist (any more): "
            "nothing was judged. The hourly reconcile deletes the alarms of instances that are gone; if this "
            "one stays, delete it."
        )
    elif instance.state != "running":
        problem = f"{instance_id} is {instance.state}"
        summary = (
            f"The GPU-idle alarm {alarm_name} fired for {instance_id}, which is {instance.state}: nothing was "
            "judged (a stopped instance costs no compute). The hourly reconcile deletes its alarm."
        )
    else:
        problem = f"{instance_id} ({instance.type}) has no NVIDIA GPU"
        summary = (
            f"The GPU-idle alarm {alarm_name} fired for {instance_id}, a {instance.type} with no NVIDIA GPU: "
            "costguard judges NVIDIA GPU instances only, and judged nothing. The hourly reconcile deletes "
            "the alarm."
        )
    return Finding(
        reason=Reason.GPU_ALARM_UNMATCHED,
        resource=Resource(
            kind=ResourceKind.COSTGUARD_ALARM,
            id=alarm_name,
            name=alarm_name,
            account=account,
            region=region,
            arn=f"arn:aws:cloudwatch:{region}:{account}:alarm:{alarm_name}",
            instance_type=instance.type if instance else None,
        ),
        summary=summary,
        observed_at=now,
        event_id=event_id,
        remediable=False,
        evidence={
            "alarm": alarm_name,
            "problem": problem,
            "instance_id": instance_id,
            "instance_state": instance.state if instance else None,
        },
    )
