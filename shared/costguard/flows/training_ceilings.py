"""The scheduled training-job sweep: cost ceilings over every in-progress job, its health (a diverged run, a
stale checkpoint), and the daily digest."""

from __future__ import annotations

from collections.abc import Sequence, Set
from datetime import datetime, timedelta

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from costguard.act.arming import Sighting
from costguard.act.aws import permissions_for
from costguard.act.shadow import key_of, overlay
from costguard.aws import buckets, checkpoints, clients, metrics, sagemaker, training_metrics, training_state
from costguard.aws.sagemaker import in_progress_jobs_described
from costguard.aws.training_metrics import Readings
from costguard.aws.training_state import TrainingState
from costguard.detect.training_cadence import added_datapoints
from costguard.detect.training_guardrails import digest_finding, guardrail_findings
from costguard.detect.training_health import (
    checkpoint_due,
    checkpoint_location,
    diverged_finding,
    divergence,
    loss_metrics,
    marked_for_divergence,
    may_stop_on_divergence,
    metric_names,
    recovered,
    recovered_finding,
    split_s3_uri,
    stale_checkpoint_finding,
)
from costguard.events.sagemaker import TrainingJobDetail
from costguard.model import Finding, Reason, ResourceKind
from costguard.observability import logger, tracer
from costguard.pipeline import Report
from costguard.runtime import ACT_PERMISSIONS, PRICES_PERMISSIONS, Runtime

SCHEDULE_PERIOD = timedelta(minutes=15)  # the template's rate(15 minutes)

# handle_schedule: in-progress jobs, their own metrics and checkpoint locations, the digest's history, and marks
# and stops of training jobs.
SCHEDULE_PERMISSIONS = (
    sagemaker.TRAINING_JOB_PERMISSIONS
    | metrics.READ_PERMISSIONS
    | buckets.LIST_PERMISSIONS  # newest_object: one ListObjectsV2 per checkpoint location
    | training_state.PERMISSIONS
    | ACT_PERMISSIONS
    | PRICES_PERMISSIONS
    | permissions_for(ResourceKind.TRAINING_JOB)
)


def judged_jobs(region: str) -> list[TrainingJobDetail]:
    """ceil(jobs/100) ListTrainingJobs, then one DescribeTrainingJob and one ListTags per in-progress job; a job
    whose description does not parse is logged and left out."""
    jobs = []
    for raw in in_progress_jobs_described(region):
        try:
            jobs.append(TrainingJobDetail.model_validate(raw))
        except ValidationError as error:
            logger.warning(
                "training job not judged", extra={"job": raw.get("TrainingJobName"), "problem": str(error)}
            )
    return jobs


def with_marks(
    jobs: list[TrainingJobDetail], region: str, runtime: Runtime, now: datetime
) -> list[TrainingJobDetail]:
    """The jobs as a live run would read them: in notify mode, with the marks it keeps in the state table as the
    mark tag (act/shadow.py), so that a run that recovers has its divergence mark cancelled in both modes."""
    return overlay(
        jobs,
        runtime.shadow_marks,
        now,
        lambda j: key_of(_account(j), region, ResourceKind.TRAINING_JOB, j.TrainingJobName),
        field="Tags",
        dry=runtime.dry_for(Reason.JOB_COST_CEILING, Reason.TRAINING_DIVERGED, field="Tags"),
    )


def _account(detail: TrainingJobDetail) -> str:
    """The job's account, from its ARN; empty when the description carries no whole ARN."""
    arn = detail.TrainingJobArn or ""
    return sagemaker.account_of(arn) if arn.count(":") >= 5 else ""


def _instance_type(detail: TrainingJobDetail) -> str | None:
    return detail.ResourceConfig.InstanceType if detail.ResourceConfig else None


