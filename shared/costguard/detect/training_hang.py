"""``job_hung``: an in-progress training job whose GPUs read busy while its own output has stopped. Pure.

A collective that waits forever (an NCCL all-reduce on a lost peer) keeps every GPU near 100%, and writes no log
line and no metric: to a detector of idle GPUs it is a healthy busy job, and a multi-node job bills every node all
night. The job's own output is what it writes:

- a log event on any host's stream of ``/aws/sagemaker/TrainingJobs`` (``<job>/algo-N-<epoch>``);
- a datapoint of its own metrics (its ``MetricDefinitions``, one per matching log line);
- where it checkpoints, an object under its checkpoint location.

The job is silent when none of these is newer than ``max(HANG_FLOOR, CADENCE_MULTIPLE x its cadence)``: its
cadence is the median gap between its own metric datapoints over the run so far (a job that writes every two
minutes is silent after 20; one that writes hourly after three hours), with a floor so that a slow evaluation pass
is not a hang. It is hung when it is silent and every host's GPUs read busy (at or above BUSY_PERCENT per GPU in
every minute read of the silence, up to the last HANG_GPU_MINUTES). Anything unread is "cannot tell", never hung:
a log group that cannot be read, a host with no GPU reading, a GPU count unknown.

What stops work rests on what costguard can vouch for. Silence cannot be forged by writing (a write makes the job
look alive, not hung); the opt-in, ``costguard:stop-on-hang=true``, counts as first seen (act/arming.py); and a
job is stopped only when its logs and its own metrics agree (a job that defines no metric is told, never
stopped on its logs alone). GPU readings under ``/aws/sagemaker/TrainingJobs`` are not in a namespace AWS
reserves: they make the difference between hung and stalled, not between stopped and running.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any, Literal

from costguard.detect.sagemaker import hourly_usd
from costguard.detect.training_guardrails import usd_text
from costguard.detect.training_jobs import training_job_resource
from costguard.events.sagemaker import TrainingJobDetail
from costguard.model import Finding, Reason, mark_reason
from costguard.pricing import Price

HANG_TAG = "costguard:stop-on-hang"  # "true": a hung job may be marked and stopped
HANG_FLOOR = timedelta(minutes=20)  # never silent sooner: a slow evaluation pass is not a hang
CADENCE_MULTIPLE = 3  # silent after this many of the job's own gaps between datapoints
BUSY_PERCENT = 80.0  # per GPU, in every minute read: a wait in a collective reads 97-100%
HANG_GPU_MINUTES = 60  # the GPUs are read over the silence, at most this many minutes back
LAST_LINES = 5  # the last log lines quoted, read once a sweep for a hung job
LINE_CHARS = 200  # each quoted line cut to this many characters

Verdict = Literal["alive", "hung", "not_busy", "cannot_tell"]


def cadence(times: Sequence[datetime]) -> timedelta | None:
    """The median gap between the job's own datapoints (every metric's, one time once); None under three."""
    moments = sorted(set(times))
    if len(moments) < 3:
        return None
    return timedelta(seconds=statistics.median((b - a).total_seconds() for a, b in pairwise(moments)))


def silence_after(times: Sequence[datetime]) -> timedelta:
    """How long the job may write nothing before it is silent: CADENCE_MULTIPLE of its cadence, at least the
    floor."""
    gap = cadence(times)
    return max(HANG_FLOOR, gap * CADENCE_MULTIPLE) if gap is not None else HANG_FLOOR


@dataclass(frozen=True)
class LogsSeen:
    """What the job's log streams showed: its hosts' streams, whether any wrote since the silence began, and, for
    a job found silent, each host's newest event and the last lines."""

    readable: bool
    streams: tuple[str, ...] = ()
    wrote_since: bool = False
    newest: Mapping[str, datetime | None] = field(default_factory=dict)
    last_lines: tuple[str, ...] = ()
    why: str = ""  # why they could not be read


