"""EC2 Spot Instance Interruption Warning: the job being lost, and workloads that spot keeps interrupting."""

from __future__ import annotations

from datetime import datetime, timedelta

from costguard.aws import inventory, windows
from costguard.aws.inventory import describe_instance
from costguard.aws.windows import DynamoWindowCounter
from costguard.detect.spot import detect_spot_interruption, is_watched, workload_of
from costguard.events.ec2 import SpotInterruptionWarning
from costguard.observability import tracer
from costguard.pipeline import Report
from costguard.runtime import ACT_PERMISSIONS, PRICES_PERMISSIONS, Runtime
from costguard.windows import WindowCounter

# handle_spot_interruption: the instance, its workload's count; an interruption is reported, never acted on.
EVENT_PERMISSIONS = inventory.PERMISSIONS | windows.PERMISSIONS | ACT_PERMISSIONS | PRICES_PERMISSIONS


@tracer.capture_method
def handle_spot_interruption(
    event: SpotInterruptionWarning, runtime: Runtime, now: datetime, counter: WindowCounter | None = None
) -> Report:
    detail, settings = event.detail, runtime.settings
    instance = describe_instance(event.region, detail.instance_id)
    if not is_watched(instance):
        return Report()  # a CPU instance no tag ties to a job: not costguard's business
    window = timedelta(hours=settings.spot_interruption_window_hours)
    workload = workload_of(detail.instance_id, instance.tags if instance else {})
    counted = (counter or DynamoWindowCounter(settings.state_table)).add(
        f"spot#{event.account}#{event.region}#{workload}", detail.instance_id, now, window
    )
    findings = detect_spot_interruption(
        instance_id=detail.instance_id,
        action=detail.instance_action,
        instance=instance,
        account=event.account,
        region=event.region,
        price=runtime.prices.hourly(instance.type if instance else None, event.region),
        interruptions=counted.count,
        threshold=settings.spot_interruption_threshold,
        window=window,
        observed_at=event.time,
        now=now,
        event_id=event.id,
    )
    return runtime.act(findings, now)
