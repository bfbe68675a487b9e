"""SageMaker Training Job State Change: the training-job detectors on the common path."""

from __future__ import annotations

from datetime import datetime

from costguard.detect.training_jobs import detect_failed_training_job
from costguard.events.sagemaker import TrainingJobStateChange
from costguard.pipeline import Report
from costguard.runtime import Runtime


def handle_training_job_event(event: TrainingJobStateChange, runtime: Runtime, now: datetime) -> Report:
    detail = event.detail
    instance_type = detail.ResourceConfig.InstanceType if detail.ResourceConfig else None
    findings = detect_failed_training_job(
        detail,
        account=event.account,
        region=event.region,
        price=runtime.prices.hourly(instance_type, event.region),
        observed_at=event.time,
        event_id=event.id,
    )
    return runtime.act(findings, now)
