"""The audit's metric read streams: a batch of whole GetMetricData calls at a time, each subject summarized as
soon as its last series is in and its datapoints dropped (memory is measured in bench/fleet.py: the step's peak
at 1,000 and 10,000 instances)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.audit import reading
from costguard.audit.model import Subject
from costguard.aws.metrics import MetricSet, Query
from costguard.model import ResourceKind

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
REGION = "us-east-1"


def subject(n: int) -> Subject:
    return Subject.model_validate(
        {
            "kind": ResourceKind.EC2_INSTANCE,
            "id": f"i-{n:017x}",
            "region": REGION,
            "account": "123456789012",
            "instance_type": "p4d.24xlarge",
        }
    )


class Reads:
    """get_metric_data answered with one point per query, recording each call's size and what was pending."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def __call__(self, region: str, queries: list[Query], start: datetime, end: datetime, period: int) -> Any:
        self.batches.append(len(queries))
        found = MetricSet()
        for q in queries:
            resource, measure, sub = q.key
            found.series[resource][(measure, sub)] = [(start + timedelta(hours=2), 50.0)]
        return found


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Reads:
    answered = Reads()
    monkeypatch.setattr(reading, "get_metric_data", answered)
    # 8 GPUs an instance: 17 queries each (CPU, then utilization and memory per GPU).
    series = {
        f"i-{n:017x}": [(("InstanceId", f"i-{n:017x}"), ("index", str(g))) for g in range(8)]
        for n in range(400)
    }
    monkeypatch.setattr(reading, "list_gpu_series", lambda region, ids, dimension: series)
    return answered


def test_batches_are_whole_calls_and_the_call_count_stays_the_floor(reads: Reads) -> None:
    subjects = [subject(n) for n in range(400)]  # 6,800 queries: 14 calls of 500 at the floor
    usage = reading.read_usage(REGION, subjects, NOW, 14)
    assert reads.batches == [reading.BATCH_QUERIES] * 3 + [6_800 - 3 * reading.BATCH_QUERIES]
    assert sum(-(-b // 500) for b in reads.batches) == 14  # ceil(6,800 / 500): no call is split
    assert len(usage) == 400 and all(u.gpu_max == 50.0 for u in usage.values())


def test_a_subject_is_summarized_before_the_next_batch_is_read(reads: Reads) -> None:
    subjects = [subject(n) for n in range(400)]
    start = NOW - timedelta(days=14)
    streamed = reading._series_by_subject(REGION, subjects, start, NOW, 7200)
    first, series = next(streamed)
    assert first.key == subjects[0].key and len(series) == 17
    assert reads.batches == [reading.BATCH_QUERIES]  # one batch read, not the whole fleet's series
    # 117 subjects fit the first batch whole (117 x 17 = 1,989); the 118th needs the second.
    for _ in range(116):
        next(streamed)
    assert len(reads.batches) == 1
    next(streamed)
    assert len(reads.batches) == 2


def test_one_gpu_under_two_series_in_two_batches_keeps_the_larger_value_per_period() -> None:
    at = NOW - timedelta(hours=2)
    pending, batch = MetricSet(), MetricSet()
    pending.series["i-1"][("gpu", "0")] = [(at, 10.0), (NOW, 80.0)]
    batch.series["i-1"][("gpu", "0")] = [(at, 40.0)]
    reading._merge(pending, batch)
    assert pending.series["i-1"][("gpu", "0")] == [(at, 40.0), (NOW, 80.0)]