@dataclass(frozen=True)
class GpusSeen:
    """Each host's GPUUtilization over the silence, per GPU (SageMaker sums a host's GPUs: divided by their
    count); hosts with no reading are named."""

    gpus_per_host: int | None
    lowest_percent: float | None = None  # the lowest minute of any host, per GPU
    silent_hosts: tuple[int, ...] = ()
    hosts: int = 0

    @property
    def readable(self) -> bool:
        return bool(self.gpus_per_host) and self.hosts > 0 and not self.silent_hosts

    @property
    def busy(self) -> bool:
        return self.readable and self.lowest_percent is not None and self.lowest_percent >= BUSY_PERCENT


def gpus_seen(
    hosts: Mapping[int, Sequence[tuple[datetime, float]]], host_count: int, gpus_per_host: int | None
) -> GpusSeen:
    """The lowest per-GPU minute over every host; hosts without a reading named."""
    silent = tuple(h for h in range(1, host_count + 1) if not hosts.get(h))
    values = [v for h in range(1, host_count + 1) for _, v in hosts.get(h, ())]
    lowest = min(values) / gpus_per_host if values and gpus_per_host else None
    return GpusSeen(gpus_per_host, lowest, silent, host_count)


@dataclass(frozen=True)
class Output:
    """The job's own output as read this sweep."""

    metric_times: tuple[datetime, ...]  # its own datapoints' times over the run (every metric)
    metrics_defined: bool
    checkpoint_at: datetime | None = None  # the newest object under its checkpoint location, where it has one
    checkpoint_read: bool = True  # False: it checkpoints, and the location could not be read

    def last_written(self, logs: LogsSeen) -> datetime | None:
        """The newest of everything it wrote that was read."""
        written = [*self.metric_times, *(t for t in logs.newest.values() if t is not None)]
        written += [self.checkpoint_at] if self.checkpoint_at else []
        return max(written, default=None)


def metrics_quiet(detail: TrainingJobDetail, output: Output, now: datetime) -> bool:
    """Whether the job's own metrics (and checkpoints) say nothing newer than its silence: the first test, before
    any log is read. A job that started less than the silence ago is never quiet."""
    started = detail.TrainingStartTime
    after = silence_after(output.metric_times)
    if detail.TrainingJobStatus != "InProgress" or started is None or now - started <= after:
        return False
    recent = [t for t in output.metric_times if now - t <= after]
    recent += [output.checkpoint_at] if output.checkpoint_at and now - output.checkpoint_at <= after else []
    return not recent


def judge(output: Output, logs: LogsSeen, gpus: GpusSeen | None) -> Verdict:
    """A quiet job (metrics_quiet): alive if a log line came since, cannot tell if its logs, its checkpoints or its
    GPUs could not be read, hung if every host's GPUs read busy, not busy otherwise (job_stalled's to judge)."""
    if not logs.readable or not output.checkpoint_read:
        return "cannot_tell"
    if logs.wrote_since:
        return "alive"
    if gpus is None or not gpus.readable:
        return "cannot_tell"
    return "hung" if gpus.busy else "not_busy"


def may_stop_on_hang(detail: TrainingJobDetail) -> bool:
    return detail.Tags.get(HANG_TAG, "").strip().lower() == "true"


def marked_for_hang(detail: TrainingJobDetail) -> bool:
    return mark_reason(detail.Tags) == Reason.JOB_HUNG.value


def _since(output: Output, logs: LogsSeen, detail: TrainingJobDetail) -> datetime:
    return output.last_written(logs) or detail.TrainingStartTime or datetime.min.replace(tzinfo=UTC)


