"""What AWS itself writes about an EC2 instance, held against what its GPU series say. Pure.

An instance's GPU series (CWAgent ``nvidia_smi_utilization_gpu``) are written by the CloudWatch agent on the
instance, but anyone allowed ``cloudwatch:PutMetricData`` (the agent's managed policy grants it on every
namespace) can write into them with the agent's dimensions: a window of zeros in one call makes an instance with
no agent, or with a silent GPU, read idle. The ``AWS/EC2`` namespace is EC2's own: PutMetricData refuses any
namespace that starts with ``AWS/``. So a GPU-idle stop needs EC2's own metrics to agree over the same window:
CPU (``CPUUtilization``) and network (``NetworkIn`` + ``NetworkOut``) low. When they show the instance working, or
cannot be read, the idle finding is told with what costguard saw and why it does not act, and nothing is marked or
stopped (``corroborated``).

A process that drives a GPU keeps a CPU core busy (CUDA's host thread waits on the GPU by spinning) and a training
job reads its data: a GPU at work shows on EC2's CPU or network. The converse is weaker on the largest instances
(one busy core of 192 vCPUs is 0.5%), which is why the network must be quiet too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from itertools import pairwise

from costguard.model import Finding, Reason

Series = list[tuple[datetime, float]]

# EC2's basic monitoring publishes every 5 minutes (detailed monitoring every minute): the window is judged in
# 5-minute slots, so that either holds a datapoint in each.
HOST_SLOT = timedelta(minutes=5)
# The share of the window's slots that must hold a datapoint. Basic monitoring's points arrive some minutes
# late, so the newest slot or two of the window may still be empty when a sweep reads it.
HOST_MIN_COVERAGE = 0.5


@dataclass(frozen=True)
class HostThresholds:
    """Below both, EC2's own metrics agree that the instance is idle.

    - ``cpu_percent``: CPUUtilization averaged over the idle window. An idle host with its agents (SSM, the
      CloudWatch agent) sits well under 1-2%; a job feeding a GPU keeps at least one core busy, which is 5% or
      more up to 16 vCPUs (every single-GPU instance type and most 4-GPU ones).
    - ``network_mb_per_minute``: NetworkIn + NetworkOut, in MB (10^6 bytes) a minute over the idle window. The
      agents of an idle host send a few KB a minute; 2 MB a minute is 0.27 Mbit/s, far below any training job's
      input or a served model's traffic.
    """

    cpu_percent: float = 5.0
    network_mb_per_minute: float = 2.0


HOST_THRESHOLDS = HostThresholds()


class Agreement(StrEnum):
    AGREES = "agrees"  # CPU and network low over the window: EC2's own metrics say idle too
    DISAGREES = "disagrees"  # CPU or network at or above its threshold: EC2 says it is working
    UNREADABLE = "unreadable"  # too few datapoints, or values no metric of EC2 can take


@dataclass(frozen=True)
class HostReading:
    """EC2's own metrics of one instance over the idle window, and whether they agree that it is idle."""

    agreement: Agreement
    cpu_percent: float | None = None
    network_mb_per_minute: float | None = None
    problem: str | None = None  # UNREADABLE: what could not be read, in words

    def evidence(self) -> dict[str, object]:
        return {
            "ec2_cpu_percent": self.cpu_percent,
            "ec2_network_mb_per_minute": self.network_mb_per_minute,
            "ec2_metrics": self.agreement.value,
        }


