"""Bedrock Provisioned Throughput: the hourly sweep (run by the capacity function beside its reservations' sweep:
capacity paid for by the hour too), read through the Bedrock adapter and decided on the one decide-then-act path.

Calls per account and region: one ListProvisionedModelThroughputs per 1,000 throughputs, one GetMetricData per
250 of them (two queries each), and one ListTagsForResource per throughput (the list gives no tags, and a mark
left on one invoked again must be seen to be removed; an account holds a handful of throughputs)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from costguard.act.aws import permissions_for
from costguard.act.shadow import key_of, overlay
from costguard.aws import bedrock, metrics
from costguard.aws.bedrock import ProvisionedThroughputs, provisioned_throughputs
from costguard.aws.metrics import MetricSet, Query, get_metric_data
from costguard.detect.bedrock import throughput_findings
from costguard.model import Finding, ProvisionedThroughput, Reason, ResourceKind
from costguard.pipeline import Report
from costguard.pricing.bedrock import unit_price
from costguard.runtime import Runtime

PERMISSIONS = (
    bedrock.READ_PERMISSIONS | metrics.READ_PERMISSIONS | permissions_for(ResourceKind.PROVISIONED_THROUGHPUT)
)

NAMESPACE = "AWS/Bedrock"
DIMENSION = "ModelId"
HOUR = timedelta(hours=1)


def read_invocations(
    region: str, throughputs: Sequence[ProvisionedThroughput], window: timedelta, now: datetime
) -> dict[str, float | None]:
    """Each throughput's Invocations summed over the window, hour by hour, under its ARN and its name (which
    ModelId value AWS uses is not documented: detect/bedrock.DIMENSION_NOTE). None: no datapoints at all."""
    if not throughputs:
        return {}
    queries = [
        Query((t.arn, label, ""), NAMESPACE, "Invocations", ((DIMENSION, value),), stat="Sum")
        for t in throughputs
        for label, value in (("by_arn", t.arn), ("by_name", t.name))
    ]
    data: MetricSet = get_metric_data(region, queries, now - window, now, int(HOUR.total_seconds()))
    found: dict[str, float | None] = {}
    for t in throughputs:
        points = data.measure(t.arn, "by_arn") + data.measure(t.arn, "by_name")
        found[t.arn] = sum(v for _, v in points) if points else None
    return found


def findings_for(
    region: str,
    account: str,
    runtime: Runtime,
    now: datetime,
    event_id: str | None,
    throughputs: ProvisionedThroughputs | None = None,
) -> list[Finding]:
    adapter = throughputs or provisioned_throughputs()
    listed = adapter.in_service(region, account)
    if not listed:
        return []
    window = timedelta(hours=runtime.settings.bedrock_idle_hours)
    invocations = read_invocations(region, listed, window, now)
    # In notify mode the marks it keeps in the state table stand for the tag (act/shadow.py).
    tagged = adapter.tags_of(region, account, [t.arn for t in listed])
    read = [replace(t, tags=tagged.get(t.arn, {})) for t in listed]
    read = overlay(
        read,
        runtime.shadow_marks,
        now,
        lambda t: key_of(t.account, t.region, ResourceKind.PROVISIONED_THROUGHPUT, t.id),
        dry=runtime.dry_for(Reason.BEDROCK_THROUGHPUT_IDLE),
    )
    findings: list[Finding] = []
    for throughput in read:
        findings += throughput_findings(
            throughput,
            invocations.get(throughput.arn),
            price=unit_price(
                throughput.base_model,
                throughput.commitment,
                region,
                runtime.settings.bedrock_throughput_prices,
            ),
            window=window,
            now=now,
            event_id=event_id,
        )
    return findings


def evaluate(
    region: str,
    account: str,
    runtime: Runtime,
    now: datetime,
    event_id: str | None,
    throughputs: ProvisionedThroughputs | None = None,
) -> Report:
    return runtime.act(findings_for(region, account, runtime, now, event_id, throughputs), now)


def handle_sweep(
    runtime: Runtime, now: datetime, default_region: str, account: str, event_id: str | None
) -> Report:
    combined = Report()
    for region in runtime.settings.regions or (default_region,):
        combined.extend(evaluate(region, account, runtime, now, event_id))
    return combined
