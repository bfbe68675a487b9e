"""Training-job health. Pure: a run whose own metrics diverge (``training_diverged``), and a checkpoint location
that has gone stale (``checkpoint_stale``).

The metrics are the job's ``MetricDefinitions``, which SageMaker publishes to CloudWatch under
``/aws/sagemaker/TrainingJobs`` with the dimension ``TrainingJobName``. CloudWatch's PutMetricData refuses NaN
and infinity, so a NaN in a job's log may never reach CloudWatch as one: the non-finite rule judges whatever comes
back, and a loss exploding on its way to NaN is the rising rule's. Every figure is hours x instance count x
on-demand price (``Price``): for a managed spot job an upper bound. An unknown price gives an unknown figure,
never zero.

Anyone allowed ``cloudwatch:PutMetricData`` can add datapoints to a job's series. A NaN or infinity cannot be added
(CloudWatch refuses them), but a low reading, or readings that climb, can: the plateau rule judges levels no
single reading sets, and a rising loss or a plateau on a series with added datapoints
(detect.training_cadence) is told, never acted on.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any, Literal

from costguard.detect.sagemaker import hourly_usd
from costguard.detect.spot import CHECKPOINT_FALSE_VALUES, CHECKPOINT_TAG
from costguard.detect.training_cadence import AddedDatapoints
from costguard.detect.training_guardrails import usd_text
from costguard.detect.training_jobs import training_job_resource
from costguard.events.sagemaker import TrainingJobDetail
from costguard.model import Finding, Reason, mark_reason
from costguard.pricing import Price

STOP_ON_DIVERGENCE_TAG = "costguard:stop-on-divergence"  # "true": a diverged job may be marked and stopped
LOSS_METRIC_TAG = "costguard:loss-metric"  # names the loss among the job's metrics (default: every "loss")

# A loss "rises steadily" when at least this share of the steps between its readings in the window go up...
RISING_STEP_SHARE = 0.8
# ...over at least this many readings: two or three points going up is noise, not a trend.
MIN_RISING_POINTS = 4
# A plateau is judged with at least this many readings before and after the cut.
MIN_PLATEAU_POINTS = 3
# A plateau compares levels: the median of this many consecutive readings, which no one reading sets.
PLATEAU_LEVEL_POINTS = 3
VALUES_SHOWN = 8  # the metric's latest readings quoted in the alert

Series = Sequence[tuple[datetime, float]]
DivergenceKind = Literal["non_finite", "rising", "plateau"]


# --- training_diverged ---------------------------------------------------------------------------


def metric_names(detail: TrainingJobDetail) -> list[str]:
    """The job's own metrics (its MetricDefinitions), in definition order, each once."""
    spec = detail.AlgorithmSpecification
    return list(dict.fromkeys(d.Name for d in spec.MetricDefinitions)) if spec else []


def loss_metrics(detail: TrainingJobDetail) -> list[str]:
    """The metrics judged for a rising or flat loss: the one the tag names, else every metric with "loss" in
    its name (``train:loss``, ``validation:loss``). Lower is better for each."""
    names = metric_names(detail)
    chosen = detail.Tags.get(LOSS_METRIC_TAG, "").strip()
    if chosen:
        return [n for n in names if n == chosen]
    return [n for n in names if "loss" in n.lower()]


@dataclass(frozen=True)
class Divergence:
    """Why one of the job's metrics says the run is going nowhere."""

    kind: DivergenceKind
    metric: str
    why: str  # a sentence fragment, e.g. "train:loss read NaN at 11:55Z"
    recent: tuple[float, ...]  # the metric's latest readings, oldest first


