"""State never outgrows DynamoDB (400 KB an item): a family failing by the thousand, a day of thousands of
finished jobs and a queue or workload counting thousands of members each stay in a small item, while every
event still records and the alerts still report the true count and total."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import boto3
import pytest
from boto3.dynamodb.types import TypeSerializer
from moto import mock_aws

from costguard import windows as counters
from costguard.aws.training_state import TrainingState
from costguard.aws.windows import DynamoWindowCounter
from costguard.detect.batch import detect_failing_queue
from costguard.detect.job_families import (
    FINGERPRINTS_MAX,
    KEEP_FAILURES,
    REASON_CHARS,
    Failure,
    FailureHistory,
    Family,
    failure_loop,
)
from costguard.detect.training_guardrails import (
    KEEP_FINISHED,
    FinishedRest,
    JobSummary,
    digest_finding,
    loop_finding,
    with_finished,
)
from costguard.events.batch import BatchJobStateChange
from costguard.events.sagemaker import TrainingJobStateChange
from costguard.windows import MemoryWindowCounter, WindowCounter
from tests.conftest import load_event

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
WINDOW = timedelta(hours=6)
TABLE = "state"
ACCOUNT, REGION = "123456789012", "us-east-1"
LIMIT = 100_000  # well under DynamoDB's 400 KB
# An HPO sweep's failure reason: a long stack trace.
TRACE = "AlgorithmError: ExecuteUserScriptError:\n" + "Traceback (most recent call last):\n  File x\n" * 100


@pytest.fixture
def table() -> Iterator[str]:
    with mock_aws():
        boto3.client("dynamodb", region_name=REGION).create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield TABLE


def item_size(key: str) -> int:
    """The stored item in DynamoDB's wire format (type tags, quotes and all): more than DynamoDB counts."""
    item = boto3.client("dynamodb", region_name=REGION).get_item(TableName=TABLE, Key={"id": {"S": key}})
    return len(json.dumps(item["Item"]))


def wire_size(attributes: dict[str, Any]) -> int:
    """What an item with these attributes takes in DynamoDB's wire format, as ``item_size`` measures it."""
    plain = json.loads(json.dumps(attributes), parse_float=Decimal)
    return len(json.dumps({k: TypeSerializer().serialize(v) for k, v in plain.items()}, default=str))


def sweep_failure(n: int, start: datetime = NOW - timedelta(hours=5)) -> Failure:
    # 1,000 failures over five hours, each with a known cost.
    return Failure(
        f"hpo-sweep-{n:04d}-abc", start + timedelta(seconds=18 * n), TRACE, round(1.25 + n / 100, 2)
    )


# -- failures per family ---------------------------------------------------------------------------------


def test_the_old_unbounded_history_passed_400_kb_where_the_new_one_stays_small() -> None:
    # The reproduction: every failure kept with 1,000 characters of reason made the item pass 400 KB at
    # the 376th failure of a sweep. The history now keeps the latest 50 and sums the rest.
    old_entry = {
        "job": "hpo-sweep-0000-abc",
        "failed_at": NOW.isoformat(),
        "reason": TRACE[:1000],
        "cost": 1.25,
    }
    assert len(json.dumps(old_entry)) * 376 > 400_000
    history = FailureHistory()
    for n in range(1000):
        history, new = history.add(sweep_failure(n), NOW, WINDOW)
        assert new
        if n in (375, 999):
            entries, earlier = history.as_item()
            assert wire_size({"entries": entries, "earlier": earlier}) < LIMIT
    assert len(history.failures) == KEEP_FAILURES
    assert all(len(f.reason) <= REASON_CHARS for f in history.failures)
    assert sum(e.count for e in history.earlier) == 1000 - KEEP_FAILURES