def ceiling_findings(
    jobs: list[TrainingJobDetail], region: str, runtime: Runtime, now: datetime, event_id: str | None
) -> list[Finding]:
    findings: list[Finding] = []
    for detail in jobs:
        findings += guardrail_findings(
            detail,
            account=_account(detail),
            region=region,
            price=runtime.prices.hourly(_instance_type(detail), region),
            settings=runtime.settings,
            now=now,
            observed_at=now,
            event_id=event_id,
            hygiene=False,
        )
    return findings


Watched = Sequence[tuple[TrainingJobDetail, Sequence[str]]]  # jobs that have started, with their own metrics


def job_series(watched: Watched, region: str, runtime: Runtime, now: datetime) -> dict[str, Readings]:
    """Each watched job's own metrics by job name, over its run so far: one query per job and metric, in one
    GetMetricData walk per read group (training_metrics.read_groups: the jobs whose runs call for the same
    period), 500 queries to a request, each followed through its NextToken pages; never a call per job. A job
    that may be stopped on divergence has its losses' sample counts read in the same walk (one more query per
    loss): only a stop needs them."""
    metrics_of = {job.TrainingJobName: names for job, names in watched}
    counted = {job.TrainingJobName: loss_metrics(job) for job, _ in watched if may_stop_on_divergence(job)}
    starts = {job.TrainingJobName: job.TrainingStartTime for job, _ in watched if job.TrainingStartTime}
    readings: dict[str, Readings] = {}
    for start, period, names in training_metrics.read_groups(starts, now):
        queries = training_metrics.metric_queries([(name, metrics_of[name]) for name in names])
        queries += training_metrics.count_queries(
            [(name, counted[name]) for name in names if name in counted]
        )
        data = runtime.reads.metrics.get_metric_data(region, queries, start, now, period)
        readings.update({name: training_metrics.readings_of(data, name, period) for name in names})
    return readings


def divergence_findings(
    jobs: list[TrainingJobDetail],
    region: str,
    runtime: Runtime,
    now: datetime,
    event_id: str | None,
    held: Set[str] = frozenset(),
) -> list[Finding]:
    """A ``training_diverged`` finding for each job whose own metrics diverge, and the cancel of a divergence
    mark whose job no longer diverges (training_health.recovered), except for a job in ``held``: one that
    another finding of this sweep may stop (its cost ceiling), whose mark that finding decides on. No read
    when no job defines a metric."""
    watched = [(job, names) for job in jobs if job.TrainingStartTime and (names := metric_names(job))]
    if not watched:
        return []
    settings = runtime.settings
    window = timedelta(minutes=settings.divergence_window_minutes)
    readings = job_series(watched, region, runtime, now)
    findings = []
    for job, _ in watched:
        read = readings.get(job.TrainingJobName)
        series_of = read.values if read else {}
        found = divergence(
            job,
            series_of,
            now=now,
            window=window,
            tolerance=settings.plateau_tolerance,
            share=settings.plateau_share,
        )
        if found:
            counts = read.counts.get(found.metric) if read else None
            findings.append(
                diverged_finding(
                    job,
                    found,
                    account=_account(job),
                    region=region,
                    price=runtime.prices.hourly(_instance_type(job), region),
                    now=now,
                    observed_at=now,
                    event_id=event_id,
                    added=added_datapoints(counts, read.period) if read and counts else None,
                )
            )
        elif (
            marked_for_divergence(job)
            and job.TrainingJobName not in held
            and recovered(job, series_of, now=now, window=window)
        ):
            findings.append(
                recovered_finding(
                    job,
                    account=_account(job),
                    region=region,
                    price=runtime.prices.hourly(_instance_type(job), region),
                    window=window,
                    observed_at=now,
                    event_id=event_id,
                )
            )
    return findings