def _slots(series: Series, start: datetime, end: datetime) -> int:
    """How many of the window's HOST_SLOT slots, counted back from ``end``, hold a datapoint."""
    return len({(end - t) // HOST_SLOT for t, _ in series if start < t <= end})


def _per_minute(series: Series, start: datetime, end: datetime) -> float:
    """A Sum series' mean per minute over the minutes its datapoints cover: each covers the series' step (its
    smallest gap, 1 minute under detailed monitoring, 5 under basic), so a missing datapoint is not read as a
    quiet minute."""
    points = [(t, v) for t, v in series if start < t <= end]
    gaps = [b[0] - a[0] for a, b in pairwise(points) if b[0] > a[0]]
    step = min(max(min(gaps, default=HOST_SLOT), timedelta(minutes=1)), HOST_SLOT)
    return sum(v for _, v in points) / (len(points) * (step / timedelta(minutes=1)))


def read_host(
    cpu: Series,
    network_in: Series,
    network_out: Series,
    now: datetime,
    window: timedelta,
    thresholds: HostThresholds = HOST_THRESHOLDS,
) -> HostReading:
    """EC2's CPUUtilization (each period's Average) and NetworkIn / NetworkOut (each period's Sum, in bytes) of
    one instance over (now - window, now]: do they agree that it is idle?"""
    start = now - window
    expected = max(1, math.ceil(window / HOST_SLOT))
    needed = max(1, math.ceil(expected * HOST_MIN_COVERAGE))
    missing = [
        name
        for name, series in (("CPUUtilization", cpu), ("NetworkIn", network_in), ("NetworkOut", network_out))
        if _slots(series, start, now) < needed
    ]
    if missing:
        return HostReading(
            Agreement.UNREADABLE,
            problem=f"{' and '.join(missing)} had datapoints in fewer than {needed} of the "
            f"{expected} five-minute periods",
        )
    cpu_values = [v for t, v in cpu if start < t <= now]
    in_bytes = [v for t, v in network_in if start < t <= now]
    out_bytes = [v for t, v in network_out if start < t <= now]
    if min(cpu_values) < 0 or max(cpu_values) > 100 or min(in_bytes) < 0 or min(out_bytes) < 0:
        return HostReading(Agreement.UNREADABLE, problem="they held values no EC2 metric can take")
    cpu_percent = round(sum(cpu_values) / len(cpu_values), 2)
    rate = _per_minute(network_in, start, now) + _per_minute(network_out, start, now)
    network = round(rate / 1e6, 3)
    quiet = cpu_percent < thresholds.cpu_percent and network < thresholds.network_mb_per_minute
    return HostReading(Agreement.AGREES if quiet else Agreement.DISAGREES, cpu_percent, network)


_ANYONE = "which anyone allowed cloudwatch:PutMetricData can write"


def corroborated(
    finding: Finding,
    host: HostReading | None,
    window_minutes: int,
    thresholds: HostThresholds = HOST_THRESHOLDS,
) -> Finding:
    """A GPU-idle finding as EC2's own metrics leave it: as found when they agree (their figures added to its
    summary and evidence); told but notify-only when they show the instance working or could not be read
    (``host`` None: not read), with what costguard saw and why it does not act. Any other finding as it is."""
    if finding.reason is not Reason.GPU_IDLE or not finding.remediable:
        return finding
    if host is not None and host.agreement is Agreement.AGREES:
        return finding.model_copy(
            update={
                "summary": f"{finding.summary} EC2's own metrics agree: CPU averaged {host.cpu_percent:.1f}% "
                f"and network {host.network_mb_per_minute:.2f} MB a minute over the same {window_minutes} "
                "minutes.",
                "evidence": finding.evidence | host.evidence(),
            }
        )
    if host is None or host.agreement is Agreement.UNREADABLE:
        problem = host.problem if host is not None and host.problem else "they were not read"
        saw = f"EC2's own CPU and network metrics of the last {window_minutes} minutes could not be read ({problem})"
        evidence = finding.evidence | (host.evidence() if host else {"ec2_metrics": "not read"})
    else:
        saw = (
            f"EC2's own metrics, which only AWS writes, show it working over the last {window_minutes} minutes: "
            f"CPU averaged {host.cpu_percent:.1f}% (idle is under {thresholds.cpu_percent:g}%) and network "
            f"{host.network_mb_per_minute:.2f} MB a minute (idle is under {thresholds.network_mb_per_minute:g})"
        )
        evidence = finding.evidence | host.evidence()
    return finding.model_copy(
        update={
            "remediable": False,
            "report_note": f"not marked or stopped: only its GPU series, {_ANYONE}, say it is idle, and {saw}",
            "summary": f"{finding.summary} But {saw}. Its GPU series can be written by anyone allowed "
            "cloudwatch:PutMetricData, so costguard does not stop it on them alone: check that the CloudWatch "
            "agent runs on it and who else writes its GPU series.",
            "evidence": evidence,
        }
    )
