"""The scheduled training-job sweep: cost ceilings over every in-progress job, and the daily digest."""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import ValidationError

from costguard.act.aws import permissions_for
from costguard.aws import sagemaker, training_state
from costguard.aws.sagemaker import in_progress_jobs_described
from costguard.aws.training_state import TrainingState
from costguard.detect.training_guardrails import digest_finding, guardrail_findings
from costguard.events.sagemaker import TrainingJobDetail
from costguard.model import Finding, ResourceKind
from costguard.observability import logger, tracer
from costguard.pipeline import Report
from costguard.runtime import ACT_PERMISSIONS, PRICES_PERMISSIONS, Runtime

SCHEDULE_PERIOD = timedelta(minutes=15)  # the template's rate(15 minutes)

# handle_schedule: in-progress jobs, the digest's history, and marks and stops of training jobs.
SCHEDULE_PERMISSIONS = (
    sagemaker.TRAINING_JOB_PERMISSIONS
    | training_state.PERMISSIONS
    | ACT_PERMISSIONS
    | PRICES_PERMISSIONS
    | permissions_for(ResourceKind.TRAINING_JOB)
)


def ceiling_findings(region: str, runtime: Runtime, now: datetime, event_id: str | None) -> list[Finding]:
    """ceil(jobs/100) ListTrainingJobs, then one DescribeTrainingJob and one ListTags per in-progress job."""
    findings: list[Finding] = []
    for raw in in_progress_jobs_described(region):
        try:
            detail = TrainingJobDetail.model_validate(raw)
        except ValidationError as error:
            logger.warning(
                "training job not judged", extra={"job": raw.get("TrainingJobName"), "problem": str(error)}
            )
            continue
        arn = detail.TrainingJobArn or ""
        account = arn.split(":")[4] if arn.count(":") >= 5 else ""
        instance_type = detail.ResourceConfig.InstanceType if detail.ResourceConfig else None
        findings += guardrail_findings(
            detail,
            account=account,
            region=region,
            price=runtime.prices.hourly(instance_type, region),
            settings=runtime.settings,
            now=now,
            observed_at=now,
            event_id=event_id,
            hygiene=False,
        )
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
    """One account and region: its ceilings, and yesterday's digest at the day's first run."""
    state = state or TrainingState(runtime.settings.state_table)
    findings = ceiling_findings(region, runtime, now, event_id)
    findings += digest_findings(account, region, scheduled_at, state, event_id)
    return runtime.act(findings, now)