def hung_finding(
    detail: TrainingJobDetail,
    output: Output,
    logs: LogsSeen,
    gpus: GpusSeen,
    *,
    account: str,
    region: str,
    price: Price | None,
    now: datetime,
    event_id: str | None = None,
) -> Finding:
    """``job_hung``: remediable only for a job tagged ``costguard:stop-on-hang=true`` whose logs and own metrics
    both went silent (a job with no metric is told, not stopped)."""
    resource = training_job_resource(detail, account=account, region=region)
    hourly = hourly_usd(price, resource.instance_count)
    since = _since(output, logs, detail)
    hours = max(0.0, (now - since).total_seconds() / 3600)
    spent = round(hours * hourly, 2) if hourly is not None else None
    tagged = may_stop_on_hang(detail)
    agree = output.metrics_defined
    hosts = [s.split("/", 1)[-1] for s in logs.streams] or [f"algo-{h}" for h in range(1, gpus.hosts + 1)]
    if not tagged:
        advice = f" Tag it {HANG_TAG}=true to let costguard stop a hung run in remediate mode."
    elif not agree:
        advice = " It defines no metric of its own: its logs alone are not enough for costguard to stop it."
    else:
        advice = ""
    summary = (
        f"Training job {detail.TrainingJobName} looks hung: nothing written since {since:%Y-%m-%d %H:%M} UTC "
        f"({hours:.1f}h: no log line on any of its {len(hosts)} hosts, no datapoint of its own metrics) while every "
        f"GPU reads at least {gpus.lowest_percent:.0f}%. The hang has cost {usd_text(spent)} so far and costs "
        f"{usd_text(hourly)} an hour.{advice}"
    )
    evidence: dict[str, Any] = {
        "silent_since": since.isoformat(),
        "silent_hours": round(hours, 2),
        "hang_cost_usd": spent,
        "silent_hosts": hosts,
        "lowest_gpu_percent": round(gpus.lowest_percent or 0.0, 1),
        "silent_after_minutes": int(silence_after(output.metric_times).total_seconds() // 60),
        "last_log_lines": list(logs.last_lines),
        "instance_type": resource.instance_type,
        "instance_count": resource.instance_count,
        "price_usd_per_hour": price.usd_per_hour if price else None,
        "stop_on_hang": tagged,
    }
    return Finding(
        reason=Reason.JOB_HUNG,
        resource=resource,
        summary=summary,
        observed_at=now,
        event_id=event_id,
        hourly_usd=hourly,
        remediable=tagged and agree,
        armed_by={HANG_TAG: detail.Tags[HANG_TAG]} if tagged else {},
        report_note=None if agree or not tagged else "not stopped: no metric of its own agrees with its logs",
        evidence=evidence,
    )


def cannot_tell_finding(
    detail: TrainingJobDetail,
    why: str,
    *,
    account: str,
    region: str,
    price: Price | None,
    now: datetime,
    event_id: str | None = None,
) -> Finding:
    """``job_hang_unknown`` (notify only): the job's metrics say nothing new, and what would tell a hang from a
    pause could not be read."""
    resource = training_job_resource(detail, account=account, region=region)
    return Finding(
        reason=Reason.JOB_HANG_UNKNOWN,
        resource=resource,
        summary=(
            f"Training job {detail.TrainingJobName} has written no metric for a while, and costguard cannot tell "
            f"whether it is hung: {why}. It is not stopped on this."
        ),
        observed_at=now,
        event_id=event_id,
        hourly_usd=hourly_usd(price, resource.instance_count),
        remediable=False,
        evidence={
            "why": why,
            "instance_type": resource.instance_type,
            "instance_count": resource.instance_count,
        },
    )


def unhung_finding(
    detail: TrainingJobDetail,
    *,
    account: str,
    region: str,
    price: Price | None,
    now: datetime,
    event_id: str | None = None,
) -> Finding:
    """A job marked for a hang that wrote again: its pending stop is cancelled (``gpu_active_again``)."""
    resource = training_job_resource(detail, account=account, region=region)
    return Finding(
        reason=Reason.GPU_ACTIVE_AGAIN,
        resource=resource,
        summary=f"Training job {detail.TrainingJobName} is writing again: its pending stop for a hang is cancelled.",
        observed_at=now,
        event_id=event_id,
        hourly_usd=hourly_usd(price, resource.instance_count),
        cancels_mark=True,
        evidence={"marked_for": Reason.JOB_HUNG.value},
    )


def quoted(lines: Sequence[str]) -> tuple[str, ...]:
    """Log lines as quoted in a message: control characters gone, each cut to LINE_CHARS (the message escapes
    them for Slack)."""
    kept = []
    for line in lines[-LAST_LINES:]:
        text = "".join(c if c.isprintable() else " " for c in line).strip()
        kept.append(text[:LINE_CHARS] + ("…" if len(text) > LINE_CHARS else ""))
    return tuple(kept)