def show(value: float) -> str:
    """A metric reading as a person reads it."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "infinity" if value > 0 else "-infinity"
    return f"{value:.4g}"


def _non_finite(metric: str, series: Series, since: datetime) -> Divergence | None:
    bad = [(at, v) for at, v in series if at >= since and not math.isfinite(v)]
    if not bad:
        return None
    at, value = bad[0]
    return Divergence(
        "non_finite",
        metric,
        f"{metric} read {show(value)} from {at:%Y-%m-%d %H:%M} UTC on ({len(bad)} readings in the window)",
        tuple(v for _, v in series[-VALUES_SHOWN:]),
    )


def _levels(values: Sequence[float]) -> list[float]:
    """The loss's level at each reading with a neighbour on both sides: the median of PLATEAU_LEVEL_POINTS
    consecutive readings centred on it. One reading far from its neighbours (an outlier, whoever wrote it) sets no
    level; on a loss that only falls, or only rises, each level is the reading itself."""
    k = PLATEAU_LEVEL_POINTS
    return [statistics.median(values[n : n + k]) for n in range(len(values) - k + 1)]


def _rising(
    metric: str, series: Series, since: datetime, tolerance: float, window: timedelta
) -> Divergence | None:
    points = [v for at, v in series if at >= since and math.isfinite(v)]
    if len(points) < MIN_RISING_POINTS:
        return None
    steps = [b - a for a, b in pairwise(points)]
    up = sum(1 for step in steps if step > 0)
    first, last = points[0], points[-1]
    # How far it rose, from level to level (``_levels``): one reading at either end sets neither.
    levels = _levels(points)
    low, high = levels[0], levels[-1]
    if up / len(steps) < RISING_STEP_SHARE or high - low <= tolerance * max(abs(low), 1e-12):
        return None
    minutes = int(window.total_seconds() // 60)
    return Divergence(
        "rising",
        metric,
        f"{metric} rose in {up} of {len(steps)} steps over the last {minutes} min, from {show(first)} to "
        f"{show(last)}",
        tuple(points[-VALUES_SHOWN:]),
    )


def _plateau(
    metric: str,
    series: Series,
    *,
    started: datetime,
    now: datetime,
    share: float,
    tolerance: float,
    window: timedelta,
) -> Divergence | None:
    """No improvement beyond ``tolerance`` (relative) over the last ``share`` of the run: the lowest level since
    the cut is not below the lowest level before it by more than that (``_levels``: a level is the median of
    three consecutive readings, so one low reading, like a datapoint added at 0.0, makes no plateau). Not judged
    before the span reaches ``window``."""
    span = (now - started) * share
    if span < window:
        return None
    cut = now - span
    readings = [(at, v) for at, v in series if started <= at and math.isfinite(v)]
    before = [v for at, v in readings if at < cut]
    after = [v for at, v in readings if at >= cut]
    if len(before) < MIN_PLATEAU_POINTS or len(after) < MIN_PLATEAU_POINTS:
        return None
    # Each level sits at the reading at its centre: a level straddling the cut belongs where its centre does.
    levels = _levels([v for _, v in readings])
    centre = PLATEAU_LEVEL_POINTS // 2
    best_before = min(levels[: len(before) - centre])
    best_after = min(levels[len(before) - centre :])
    if best_before - best_after > tolerance * max(abs(best_before), 1e-12):
        return None
    hours = span.total_seconds() / 3600
    return Divergence(
        "plateau",
        metric,
        f"{metric} has not improved by more than {tolerance:.1%} in the last {hours:.1f}h ({share:.0%} of the "
        f"run): lowest level {show(best_after)} since, {show(best_before)} before (a level is the median of "
        f"{PLATEAU_LEVEL_POINTS} consecutive readings)",
        tuple(after[-VALUES_SHOWN:]),
    )


def divergence(
    detail: TrainingJobDetail,
    series_of: Mapping[str, Series],
    *,
    now: datetime,
    window: timedelta,
    tolerance: float,
    share: float,
) -> Divergence | None:
    """The first sign of divergence, worst first: a NaN or infinite reading of any of the job's metrics in the
    window, then a loss rising steadily over the window, then a loss flat over the last ``share`` of the run."""
    since = now - window
    for metric in metric_names(detail):
        found = _non_finite(metric, series_of.get(metric, ()), since)
        if found:
            return found
    losses = loss_metrics(detail)
    for metric in losses:
        found = _rising(metric, series_of.get(metric, ()), since, tolerance, window)
        if found:
            return found
    started = detail.TrainingStartTime
    if started is None:
        return None
    for metric in losses:
        found = _plateau(
            metric,
            series_of.get(metric, ()),
            started=started,
            now=now,
            share=share,
            tolerance=tolerance,
            window=window,
        )
        if found:
            return found
    return None


def remaining_seconds(detail: TrainingJobDetail, now: datetime) -> int | None:
    """What is left of the job's MaxRuntimeInSeconds (from TrainingStartTime); None without either."""
    limit = detail.StoppingCondition.MaxRuntimeInSeconds if detail.StoppingCondition else None
    started = detail.TrainingStartTime
    if not limit or started is None:
        return None
    return max(0, limit - max(0, int((now - started).total_seconds())))


def may_stop_on_divergence(detail: TrainingJobDetail) -> bool:
    return detail.Tags.get(STOP_ON_DIVERGENCE_TAG, "").strip().lower() == "true"


