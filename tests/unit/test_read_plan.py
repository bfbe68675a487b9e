"""The read schedule's entries in the state table (aws/read_plan.py): shards DynamoDB leaves unprocessed are
asked again after a wait, and what is still left is logged, never dropped silently."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.stub import Stubber

from costguard.aws import dynamo
from costguard.aws.read_plan import SHARDS, DynamoReadPlans, _key, shard_of
from costguard.detect.read_schedule import Entry, Kind

TABLE = "state"
ACCOUNT, REGION = "123456789012", "us-east-1"
DUE = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
ENTRY = Entry(Kind.BOUND, due=DUE)


def _shard_keys(*shards: int) -> dict[str, Any]:
    return {TABLE: {"Keys": [{"id": {"S": _key(ACCOUNT, REGION, n)}} for n in shards]}}


def _shard_item(instance_id: str) -> dict[str, Any]:
    key = _key(ACCOUNT, REGION, shard_of(instance_id))
    return {"id": {"S": key}, "entries": {"M": {instance_id: {"S": ENTRY.encode()}}}}


def test_shards_left_unprocessed_are_read_again_after_a_wait(
    stubbed_dynamodb: Stubber, dynamodb_waits: list[float]
) -> None:
    """The old loop asked again at once, five times in a row, while the table was throttling."""
    first, second = "i-0000000000000000a", "i-0000000000000000b"
    left = shard_of(second)
    stubbed_dynamodb.add_response(
        "batch_get_item", {"Responses": {TABLE: [_shard_item(first)]}, "UnprocessedKeys": _shard_keys(left)}
    )
    stubbed_dynamodb.add_response("batch_get_item", {"Responses": {TABLE: [_shard_item(second)]}})
    assert DynamoReadPlans(TABLE).read(ACCOUNT, REGION) == {first: ENTRY, second: ENTRY}
    assert dynamodb_waits == [0.1]


def test_shards_never_read_are_absent_and_logged(
    stubbed_dynamodb: Stubber, dynamodb_waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    stubbed_dynamodb.add_response(
        "batch_get_item", {"Responses": {TABLE: []}, "UnprocessedKeys": _shard_keys(*range(SHARDS))}
    )
    for _ in range(dynamo.ATTEMPTS - 1):
        stubbed_dynamodb.add_response(
            "batch_get_item", {"Responses": {TABLE: []}, "UnprocessedKeys": _shard_keys(3)}
        )
    assert DynamoReadPlans(TABLE).read(ACCOUNT, REGION) == {}  # every instance is simply read
    assert len(dynamodb_waits) == dynamo.ATTEMPTS - 1
    [warning] = [r for r in caplog.records if "unprocessed" in r.getMessage()]
    assert (warning.keys, warning.unprocessed) == (SHARDS, 1)


def test_a_write_counts_only_the_shards_written(
    stubbed_dynamodb: Stubber, dynamodb_waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    """The old loop gave up after five calls without a word and counted the shard as written."""
    after = {"i-0000000000000000a": ENTRY, "i-0000000000000000c": ENTRY}
    assert len({shard_of(i) for i in after}) == 2
    put = {"PutRequest": {"Item": _shard_item("i-0000000000000000c")}}
    for _ in range(dynamo.ATTEMPTS):  # the first shard written at the first call; the second, never
        stubbed_dynamodb.add_response("batch_write_item", {"UnprocessedItems": {TABLE: [put]}})
    assert DynamoReadPlans(TABLE).write(ACCOUNT, REGION, {}, after) == 1
    assert len(dynamodb_waits) == dynamo.ATTEMPTS - 1
    assert [r.unprocessed for r in caplog.records if "unprocessed" in r.getMessage()] == [1]
