"""The scheduled training-job sweep: cost ceilings over every in-progress job, its health (a diverged run, a
hung one, a stale checkpoint), and the daily digest."""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import replace
from datetime import datetime, timedelta

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import ValidationError

from costguard.act.arming import Sighting
from costguard.act.aws import permissions_for
from costguard.act.shadow import key_of, overlay
from costguard.aws import (
    buckets,
    checkpoints,
    clients,
    inventory,
    metrics,
    sagemaker,
    training_logs,
    training_metrics,
    training_state,
)
from costguard.aws.metrics import Query
from costguard.aws.sagemaker import TRAINING_GPU_METRIC, TRAINING_NAMESPACE, in_progress_jobs_described
from costguard.aws.training_metrics import Readings
from costguard.aws.training_state import TrainingState
from costguard.detect.training_cadence import added_datapoints
from costguard.detect.training_guardrails import digest_finding, guardrail_findings, host_count
from costguard.detect.training_hang import (
    HANG_GPU_MINUTES,
    LAST_LINES,
    GpusSeen,
    LogsSeen,
    Output,
    cannot_tell_finding,
    gpus_seen,
    hung_finding,
    judge,
    marked_for_hang,
    metrics_quiet,
    quoted,
    silence_after,
    unhung_finding,
)
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
    | training_logs.PERMISSIONS  # job_hung: a quiet job's log streams
    | inventory.TYPES_PERMISSIONS  # job_hung: a host's GPU count, once per type per process
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


def watched_jobs(jobs: Sequence[TrainingJobDetail]) -> Watched:
    """The jobs that have started and define metrics of their own, with those metrics."""
    return [(job, names) for job in jobs if job.TrainingStartTime and (names := metric_names(job))]


def divergence_findings(
    jobs: list[TrainingJobDetail],
    region: str,
    runtime: Runtime,
    now: datetime,
    event_id: str | None,
    held: Set[str] = frozenset(),
    readings: dict[str, Readings] | None = None,
) -> list[Finding]:
    """A ``training_diverged`` finding for each job whose own metrics diverge, and the cancel of a divergence
    mark whose job no longer diverges (training_health.recovered), except for a job in ``held``: one that
    another finding of this sweep may stop (its cost ceiling), whose mark that finding decides on. No read
    when no job defines a metric; ``readings``: the sweep's read of them (job_series), made here if not given."""
    watched = watched_jobs(jobs)
    if not watched:
        return []
    settings = runtime.settings
    window = timedelta(minutes=settings.divergence_window_minutes)
    readings = job_series(watched, region, runtime, now) if readings is None else readings
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


def _output(job: TrainingJobDetail, read: Readings | None) -> Output:
    times = tuple(at for series in (read.values.values() if read else ()) for at, _ in series)
    return Output(times, metrics_defined=bool(metric_names(job)))


def hang_findings(
    jobs: Sequence[TrainingJobDetail],
    region: str,
    runtime: Runtime,
    now: datetime,
    event_id: str | None,
    readings: dict[str, Readings],
    held: Set[str] = frozenset(),
) -> list[Finding]:
    """``job_hung`` for each quiet job (its own metrics and checkpoints say nothing newer than its silence) whose
    logs went silent too while every host's GPUs read busy; ``job_hang_unknown`` where that cannot be read; the
    cancel of a hang mark whose job writes again. Reads only for quiet jobs: its checkpoint location (one
    ListObjectsV2), its streams and one FilterLogEvents, then, for those silent there, their hosts' GPUs in one
    GetMetricData walk and each host's newest events. A job in ``held`` (another finding may stop it) is left to
    that finding."""
    findings: list[Finding] = []
    quiet: list[tuple[TrainingJobDetail, Output]] = []
    for job in (j for j in jobs if j.TrainingJobName not in held):
        output = _output(job, readings.get(job.TrainingJobName))
        if metrics_quiet(job, output, now):  # then its checkpoints, where it declares them (one read)
            output = _with_checkpoint(job, output, region)
        if metrics_quiet(job, output, now) or not output.checkpoint_read:
            quiet.append((job, output))
        elif marked_for_hang(job):
            findings.append(_unhung(job, region, runtime, now, event_id))
    logs = {job.TrainingJobName: _logs_seen(job, output, region, now) for job, output in quiet}
    silent = [
        j for j, o in quiet if logs[j.TrainingJobName].readable and not logs[j.TrainingJobName].wrote_since
    ]
    gpus = _gpus_seen(silent, region, runtime, now, {j.TrainingJobName: o for j, o in quiet})
    for job, output in quiet:
        seen = logs[job.TrainingJobName]
        verdict = judge(output, seen, gpus.get(job.TrainingJobName))
        price = runtime.prices.hourly(_instance_type(job), region)
        if verdict == "hung":
            seen = _with_newest(job, seen, region)
            findings.append(
                hung_finding(
                    job,
                    output,
                    seen,
                    gpus[job.TrainingJobName],
                    account=_account(job),
                    region=region,
                    price=price,
                    now=now,
                    event_id=event_id,
                )
            )
        elif verdict == "cannot_tell":
            findings.append(
                cannot_tell_finding(
                    job,
                    _unread(output, seen, gpus.get(job.TrainingJobName)),
                    account=_account(job),
                    region=region,
                    price=price,
                    now=now,
                    event_id=event_id,
                )
            )
        elif verdict == "alive" and marked_for_hang(job):
            findings.append(_unhung(job, region, runtime, now, event_id))
    return findings