def diverged_finding(
    detail: TrainingJobDetail,
    found: Divergence,
    *,
    account: str,
    region: str,
    price: Price | None,
    now: datetime,
    observed_at: datetime,
    event_id: str | None = None,
    added: AddedDatapoints | None = None,
) -> Finding:
    """``training_diverged``: remediable only for a job tagged ``costguard:stop-on-divergence=true``, so the
    common path marks it, then stops it after the grace period in remediate mode.

    ``added``: the metric's series holds datapoints the job did not write (detect.training_cadence). A rising
    loss or a plateau on such a series is evidence anyone allowed PutMetricData could have made: it is told, never
    acted on. A NaN or infinite reading is not (CloudWatch refuses them), and stays remediable."""
    resource = training_job_resource(detail, account=account, region=region)
    hourly = hourly_usd(price, resource.instance_count)
    left = remaining_seconds(detail, now)
    rest = round(left / 3600 * hourly, 2) if left is not None and hourly is not None else None
    tagged = may_stop_on_divergence(detail)
    doubted = added if found.kind != "non_finite" else None  # what makes the finding only told
    if left is None:
        cost = "the rest of the run costs an unknown amount (no MaxRuntimeInSeconds)"
    else:
        cost = f"the rest of its max runtime ({left / 3600:.1f}h) would cost {usd_text(rest)}"
    if doubted is not None:
        advice = (
            f" Its {found.metric} series holds datapoints the job did not write ({doubted.why}): anyone allowed "
            "cloudwatch:PutMetricData can add them, so costguard will not stop it on this evidence."
        )
    elif not tagged:
        advice = (
            f" Tag it {STOP_ON_DIVERGENCE_TAG}=true to let costguard stop a diverged run in remediate mode."
        )
    else:
        advice = ""
    evidence: dict[str, Any] = {
        "metric": found.metric,
        "rule": {"non_finite": "NaN or infinity", "rising": "rising loss", "plateau": "no improvement"}[
            found.kind
        ],
        "what_was_seen": found.why,
        "recent_values": [show(v) for v in found.recent],
        "remaining_hours": round(left / 3600, 2) if left is not None else None,
        "rest_of_run_usd": rest,
        "instance_type": resource.instance_type,
        "instance_count": resource.instance_count,
        "price_usd_per_hour": price.usd_per_hour if price else None,
        "managed_spot": detail.EnableManagedSpotTraining,
        "stop_on_divergence": tagged,
        "added_datapoints": added.why if added else None,
    }
    return Finding(
        reason=Reason.TRAINING_DIVERGED,
        resource=resource,
        summary=f"Training job {detail.TrainingJobName} looks diverged: {found.why}; {cost}.{advice}",
        observed_at=observed_at,
        event_id=event_id,
        hourly_usd=hourly,
        remediable=tagged and doubted is None,
        armed_by={STOP_ON_DIVERGENCE_TAG: detail.Tags[STOP_ON_DIVERGENCE_TAG]} if tagged else {},
        report_note=(
            None
            if doubted is None
            else f"not stopped: its {found.metric} series holds datapoints the job did not write"
        ),
        evidence=evidence,
    )


def marked_for_divergence(detail: TrainingJobDetail) -> bool:
    """Whether the job carries costguard's mark, made for a diverged run (model.mark_text)."""
    return mark_reason(detail.Tags) == Reason.TRAINING_DIVERGED.value


def _judged_readings(detail: TrainingJobDetail, series_of: Mapping[str, Series], since: datetime) -> int:
    """The finite readings since ``since`` of the metrics judged for a trend: its losses, else every metric."""
    judged = loss_metrics(detail) or metric_names(detail)
    return sum(1 for m in judged for at, v in series_of.get(m, ()) if at >= since and math.isfinite(v))


def recovered(
    detail: TrainingJobDetail, series_of: Mapping[str, Series], *, now: datetime, window: timedelta
) -> bool:
    """Whether a run that ``divergence`` no longer finds diverged shows it with readings: at least
    MIN_RISING_POINTS finite readings in the window, as many as the rising rule judges. A window without them
    proves nothing (CloudWatch refuses a NaN, so a run gone NaN may fall silent): its mark then stays."""
    return _judged_readings(detail, series_of, now - window) >= MIN_RISING_POINTS