def test_past_the_fingerprint_cap_the_history_stays_small_and_keeps_counting() -> None:
    history = FailureHistory()
    n_failures = FINGERPRINTS_MAX + 2000
    start = NOW - timedelta(hours=5)
    for n in range(n_failures):
        failure = Failure(f"{'h' * 50}-{n:05d}", start + timedelta(seconds=3 * n), TRACE, 1.0)
        history, new = history.add(failure, NOW, WINDOW)
        assert new
    entries, earlier = history.as_item()
    assert wire_size({"entries": entries, "earlier": earlier}) < LIMIT
    loop = failure_loop(
        Family("h"), history.failures, NOW, threshold=3, window=WINDOW, earlier=history.earlier
    )
    assert loop is not None and loop.count == n_failures and loop.total_cost_usd == n_failures


def test_a_thousand_failures_of_one_family_stay_small_and_the_alert_says_1000(table: str) -> None:
    state = TrainingState(table)
    key = f"failures#{ACCOUNT}#{REGION}#hpo-sweep"
    sizes = []
    for n in range(1000):
        history, new = state.record_failure(ACCOUNT, REGION, "hpo-sweep", sweep_failure(n), WINDOW, NOW)
        assert new, n  # each failure still records (no write refused)
        if n % 100 == 99:
            sizes.append(item_size(key))
    assert max(sizes) < LIMIT, sizes
    # A redelivery (a new event id) of an early failure, long evicted from the itemised list, counts once.
    history, new = state.record_failure(ACCOUNT, REGION, "hpo-sweep", sweep_failure(3), WINDOW, NOW)
    assert not new
    loop = failure_loop(
        Family("hpo-sweep"), history.failures, NOW, threshold=3, window=WINDOW, earlier=history.earlier
    )
    assert loop is not None
    assert loop.count == 1000
    assert loop.total_cost_usd == round(sum(sweep_failure(n).cost_usd or 0.0 for n in range(1000)), 2)
    assert loop.first_at == sweep_failure(0).failed_at
    latest = TrainingJobStateChange.model_validate(load_event("sagemaker-training-job-failed.json")).detail
    finding = loop_finding(loop, latest, account=ACCOUNT, region=REGION, window=WINDOW, observed_at=NOW)
    assert "failed 1000 times in 6h" in finding.summary
    assert finding.evidence["failures"] == 1000
    assert finding.cost_usd == loop.total_cost_usd
    assert finding.evidence["jobs"][-1] == "... and 980 earlier failures"


def test_an_unknown_cost_among_the_evicted_keeps_the_total_unknown() -> None:
    history = FailureHistory()
    for n in range(60):
        failure = sweep_failure(n)
        history, _ = history.add(
            Failure(failure.job_name, failure.failed_at, "", None) if n == 0 else failure, NOW, WINDOW
        )
    loop = failure_loop(
        Family("f"), history.failures, NOW, threshold=3, window=WINDOW, earlier=history.earlier
    )
    assert loop is not None and loop.count == 60 and loop.total_cost_usd is None


def test_failures_leave_the_window_with_their_slot() -> None:
    history = FailureHistory()
    for n in range(200):
        history, _ = history.add(
            sweep_failure(n, NOW - timedelta(hours=10)), NOW - timedelta(hours=9), WINDOW
        )
    assert history.earlier
    # Eleven hours later every one of them is out of the window: only the new failure counts.
    later = NOW + timedelta(hours=2)
    history, new = history.add(Failure("next-1", later, "OOM", 1.0), later, WINDOW)
    assert new and history.earlier == () and [f.job_name for f in history.failures] == ["next-1"]


def test_an_item_written_before_the_bound_is_read_and_bounded(table: str) -> None:
    # The layout earlier versions wrote: every failure under ``entries``, nothing else.
    entries = {
        f.job_name: {
            "job": f.job_name,
            "failed_at": f.failed_at.isoformat(),
            "reason": f.reason[:1000],
            "cost": 2,
        }
        for f in (sweep_failure(n) for n in range(60))
    }
    boto3.client("dynamodb", region_name=REGION).put_item(
        TableName=TABLE,
        Item={
            "id": {"S": f"failures#{ACCOUNT}#{REGION}#hpo-sweep"},
            "entries": TypeSerializer().serialize(entries),
            "version": {"N": "60"},
            "expiration": {"N": str(int((NOW + timedelta(days=1)).timestamp()))},
        },
    )
    history, new = TrainingState(table).record_failure(
        ACCOUNT, REGION, "hpo-sweep", sweep_failure(60), WINDOW, NOW
    )
    assert new
    assert len(history.failures) == KEEP_FAILURES
    assert len(history.failures) + sum(e.count for e in history.earlier) == 61


