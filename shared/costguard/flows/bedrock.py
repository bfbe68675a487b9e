"""Bedrock Provisioned Throughput: the hourly sweep (run by the capacity function beside its reservations' sweep:
capacity paid for by the hour too), read through the Bedrock adapter and decided on the one decide-then-act path.

Calls per account and region: one ListProvisionedModelThroughputs per 1,000 throughputs, one ListMetrics walk
(AWS/Bedrock Invocations, 500 series a page: which ModelId values have a series), one GetMetricData per 500 of
the series found for them (none when none is found), and one ListTagsForResource per throughput (the list gives no
tags, and a mark left on one invoked again must be seen to be removed; an account holds a handful of
throughputs)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from costguard.act.arming import Sighting
from costguard.act.aws import permissions_for
from costguard.act.shadow import key_of, overlay
from costguard.aws import bedrock, metrics
from costguard.aws.bedrock import ProvisionedThroughputs, provisioned_throughputs
from costguard.aws.metrics import MetricSet, Query, get_metric_data
from costguard.detect.bedrock import model_id_spellings, throughput_findings
from costguard.model import Finding, ProvisionedThroughput, Reason, ResourceKind
from costguard.pipeline import Report
from costguard.pricing.bedrock import unit_price
from costguard.runtime import Runtime

PERMISSIONS = (
    bedrock.READ_PERMISSIONS
    | bedrock.SERIES_PERMISSIONS
    | metrics.READ_PERMISSIONS
    | permissions_for(ResourceKind.PROVISIONED_THROUGHPUT)
)

NAMESPACE = bedrock.METRIC_NAMESPACE
DIMENSION = bedrock.MODEL_DIMENSION
HOUR = timedelta(hours=1)


def series_of(
    throughputs: Sequence[ProvisionedThroughput], published: set[str]
) -> dict[str, tuple[str, ...]]:
    """Each throughput's ModelId values (ARN, id, name) that CloudWatch lists an Invocations series under."""
    return {t.arn: tuple(v for v in model_id_spellings(t) if v in published) for t in throughputs}


def read_invocations(
    region: str,
    throughputs: Sequence[ProvisionedThroughput],
    series: dict[str, tuple[str, ...]],
    window: timedelta,
    now: datetime,
) -> dict[str, float | None]:
    """Each throughput's Invocations summed over the window, hour by hour, under the ModelId values its series
    were found under (which one AWS uses is not documented: detect/bedrock.DIMENSION_NOTE). None: no
    datapoints at all, or no series to read."""
    queries = [
        Query(
            (t.arn, f"model_id_{n}", ""), NAMESPACE, bedrock.INVOCATIONS_METRIC, ((DIMENSION, value),), "Sum"
        )
        for t in throughputs
        for n, value in enumerate(series.get(t.arn, ()))
    ]
    if not queries:
        return {}
    data: MetricSet = get_metric_data(region, queries, now - window, now, int(HOUR.total_seconds()))
    found: dict[str, float | None] = {}
    for t in throughputs:
        points = [p for n in range(len(series.get(t.arn, ()))) for p in data.measure(t.arn, f"model_id_{n}")]
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
    # One ListMetrics walk for the region: silence counts as no use only under a series shown to exist.
    series = series_of(listed, bedrock.published_model_ids(region))
    invocations = read_invocations(region, listed, series, window, now)
    # In notify mode the marks it keeps in the state table stand for the tag (act/shadow.py).
    tagged = adapter.tags_of(region, account, [t.arn for t in listed])
    read = [replace(t, tags=tagged.get(t.arn, {})) for t in listed]
    # The census of the region's throughputs: an auto-delete opt-in counts as costguard first saw it.
    runtime.observe(
        account,
        region,
        ResourceKind.PROVISIONED_THROUGHPUT,
        [
            Sighting(
                key_of(t.account, t.region, ResourceKind.PROVISIONED_THROUGHPUT, t.id), t.created, t.tags
            )
            for t in read
        ],
        now,
    )
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
            series=series.get(throughput.arn, ()),
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