def recovered_finding(
    detail: TrainingJobDetail,
    *,
    account: str,
    region: str,
    price: Price | None,
    window: timedelta,
    observed_at: datetime,
    event_id: str | None = None,
) -> Finding:
    """A job marked for a diverged run that no longer looks diverged (its loss falls again, its plateau broke):
    the mark is cancelled, so that a later divergence is marked afresh and gets its whole grace period.
    ``gpu_active_again`` is the reason code of every cancelled pending stop."""
    resource = training_job_resource(detail, account=account, region=region)
    minutes = int(window.total_seconds() // 60)
    return Finding(
        reason=Reason.GPU_ACTIVE_AGAIN,
        resource=resource,
        summary=(
            f"Training job {detail.TrainingJobName} no longer looks diverged (no NaN and no rising loss over the "
            f"last {minutes} min, no plateau): its pending stop is cancelled."
        ),
        observed_at=observed_at,
        event_id=event_id,
        hourly_usd=hourly_usd(price, resource.instance_count),
        cancels_mark=True,
        evidence={
            "marked_for": Reason.TRAINING_DIVERGED.value,
            "window_minutes": minutes,
            "instance_type": resource.instance_type,
            "instance_count": resource.instance_count,
            "price_usd_per_hour": price.usd_per_hour if price else None,
        },
    )


# --- checkpoint_stale ----------------------------------------------------------------------------


def checkpoint_location(detail: TrainingJobDetail) -> str | None:
    """Where the job checkpoints, when it is one costguard watches: a managed spot job's
    ``CheckpointConfig.S3Uri``, or any job's ``costguard:checkpoint`` tag (an s3:// URI, or ``true`` for its
    CheckpointConfig). ``costguard:checkpoint=false`` opts out; None for a job that does not qualify."""
    tag = detail.Tags.get(CHECKPOINT_TAG, "").strip()
    configured = detail.CheckpointConfig.S3Uri if detail.CheckpointConfig else None
    if tag.lower() in CHECKPOINT_FALSE_VALUES:
        return None
    if tag.lower().startswith("s3://"):
        return tag
    if tag or detail.EnableManagedSpotTraining:
        return configured or None
    return None


def split_s3_uri(uri: str) -> tuple[str, str] | None:
    """(bucket, key prefix) of an s3:// URI; None when it names no bucket."""
    if not uri.lower().startswith("s3://"):
        return None
    bucket, _, prefix = uri[5:].partition("/")
    return (bucket, prefix) if bucket else None


def checkpoint_due(detail: TrainingJobDetail, now: datetime, interval: timedelta) -> bool:
    """Whether the job has run long enough to owe a checkpoint: no read is made before that."""
    started = detail.TrainingStartTime
    return detail.TrainingJobStatus == "InProgress" and started is not None and now - started > interval


@dataclass(frozen=True)
class CheckpointSeen:
    """What one ListObjectsV2 page under the checkpoint prefix showed."""

    newest: datetime | None  # the latest LastModified on the page
    objects: int
    truncated: bool  # more keys than one page: a newer object may sit beyond it


def stale_checkpoint_finding(
    detail: TrainingJobDetail,
    location: str,
    seen: CheckpointSeen,
    *,
    account: str,
    region: str,
    price: Price | None,
    interval: timedelta,
    now: datetime,
    observed_at: datetime,
    event_id: str | None = None,
) -> Finding | None:
    """``checkpoint_stale`` (notify only): no object newer than ``interval`` under the location. The work at
    risk runs from the newest checkpoint of this run (a checkpoint older than its start is a previous run's:
    the work at risk then runs from the start). A truncated page whose newest object is old says nothing
    certain, and gives no finding."""
    started = detail.TrainingStartTime
    if started is None or not checkpoint_due(detail, now, interval):
        return None
    since = max(seen.newest, started) if seen.newest is not None else started
    if now - since <= interval or seen.truncated:
        return None
    resource = training_job_resource(detail, account=account, region=region)
    hourly = hourly_usd(price, resource.instance_count)
    hours = (now - since).total_seconds() / 3600
    at_risk = round(hours * hourly, 2) if hourly is not None else None
    if seen.newest is None:
        last = "no checkpoint object at all"
    elif seen.newest < started:
        last = f"nothing since the run started (the newest object, {seen.newest:%Y-%m-%d %H:%M} UTC, is a previous run's)"
    else:
        last = f"the newest object was written at {seen.newest:%Y-%m-%d %H:%M} UTC"
    return Finding(
        reason=Reason.CHECKPOINT_STALE,
        resource=resource,
        summary=(
            f"Training job {detail.TrainingJobName} has not checkpointed for {hours:.1f}h ({last} under "
            f"{location}): an interruption now would lose {hours:.1f}h of work, {usd_text(at_risk)}."
        ),
        observed_at=observed_at,
        event_id=event_id,
        hourly_usd=hourly,
        remediable=False,
        evidence={
            "checkpoint_location": location,
            "newest_checkpoint_at": seen.newest.isoformat() if seen.newest else None,
            "objects_seen": seen.objects,
            "hours_at_risk": round(hours, 2),
            "at_risk_usd": at_risk,
            "stale_after_seconds": int(interval.total_seconds()),
            "managed_spot": detail.EnableManagedSpotTraining,
            "instance_type": resource.instance_type,
            "instance_count": resource.instance_count,
            "price_usd_per_hour": price.usd_per_hour if price else None,
        },
    )