def _unhung(
    job: TrainingJobDetail, region: str, runtime: Runtime, now: datetime, event_id: str | None
) -> Finding:
    price = runtime.prices.hourly(_instance_type(job), region)
    return unhung_finding(job, account=_account(job), region=region, price=price, now=now, event_id=event_id)


def _with_checkpoint(job: TrainingJobDetail, output: Output, region: str) -> Output:
    """The newest object under the job's checkpoint location, for a job that declares one and is otherwise quiet;
    unreadable (a member account's bucket, an error): ``checkpoint_read`` is False."""
    location = checkpoint_location(job)
    if location is None:
        return output
    where = split_s3_uri(location)
    if where is None or clients.is_member(_account(job), region):
        return replace(output, checkpoint_read=False)
    try:
        seen = checkpoints.newest_object(region, *where)
    except (ClientError, BotoCoreError):
        return replace(output, checkpoint_read=False)
    return replace(output, checkpoint_at=seen.newest, checkpoint_read=not seen.truncated)


def _logs_seen(job: TrainingJobDetail, output: Output, region: str, now: datetime) -> LogsSeen:
    """Whether any of the quiet job's hosts logged since its silence began."""
    try:
        streams = training_logs.host_streams(region, job.TrainingJobName)
        if not streams:
            return LogsSeen(False, why="it has no log stream")
        since = now - silence_after(output.metric_times)
        return LogsSeen(True, streams, training_logs.wrote_since(region, streams, since))
    except training_logs.LogsUnreadable as error:
        logger.warning("training logs unreadable", extra={"job": job.TrainingJobName, "why": str(error)})
        return LogsSeen(False, why=str(error))


def _with_newest(job: TrainingJobDetail, seen: LogsSeen, region: str) -> LogsSeen:
    """Each host's newest events and the last lines, for a job found hung (read once a sweep)."""
    try:
        newest = training_logs.newest_events(region, seen.streams, LAST_LINES)
    except training_logs.LogsUnreadable as error:
        logger.warning("training logs unreadable", extra={"job": job.TrainingJobName, "why": str(error)})
        return seen
    return replace(seen, newest=newest.at, last_lines=quoted(newest.lines))


def _gpus_seen(
    jobs: Sequence[TrainingJobDetail],
    region: str,
    runtime: Runtime,
    now: datetime,
    outputs: dict[str, Output],
) -> dict[str, GpusSeen]:
    """The silent jobs' hosts' GPUUtilization, each minute's Minimum over the silence (at most HANG_GPU_MINUTES):
    one query per host, in one walk."""
    if not jobs:
        return {}
    try:
        types = inventory.catalog.lookup(region, [t for j in jobs if (t := _instance_type(j))])
    except (ClientError, BotoCoreError):
        types = {}
    minutes = {
        j.TrainingJobName: min(
            HANG_GPU_MINUTES,
            int(silence_after(outputs[j.TrainingJobName].metric_times).total_seconds() // 60),
        )
        for j in jobs
    }
    queries = [
        Query(
            (j.TrainingJobName, "gpu", str(host)),
            TRAINING_NAMESPACE,
            TRAINING_GPU_METRIC,
            (("Host", f"{j.TrainingJobName}/algo-{host}"),),
            stat="Minimum",
        )
        for j in jobs
        for host in range(1, host_count(j) + 1)
    ]
    start = now - timedelta(minutes=max(minutes.values()))
    data = runtime.reads.metrics.get_metric_data(region, queries, start, now, 60)
    seen = {}
    for j in jobs:
        since = now - timedelta(minutes=minutes[j.TrainingJobName])
        hosts = {
            h: [p for p in series if p[0] >= since] for h, series in data.gpus(j.TrainingJobName).items()
        }
        accelerators = types.get(_instance_type(j) or "")
        seen[j.TrainingJobName] = gpus_seen(
            hosts, host_count(j), accelerators.count if accelerators else None
        )
    return seen


def _unread(output: Output, logs: LogsSeen, gpus: GpusSeen | None) -> str:
    """Why a quiet job's hang cannot be told."""
    if not logs.readable:
        return logs.why
    if not output.checkpoint_read:
        return "its checkpoint location could not be read"
    if gpus is None or not gpus.gpus_per_host:
        return "its instance type's GPU count is unknown"
    if gpus.silent_hosts:
        return "no GPUUtilization from " + ", ".join(f"algo-{h}" for h in gpus.silent_hosts)
    return "its GPUs could not be read"


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
    watched = watched_jobs(jobs)
    readings = job_series(watched, region, runtime, now) if watched else {}
    findings += divergence_findings(jobs, region, runtime, now, event_id, held, readings)
    findings += hang_findings(jobs, region, runtime, now, event_id, readings, held)
    findings += checkpoint_findings(jobs, region, runtime, now, event_id)
    findings += digest_findings(account, region, scheduled_at, state, event_id)
    return runtime.act(findings, now)
