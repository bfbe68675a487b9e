"""Batch Job State Change: a job retrying into failure, and a queue whose jobs keep failing."""

from __future__ import annotations

from datetime import datetime, timedelta

from costguard.aws import windows
from costguard.aws.windows import DynamoWindowCounter
from costguard.detect.batch import (
    detect_batch_retry_loop,
    detect_failing_queue,
    instance_type_of,
    queue_key,
    queue_member,
)
from costguard.events.batch import BatchJobStateChange
from costguard.observability import tracer
from costguard.pipeline import Report
from costguard.runtime import ACT_PERMISSIONS, PRICES_PERMISSIONS, Runtime
from costguard.windows import WindowCounter

# handle_batch_job_event: a Batch job is reported, never stopped.
EVENT_PERMISSIONS = windows.PERMISSIONS | ACT_PERMISSIONS | PRICES_PERMISSIONS


@tracer.capture_method
def handle_batch_job_event(
    event: BatchJobStateChange, runtime: Runtime, now: datetime, counter: WindowCounter | None = None
) -> Report:
    detail, settings = event.detail, runtime.settings
    findings = detect_batch_retry_loop(
        detail,
        account=event.account,
        region=event.region,
        price=runtime.prices.hourly(instance_type_of(detail), event.region),
        threshold=settings.batch_retry_threshold,
        observed_at=event.time,
        event_id=event.id,
    )
    if detail.status == "FAILED":  # a job counts against its queue once, when it has failed for good
        window = timedelta(hours=settings.batch_queue_window_hours)
        counted = (counter or DynamoWindowCounter(settings.state_table)).add(
            queue_key(detail, account=event.account, region=event.region), queue_member(detail), now, window
        )
        findings += detect_failing_queue(
            detail,
            counted,
            account=event.account,
            region=event.region,
            threshold=settings.batch_queue_failure_threshold,
            window=window,
            observed_at=event.time,
            event_id=event.id,
        )
    return runtime.act(findings, now)
