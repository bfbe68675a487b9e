"""SageMaker Training Job State Change: the training-job detectors on the common path.

- Failed: ``training_job_failed``, and ``job_failure_loop`` once a family keeps failing;
- InProgress: cost ceilings (``job_cost_warning``, ``job_cost_ceiling``), launch hygiene
  (``job_no_max_runtime``, ``spot_without_checkpoint``, ``spot_recommended``), input read from another region
  (``data_cross_region``) and a GPU job without the account's cost-allocation tags (``untagged_gpu_spend``);
- Completed and Stopped: what the run cost and what spot saved, kept for the daily digest.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from pydantic import ValidationError

from costguard.act.aws import permissions_for
from costguard.aws import buckets, inventory, metrics, sagemaker, training_state
from costguard.aws.metrics import MetricSet, Query, get_metric_data
from costguard.aws.sagemaker import TRAINING_GPU_METRIC, TRAINING_NAMESPACE, in_progress_family_jobs
from costguard.aws.training_state import TrainingState
from costguard.detect.job_families import Failure, Family, failure_loop, job_family
from costguard.detect.placement import cross_region_finding, input_buckets, s3_inputs
from costguard.detect.sagemaker import hourly_usd
from costguard.detect.tagging import missing_tags, untagged_launch_finding
from costguard.detect.training_guardrails import (
    GpuUse,
    completed_summary,
    gpu_use,
    guardrail_findings,
    host_count,
    loop_finding,
    loop_stop_findings,
    name_family_note,
)
from costguard.detect.training_jobs import detect_failed_training_job, run_cost_usd, training_job_resource
from costguard.events.sagemaker import TrainingJobDetail, TrainingJobStateChange
from costguard.model import Finding, Reason, ResourceKind
from costguard.observability import logger, tracer
from costguard.pipeline import Report
from costguard.pricing import Price
from costguard.runtime import ACT_PERMISSIONS, PRICES_PERMISSIONS, Runtime

GPU_PERIOD_SECONDS = 60  # the Maximum of each minute over the idle window

# handle_training_job_event: the family's jobs, its history, their GPU use (GetMetricData), and marks and
# stops of training jobs.
EVENT_PERMISSIONS = (
    sagemaker.TRAINING_JOB_PERMISSIONS
    | metrics.READ_PERMISSIONS
    | training_state.PERMISSIONS
    | ACT_PERMISSIONS
    | PRICES_PERMISSIONS
    | permissions_for(ResourceKind.TRAINING_JOB)
    | buckets.REGION_PERMISSIONS  # data_cross_region: each input bucket's region, once per process
    | buckets.LIST_PERMISSIONS  # and one listing page of each channel that crosses regions
    | inventory.TYPES_PERMISSIONS  # untagged_gpu_spend: whether an untagged job's type has accelerators
)


@tracer.capture_method
def handle_training_job_event(
    event: TrainingJobStateChange, runtime: Runtime, now: datetime, state: TrainingState | None = None
) -> Report:
    detail = event.detail
    state = state or TrainingState(runtime.settings.state_table)
    instance_type = detail.ResourceConfig.InstanceType if detail.ResourceConfig else None
    price = runtime.prices.hourly(instance_type, event.region)
    findings = detect_failed_training_job(
        detail,
        account=event.account,
        region=event.region,
        price=price,
        observed_at=event.time,
        event_id=event.id,
        unpriced=None if price else runtime.prices.why_unknown(instance_type, event.region),
    )
    status = detail.TrainingJobStatus
    if status == "Failed":
        findings += failure_loop_findings(event, runtime, now, price, state)
    elif status == "InProgress":
        findings += guardrail_findings(
            detail,
            account=event.account,
            region=event.region,
            price=price,
            settings=runtime.settings,
            now=now,
            observed_at=event.time,
            event_id=event.id,
            hygiene=True,
        )
        findings += launch_findings(event, runtime, price)
    elif status in ("Completed", "Stopped"):
        state.record_finished(event.account, event.region, completed_summary(detail, price, event.time))
    return runtime.act(findings, now)


def launch_findings(event: TrainingJobStateChange, runtime: Runtime, price: Price | None) -> list[Finding]:
    """What an in-progress job was launched with that costs money for nothing: input in another region, and no
    cost-allocation tags on GPUs. A bucket AWS will not describe is skipped (logged), never a reason to drop the
    event's other findings."""
    detail = event.detail
    findings: list[Finding] = []
    try:
        crossing = cross_region(event, price)
    except Exception:  # S3 throttling or an outage: the job's other alerts still go out
        logger.warning("input regions not read", extra={"job": detail.TrainingJobName}, exc_info=True)
        crossing = None
    if crossing is not None:
        findings.append(crossing)
    required = runtime.settings.required_tags
    instance_type = detail.ResourceConfig.InstanceType if detail.ResourceConfig else None
    if required and instance_type and missing_tags(detail.Tags, required):
        # Asked only of a job that would be told: DescribeInstanceTypes once per type per process.
        try:
            accelerators = inventory.catalog.lookup(event.region, [instance_type])[instance_type]
        except Exception:  # EC2 throttling or an outage: the job's other alerts still go out
            logger.warning("instance type not read", extra={"job": detail.TrainingJobName}, exc_info=True)
            return findings
        resource = training_job_resource(detail, account=event.account, region=event.region)
        untagged = untagged_launch_finding(
            resource,
            required=required,
            accelerators=accelerators,
            # CreationTime, not TrainingStartTime: the same in every InProgress event of the job, so its later
            # state changes (Downloading, Training, a spot restart) are the same launch.
            launched_at=detail.CreationTime or detail.TrainingStartTime,
            hourly_usd=hourly_usd(price, resource.instance_count),
            observed_at=event.time,
            event_id=event.id,
            runs_as=detail.RoleArn,
        )
        if untagged is not None:
            findings.append(untagged)
    return findings


