"""SageMaker Training Job State Change: the training-job detectors on the common path.

- Failed: ``training_job_failed``, and ``job_failure_loop`` once a family keeps failing;
- InProgress: cost ceilings (``job_cost_warning``, ``job_cost_ceiling``) and launch hygiene
  (``job_no_max_runtime``, ``spot_without_checkpoint``, ``spot_recommended``);
- Completed and Stopped: what the run cost and what spot saved, kept for the daily digest.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from costguard.act.aws import permissions_for
from costguard.aws import sagemaker, training_state
from costguard.aws.sagemaker import in_progress_family_jobs
from costguard.aws.training_state import TrainingState
from costguard.detect.job_families import Failure, failure_loop, family_of
from costguard.detect.training_guardrails import (
    ceiling_of,
    completed_summary,
    cost_findings,
    hygiene_findings,
    loop_finding,
    loop_stop_findings,
)
from costguard.detect.training_jobs import detect_failed_training_job, run_cost_usd
from costguard.events.sagemaker import TrainingJobDetail, TrainingJobStateChange
from costguard.model import Finding, ResourceKind
from costguard.pipeline import Report
from costguard.pricing import Price
from costguard.runtime import ACT_PERMISSIONS, PRICES_PERMISSIONS, Runtime

# handle_training_job_event: the family's jobs, its history, and marks and stops of training jobs.
EVENT_PERMISSIONS = (
    sagemaker.TRAINING_JOB_PERMISSIONS
    | training_state.PERMISSIONS
    | ACT_PERMISSIONS
    | PRICES_PERMISSIONS
    | permissions_for(ResourceKind.TRAINING_JOB)
)


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
    )
    status = detail.TrainingJobStatus
    if status == "Failed":
        findings += failure_loop_findings(event, runtime, now, price, state)
    elif status == "InProgress":
        findings += guardrail_findings(
            detail,
            account=event.account,
            region=event.region,
            runtime=runtime,
            now=now,
            observed_at=event.time,
            event_id=event.id,
            hygiene=True,
        )
    elif status in ("Completed", "Stopped"):
        state.record_finished(event.account, event.region, completed_summary(detail, price, event.time))
    return runtime.act(findings, now)


def failure_loop_findings(
    event: TrainingJobStateChange, runtime: Runtime, now: datetime, price: Price | None, state: TrainingState
) -> list[Finding]:
    """Record the failure in its family's history; one loop finding when the family reaches the threshold."""
    detail, settings = event.detail, runtime.settings
    window = timedelta(hours=settings.failure_loop_window_hours)
    failed_at = detail.TrainingEndTime or detail.LastModifiedTime or event.time
    failure = Failure(
        detail.TrainingJobName, failed_at, detail.FailureReason or "", run_cost_usd(detail, price)
    )
    family = family_of(detail.TrainingJobName, detail.Tags)
    history, new = state.record_failure(event.account, event.region, family, failure, window, now)
    if not new:
        return []  # the same job delivered again: counted once, alerted once
    loop = failure_loop(
        family, history, max(now, failed_at), threshold=settings.failure_loop_threshold, window=window
    )
    if loop is None:
        return []
    findings = [
        loop_finding(
            loop,
            detail,
            account=event.account,
            region=event.region,
            window=window,
            observed_at=event.time,
            event_id=event.id,
        )
    ]
    if not settings.dry_run:
        # Only when acting: listing the family's running jobs costs a ListTags per in-progress job.
        running = [TrainingJobDetail.model_validate(j) for j in in_progress_family_jobs(event.region, family)]
        types = {j.ResourceConfig.InstanceType for j in running if j.ResourceConfig}
        findings += loop_stop_findings(
            loop,
            running,
            account=event.account,
            region=event.region,
            price_of={t: runtime.prices.hourly(t, event.region) for t in types if t},
            observed_at=event.time,
            event_id=event.id,
        )
    return findings


def guardrail_findings(
    detail: TrainingJobDetail,
    *,
    account: str,
    region: str,
    runtime: Runtime,
    now: datetime,
    observed_at: datetime,
    event_id: str | None,
    hygiene: bool,
) -> list[Finding]:
    """Cost ceilings of an in-progress job, and (on its state changes) its launch hygiene."""
    settings = runtime.settings
    instance_type = detail.ResourceConfig.InstanceType if detail.ResourceConfig else None
    price = runtime.prices.hourly(instance_type, region)
    ceiling = ceiling_of(
        detail.Tags, default_usd=settings.default_job_max_usd, default_hours=settings.default_job_max_hours
    )
    findings = cost_findings(
        detail,
        account=account,
        region=region,
        price=price,
        ceiling=ceiling,
        warning_share=settings.cost_warning_share,
        now=now,
        observed_at=observed_at,
        event_id=event_id,
    )
    if hygiene:
        findings += hygiene_findings(
            detail,
            account=account,
            region=region,
            price=price,
            max_runtime_hours=settings.max_runtime_hours,
            spot_recommend_hours=settings.spot_recommend_hours,
            observed_at=observed_at,
            event_id=event_id,
        )
    return findings