# -- finished jobs per day (the training digest) -----------------------------------------------------------


def finished(n: int) -> JobSummary:
    return JobSummary(
        job=f"nightly-eval-{n:05d}",
        status="Completed",
        ended_at=NOW - timedelta(hours=3, seconds=n),
        instance_type="ml.g5.xlarge",
        instance_count=1,
        training_seconds=3600,
        billable_seconds=1800,
        cost_usd=round(0.5 + n % 97 / 10, 2),
        spot=True,
        spot_saving_share=0.5,
        spot_saving_usd=0.25,
    )


def test_a_day_of_thousands_of_finished_jobs_stays_small_and_the_digest_counts_them_all() -> None:
    kept: dict[str, JobSummary] = {}
    rest = FinishedRest()
    jobs = 6000  # past the fingerprint cap too
    for n in range(jobs):
        changed = with_finished(kept, rest, finished(n))
        assert changed is not None
        kept, rest = changed
    # Delivered again, one long summed and one kept: each counted once.
    assert with_finished(kept, rest, finished(7)) is None
    assert with_finished(kept, rest, next(iter(kept.values()))) is None
    assert len(kept) == KEEP_FINISHED and rest.count == jobs - KEEP_FINISHED
    size = wire_size({"entries": {k: v.as_item() for k, v in kept.items()}, "rest": rest.as_item()})
    assert size < LIMIT
    day = finished(0).ended_at.date()
    digest = digest_finding(
        day, list(kept.values()), account=ACCOUNT, region=REGION, observed_at=NOW, rest=rest
    )
    assert digest is not None
    assert digest.evidence["jobs"] == jobs
    assert digest.cost_usd == round(sum(finished(n).cost_usd or 0.0 for n in range(jobs)), 2)
    assert digest.evidence["spot_saving_usd"] == round(jobs * 0.25, 2)
    costliest = max((finished(n) for n in range(jobs)), key=lambda s: (s.cost_usd or 0.0, s.job))
    assert digest.evidence["runs"][0].startswith(costliest.job)
    assert digest.evidence["runs"][-1] == f"... and {jobs - 25} more"


def test_the_digest_day_is_bounded_in_the_state_table(table: str) -> None:
    state = TrainingState(table)
    day = finished(0).ended_at.date()
    jobs = KEEP_FINISHED + 10
    for n in range(jobs):
        state.record_finished(ACCOUNT, REGION, finished(n))
    state.record_finished(ACCOUNT, REGION, finished(3))  # delivered again after it was summed: counted once
    kept, rest = state.finished_on(ACCOUNT, REGION, day)
    assert len(kept) == KEEP_FINISHED and len(kept) + rest.count == jobs
    digest = digest_finding(day, kept, account=ACCOUNT, region=REGION, observed_at=NOW, rest=rest)
    assert digest is not None and digest.evidence["jobs"] == jobs
    assert digest.cost_usd == round(sum(finished(n).cost_usd or 0.0 for n in range(jobs)), 2)
    assert item_size(f"finished#{ACCOUNT}#{REGION}#{day.isoformat()}") < LIMIT


# -- window counters (Batch queue failures, spot interruptions) --------------------------------------------


def batch_member(n: int) -> str:
    # An array job's children failing: long names, as Batch allows (128 characters), and their job ids.
    return f"{'x' * 120}-{n:05d} (3f1c2a9e-0000-4000-8000-{n:012d}:{n})"