def cross_region(event: TrainingJobStateChange, price: Price | None) -> Finding | None:
    """``data_cross_region`` for the job's S3 channels: each bucket's region (cached per process), then one listing
    page of each channel in another region, for what a pass over it moves."""
    detail = event.detail
    regions = buckets.bucket_regions(input_buckets(detail))
    sizes = {
        item.uri: buckets.input_size(item.bucket, item.prefix, str(regions[item.bucket]))
        for item in s3_inputs(detail)
        if regions.get(item.bucket) not in (None, event.region) and item.data_type == "S3Prefix"
    }
    return cross_region_finding(
        detail,
        account=event.account,
        region=event.region,
        bucket_regions=regions,
        sizes=sizes,
        price=price,
        observed_at=event.time,
        event_id=event.id,
    )


def failure_loop_findings(
    event: TrainingJobStateChange, runtime: Runtime, now: datetime, price: Price | None, state: TrainingState
) -> list[Finding]:
    """Record the failure in its family's history; one loop finding when the family reaches the threshold.

    Where job_failure_loop is in remediate (Mode, ReasonModes), a declared family's (tag or pipeline) in-progress
    jobs follow, each with its GPU use: only one known to be idle may be marked then stopped. A family guessed from
    names is reported only."""
    detail, settings = event.detail, runtime.settings
    window = timedelta(hours=settings.failure_loop_window_hours)
    failed_at = detail.TrainingEndTime or detail.LastModifiedTime or event.time
    failure = Failure(
        detail.TrainingJobName, failed_at, detail.FailureReason or "", run_cost_usd(detail, price)
    )
    family = job_family(detail.TrainingJobName, detail.Tags)
    history, new = state.record_failure(event.account, event.region, family.key, failure, window, now)
    if not new:
        return []  # the same job delivered again: counted once, alerted once
    loop = failure_loop(
        family,
        history.failures,
        max(now, failed_at),
        threshold=settings.failure_loop_threshold,
        window=window,
        earlier=history.earlier,
    )
    if loop is None:
        return []
    acting = runtime.policy.remediates(Reason.JOB_FAILURE_LOOP)  # Mode, or ReasonModes
    running: list[TrainingJobDetail] = []
    if acting and family.declared:
        # Only when acting: listing the family's running jobs costs a ListTags per in-progress job.
        running = family_jobs(event.region, family)
    findings = [
        loop_finding(
            loop,
            detail,
            account=event.account,
            region=event.region,
            window=window,
            observed_at=event.time,
            event_id=event.id,
            remediation=remediation_note(family, running, acting=acting),
        )
    ]
    if running:
        idle_window = timedelta(minutes=settings.idle_window_minutes)
        types = {j.ResourceConfig.InstanceType for j in running if j.ResourceConfig}
        findings += loop_stop_findings(
            loop,
            running,
            account=event.account,
            region=event.region,
            price_of={t: runtime.prices.hourly(t, event.region) for t in types if t},
            gpu_of=gpu_use_of(event.region, running, now, idle_window, settings.idle_threshold_percent),
            idle_threshold=settings.idle_threshold_percent,
            idle_window=idle_window,
            observed_at=event.time,
            event_id=event.id,
        )
    return findings


def family_jobs(region: str, family: Family) -> list[TrainingJobDetail]:
    """The declared family's in-progress jobs; one whose description does not validate is left out, logged."""
    jobs = []
    for raw in in_progress_family_jobs(region, family):
        try:
            jobs.append(TrainingJobDetail.model_validate(raw))
        except ValidationError as error:
            logger.warning(
                "training job not judged", extra={"job": raw.get("TrainingJobName"), "problem": str(error)}
            )
    return jobs


def remediation_note(family: Family, running: Sequence[TrainingJobDetail], *, acting: bool) -> str | None:
    """What becomes of the family's running jobs, in the loop alert."""
    if not family.declared:
        return name_family_note(family, acting=acting)
    if not acting:
        return None
    if not running:
        return "No job of the family is in progress."
    return (
        f"{len(running)} of its jobs are in progress: those idle on their GPUs are marked, then stopped; "
        "busy ones, and ones whose GPU use is unknown, are left running."
    )


def gpu_use_of(
    region: str, jobs: Sequence[TrainingJobDetail], now: datetime, window: timedelta, threshold: float
) -> dict[str, GpuUse]:
    """Each job's GPU use over the idle window: one query per host (Host = "<job>/algo-N"), the Maximum per
    period, all in ceil(hosts / 500) GetMetricData calls."""
    hosts = {j.TrainingJobName: host_count(j) for j in jobs}
    queries = [
        Query(
            (name, "gpu", str(host)),
            TRAINING_NAMESPACE,
            TRAINING_GPU_METRIC,
            (("Host", f"{name}/algo-{host}"),),
            stat="Maximum",
        )
        for name, count in hosts.items()
        for host in range(1, count + 1)
    ]
    data = get_metric_data(region, queries, now - window, now, GPU_PERIOD_SECONDS) if queries else MetricSet()
    return {name: gpu_use(data.gpus(name), count, threshold) for name, count in hosts.items()}