def checkpoint_findings(
    jobs: list[TrainingJobDetail], region: str, runtime: Runtime, now: datetime, event_id: str | None
) -> list[Finding]:
    """One ListObjectsV2 per job that checkpoints (managed spot, or tagged) and has run longer than the interval;
    none for any other job. In an organization deployment a member account's buckets are not read: S3 is called
    with the hub's own role, which a member's bucket does not grant."""
    interval = timedelta(minutes=runtime.settings.checkpoint_stale_minutes)
    findings = []
    for job in jobs:
        location = checkpoint_location(job)
        if location is None or not checkpoint_due(job, now, interval):
            continue
        where = split_s3_uri(location)
        account = _account(job)
        if where is None or clients.is_member(account, region):
            logger.info("checkpoint not read", extra={"job": job.TrainingJobName, "location": location[:300]})
            continue
        try:
            seen = checkpoints.newest_object(region, *where)
        except (ClientError, BotoCoreError) as error:
            logger.warning(
                "checkpoint location unreadable",
                extra={"job": job.TrainingJobName, "location": location[:300], "error": str(error)[:300]},
            )
            continue
        if seen.truncated:
            logger.info(
                "checkpoint prefix beyond one page",
                extra={"job": job.TrainingJobName, "location": location[:300]},
            )
        found = stale_checkpoint_finding(
            job,
            location,
            seen,
            account=account,
            region=region,
            price=runtime.prices.hourly(_instance_type(job), region),
            interval=interval,
            now=now,
            observed_at=now,
            event_id=event_id,
        )
        if found:
            findings.append(found)
    return findings


def is_first_run_of_day(scheduled_at: datetime) -> bool:
    """The schedule's first run after midnight UTC."""
    midnight = scheduled_at.replace(hour=0, minute=0, second=0, microsecond=0)
    return scheduled_at - midnight < SCHEDULE_PERIOD


def digest_findings(
    account: str, region: str, scheduled_at: datetime, state: TrainingState, event_id: str | None
) -> list[Finding]:
    """Yesterday's finished jobs, once per day (a conditional write decides which run posts)."""
    if not is_first_run_of_day(scheduled_at):
        return []
    day = (scheduled_at - timedelta(days=1)).date()
    summaries, rest = state.finished_on(account, region, day)
    if not (summaries or rest.count) or not state.first_digest(account, region, day, scheduled_at):
        return []
    found = digest_finding(
        day,
        summaries,
        account=account,
        region=region,
        observed_at=scheduled_at,
        event_id=event_id,
        rest=rest,
    )
    return [found] if found else []


@tracer.capture_method
def handle_schedule(
    runtime: Runtime,
    now: datetime,
    *,
    account: str,
    default_region: str,
    scheduled_at: datetime,
    event_id: str | None,
    state: TrainingState | None = None,
) -> Report:
    combined = Report()
    for region in runtime.settings.regions or (default_region,):
        combined.extend(
            sweep_region(
                runtime,
                now,
                account=account,
                region=region,
                scheduled_at=scheduled_at,
                event_id=event_id,
                state=state,
            )
        )
    return combined


@tracer.capture_method
def sweep_region(
    runtime: Runtime,
    now: datetime,
    *,
    account: str,
    region: str,
    scheduled_at: datetime,
    event_id: str | None,
    state: TrainingState | None = None,
) -> Report:
    """One account and region: its ceilings, its jobs' health, and yesterday's digest at the day's first run."""
    state = state or TrainingState(runtime.settings.state_table)
    jobs = with_marks(judged_jobs(region), region, runtime, now)
    runtime.observe(
        account,
        region,
        ResourceKind.TRAINING_JOB,
        [
            Sighting(
                key_of(_account(j), region, ResourceKind.TRAINING_JOB, j.TrainingJobName),
                j.CreationTime,
                j.Tags,
            )
            for j in jobs
        ],
        now,
    )
    findings = ceiling_findings(jobs, region, runtime, now, event_id)
    held = {f.resource.id for f in findings if f.remediable}
    findings += divergence_findings(jobs, region, runtime, now, event_id, held)
    findings += checkpoint_findings(jobs, region, runtime, now, event_id)
    findings += digest_findings(account, region, scheduled_at, state, event_id)
    return runtime.act(findings, now)