def test_a_queue_counting_failed_jobs_on_the_state_table_counts_each_once(table: str) -> None:
    counter = DynamoWindowCounter(table)
    key = "batchq#123456789012#us-east-1#gpu-training"
    members = [batch_member(n) for n in range(300)]
    for n, member in enumerate(members):
        counted = counter.add(key, member, NOW + timedelta(seconds=n), WINDOW)
        assert counted.added and counted.count == n + 1
    assert counted.reached(300)
    # Delivered again: listed, or fingerprinted, either way counted once.
    for member in (members[0], members[250]):
        again = counter.add(key, member, NOW + timedelta(hours=1), WINDOW)
        assert (again.added, again.count) == (False, 300)
    assert len(again.members) == counters.LISTED_MEMBERS and again.unlisted == 300 - counters.LISTED_MEMBERS
    stored = item(key)
    assert len(stored["members"]["SS"]) == counters.LISTED_MEMBERS
    assert len(stored["seen"]["SS"]) == 300 - counters.LISTED_MEMBERS
    assert item_size(key) < 20_000


def test_a_full_counter_item_stays_small() -> None:
    # The most a counter item can hold: every listed member at the longest name kept, every fingerprint.
    listed = [f"{n:04d}" + "x" * (counters.MEMBER_CHARS - 4) for n in range(counters.LISTED_MEMBERS)]
    seen = [counters.fingerprint(str(n)) for n in range(counters.FINGERPRINTS_MAX)]
    wire = {
        "id": {"S": "batchq#123456789012#us-east-1#" + "q" * 128},
        "members": {"SS": listed},
        "seen": {"SS": seen},
        "overflow": {"N": "1000000"},
        "started": {"N": "1795168800"},
        "expiration": {"N": "1795168800"},
    }
    assert len(json.dumps(wire)) < LIMIT
    assert counters.LISTED_MEMBERS + counters.FINGERPRINTS_MAX >= 1000  # the highest threshold settings allow


def test_the_threshold_is_reached_once_past_the_listed_members() -> None:
    counter = MemoryWindowCounter()
    reached = [counter.add("k", batch_member(n), NOW, WINDOW).reached(1000) for n in range(1100)]
    assert reached.count(True) == 1 and reached.index(True) == 999
    assert counter.add("k", batch_member(600), NOW, WINDOW).count == 1100


def test_the_queue_alert_lists_some_jobs_and_counts_all() -> None:
    counter = MemoryWindowCounter()
    raw = load_event("batch-job-failed-attempts.json")
    found = []
    for n in range(120):
        event = BatchJobStateChange.model_validate(raw)
        counted = counter.add("batchq#q", f"job-{n}", NOW, WINDOW)
        found += detect_failing_queue(
            event.detail,
            counted,
            account=ACCOUNT,
            region=REGION,
            threshold=100,
            window=WINDOW,
            observed_at=NOW,
        )
    [finding] = found
    assert "100 failed jobs" in finding.summary
    jobs = finding.evidence["failed_jobs"]
    assert len(jobs) == counters.LISTED_MEMBERS + 1 and jobs[-1] == "... and 50 more"


@pytest.fixture
def small_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(counters, "LISTED_MEMBERS", 3)
    monkeypatch.setattr(counters, "FINGERPRINTS_MAX", 5)


@pytest.fixture(params=["memory", "dynamo"])
def counter(request: pytest.FixtureRequest) -> WindowCounter:
    if request.param == "memory":
        return MemoryWindowCounter()
    request.getfixturevalue("table")
    return DynamoWindowCounter(TABLE)


def test_past_both_caps_members_are_still_counted(small_caps: None, counter: WindowCounter) -> None:
    counts = [counter.add("spot#w", f"i-{n:017x}", NOW, WINDOW) for n in range(12)]
    assert [c.count for c in counts] == list(range(1, 13))
    assert all(c.added for c in counts)
    final = counts[-1]
    assert (len(final.members), final.unlisted) == (3, 9)
    # Below the caps a repeat is recognised; past them it cannot be (documented), but the count never drops.
    assert counter.add("spot#w", "i-00000000000000000", NOW, WINDOW).added is False
    assert counter.add("spot#w", f"i-{4:017x}", NOW, WINDOW).added is False
    # A new window starts from nothing.
    fresh = counter.add("spot#w", "i-new", NOW + WINDOW, WINDOW)
    assert (fresh.count, fresh.added) == (1, True)


def item(key: str) -> dict[str, Any]:
    found: dict[str, Any] = boto3.client("dynamodb", region_name=REGION).get_item(
        TableName=TABLE, Key={"id": {"S": key}}
    )["Item"]
    return found
