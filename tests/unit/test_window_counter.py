"""Windowed distinct counts: in memory and on the DynamoDB state table (moto)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from costguard.aws.windows import DynamoWindowCounter
from costguard.windows import MemoryWindowCounter, WindowCounter

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
WINDOW = timedelta(hours=6)


@pytest.fixture
def dynamo_counter() -> Iterator[DynamoWindowCounter]:
    with mock_aws():
        boto3.client("dynamodb", region_name="us-east-1").create_table(
            TableName="state",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield DynamoWindowCounter("state")


@pytest.fixture(params=["memory", "dynamo"])
def counter(request: pytest.FixtureRequest) -> WindowCounter:
    if request.param == "memory":
        return MemoryWindowCounter()
    made: WindowCounter = request.getfixturevalue("dynamo_counter")
    return made


def test_distinct_members_are_counted_once(counter: WindowCounter) -> None:
    first = counter.add("batchq#q", "job-1", NOW, WINDOW)
    again = counter.add("batchq#q", "job-1", NOW + timedelta(minutes=1), WINDOW)
    second = counter.add("batchq#q", "job-2", NOW + timedelta(minutes=2), WINDOW)
    assert (first.count, first.added) == (1, True)
    assert (again.count, again.added) == (1, False)
    assert (second.count, second.added) == (2, True)
    assert second.started_at == NOW
    assert second.expires_at == NOW + WINDOW


def test_threshold_is_reached_by_exactly_one_member(counter: WindowCounter) -> None:
    reached = [counter.add("k", m, NOW, WINDOW).reached(3) for m in ("a", "b", "c", "c", "d")]
    assert reached == [False, False, True, False, False]


def test_a_new_window_opens_after_expiry(counter: WindowCounter) -> None:
    counter.add("k", "a", NOW, WINDOW)
    counter.add("k", "b", NOW, WINDOW)
    later = counter.add("k", "c", NOW + WINDOW, WINDOW)
    assert (later.count, later.started_at, later.added) == (1, NOW + WINDOW, True)


def test_keys_are_independent(counter: WindowCounter) -> None:
    counter.add("k1", "a", NOW, WINDOW)
    assert counter.add("k2", "a", NOW, WINDOW).count == 1
