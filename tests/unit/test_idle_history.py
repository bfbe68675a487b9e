"""The adaptive policy's histories and pools in the state table (aws/idle_history.py): both in one read and one
write; keys and writes DynamoDB leaves unprocessed are asked again after a wait, and what is still left is
logged, never dropped silently."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.stub import Stubber

from costguard.aws import dynamo
from costguard.aws.idle_history import DynamoIdleHistories, history_key, prior_key
from costguard.detect.adaptive import IdleHistory
from costguard.detect.idle_priors import Pool

TABLE = "state"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
FIRST, SECOND = (history_key("123456789012", "us-east-1", f"i-000000000000000{n}") for n in (1, 2))


def _item(key: str) -> dict[str, Any]:
    return {"id": {"S": key}, "history": {"S": IdleHistory().to_text()}}


def _unprocessed(key: str) -> dict[str, Any]:
    return {TABLE: {"Keys": [{"id": {"S": key}}]}}


def test_keys_left_unprocessed_are_read_again_after_a_wait(
    stubbed_dynamodb: Stubber, dynamodb_waits: list[float]
) -> None:
    """The old loop asked again at once, five times in a row, while the table was throttling."""
    stubbed_dynamodb.add_response(
        "batch_get_item", {"Responses": {TABLE: [_item(FIRST)]}, "UnprocessedKeys": _unprocessed(SECOND)}
    )
    stubbed_dynamodb.add_response("batch_get_item", {"Responses": {TABLE: [_item(SECOND)]}})
    assert set(DynamoIdleHistories(TABLE).read([FIRST, SECOND, FIRST])) == {FIRST, SECOND}
    assert dynamodb_waits == [0.1]


def test_a_key_never_read_is_absent_and_logged(
    stubbed_dynamodb: Stubber, dynamodb_waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    for _ in range(dynamo.ATTEMPTS):
        stubbed_dynamodb.add_response(
            "batch_get_item", {"Responses": {TABLE: []}, "UnprocessedKeys": _unprocessed(SECOND)}
        )
    assert DynamoIdleHistories(TABLE).read([SECOND]) == {}
    assert len(dynamodb_waits) == dynamo.ATTEMPTS - 1
    assert [r.unprocessed for r in caplog.records if "unprocessed" in r.getMessage()] == [1]


def test_a_history_never_written_is_logged_and_the_sweep_goes_on(
    stubbed_dynamodb: Stubber, dynamodb_waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    put = {"PutRequest": {"Item": {**_item(SECOND), "expiration": {"N": "0"}}}}
    for _ in range(dynamo.ATTEMPTS):
        stubbed_dynamodb.add_response("batch_write_item", {"UnprocessedItems": {TABLE: [put]}})
    DynamoIdleHistories(TABLE).write({FIRST: IdleHistory(), SECOND: IdleHistory()}, NOW)
    assert len(dynamodb_waits) == dynamo.ATTEMPTS - 1
    assert [r.unprocessed for r in caplog.records if "unprocessed" in r.getMessage()] == [1]


def test_histories_and_pools_are_read_in_one_call_and_written_in_one_call(stubbed_dynamodb: Stubber) -> None:
    pool_key = prior_key("123456789012", "us-east-1", "ec2/g5")
    pool = Pool()
    pool.add([(30, 2, 33, 0)] * 4)
    stored = {"id": {"S": pool_key}, "prior": {"S": pool.to_text()}}
    every_key = [{"id": {"S": k}} for k in (FIRST, SECOND, pool_key)]
    stubbed_dynamodb.add_response(
        "batch_get_item",
        {"Responses": {TABLE: [_item(FIRST), stored]}},
        {"RequestItems": {TABLE: {"Keys": every_key}}},
    )
    histories, pools = DynamoIdleHistories(TABLE).read_state([FIRST, SECOND], [pool_key])
    assert set(histories) == {FIRST} and pools[pool_key].to_text() == pool.to_text()
    stubbed_dynamodb.add_response("batch_write_item", {"UnprocessedItems": {}})
    DynamoIdleHistories(TABLE).write_state({FIRST: IdleHistory()}, {pool_key: pool}, NOW)
