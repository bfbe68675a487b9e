"""The one retry loop of batched reads and writes (aws/dynamo.py): what DynamoDB leaves unprocessed is asked
again after a growing wait, and what is still left after the last attempt is logged and left out."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from botocore.stub import Stubber

from costguard.aws import clients, dynamo

TABLE = "state"


@pytest.fixture
def stub() -> Iterator[tuple[Any, Stubber]]:
    client = clients.client("dynamodb", "us-east-1")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def _keys(*ids: str) -> dict[str, Any]:
    return {TABLE: {"Keys": [{"id": {"S": i}} for i in ids]}}


def _item(i: str) -> dict[str, Any]:
    return {"id": {"S": i}}


def _left_out(caplog: pytest.LogCaptureFixture) -> list[Any]:
    return [r for r in caplog.records if "unprocessed" in r.getMessage()]


def test_the_wait_doubles_from_a_tenth_of_a_second() -> None:
    assert [dynamo.backoff(n) for n in range(5)] == [0.0, 0.1, 0.2, 0.4, 0.8]


def test_keys_left_unprocessed_are_asked_again_after_a_wait(
    stub: tuple[Any, Stubber], dynamodb_waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    client, stubber = stub
    stubber.add_response(
        "batch_get_item",
        {"Responses": {TABLE: [_item("a")]}, "UnprocessedKeys": _keys("b")},
        {"RequestItems": _keys("a", "b")},
    )
    stubber.add_response("batch_get_item", {"Responses": {TABLE: [_item("b")]}}, {"RequestItems": _keys("b")})
    assert dynamo.batch_get(client, TABLE, ["a", "b", "a"]) == [_item("a"), _item("b")]
    assert dynamodb_waits == [0.1]
    assert not _left_out(caplog)


def test_keys_still_unprocessed_after_the_last_attempt_are_left_out_with_a_warning(
    stub: tuple[Any, Stubber], dynamodb_waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    client, stubber = stub
    stubber.add_response(
        "batch_get_item", {"Responses": {TABLE: [_item("a")]}, "UnprocessedKeys": _keys("b", "c")}
    )
    for _ in range(dynamo.ATTEMPTS - 1):
        stubber.add_response("batch_get_item", {"Responses": {TABLE: []}, "UnprocessedKeys": _keys("b", "c")})
    assert dynamo.batch_get(client, TABLE, ["a", "b", "c"]) == [_item("a")]
    assert dynamodb_waits == [0.1, 0.2, 0.4, 0.8]
    [warning] = _left_out(caplog)
    assert (warning.table, warning.keys, warning.unprocessed, warning.attempts) == (TABLE, 3, 2, 5)


def test_a_read_asks_chunks_with_its_options(stub: tuple[Any, Stubber], dynamodb_waits: list[float]) -> None:
    client, stubber = stub
    options = {
        "ConsistentRead": True,
        "ProjectionExpression": "#p0, #p1",
        "ExpressionAttributeNames": {"#p0": "id", "#p1": "told"},
    }
    for ids in (["a", "b"], ["c"]):
        request = {TABLE: {"Keys": [{"id": {"S": i}} for i in ids]} | options}
        stubber.add_response(
            "batch_get_item", {"Responses": {TABLE: [_item(i) for i in ids]}}, {"RequestItems": request}
        )
    found = dynamo.batch_get(client, TABLE, "abc", consistent=True, attributes=("id", "told"), chunk=2)
    assert found == [_item("a"), _item("b"), _item("c")]
    assert dynamodb_waits == []


def _puts(*ids: str) -> list[dict[str, Any]]:
    return [{"PutRequest": {"Item": _item(i)}} for i in ids]


def test_writes_left_unprocessed_are_sent_again_and_what_stays_is_counted(
    stub: tuple[Any, Stubber], dynamodb_waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    client, stubber = stub
    stubber.add_response(
        "batch_write_item",
        {"UnprocessedItems": {TABLE: _puts("b")}},
        {"RequestItems": {TABLE: _puts("a", "b")}},
    )
    stubber.add_response("batch_write_item", {}, {"RequestItems": {TABLE: _puts("b")}})
    stubber.add_response("batch_write_item", {"UnprocessedItems": {TABLE: _puts("c")}})
    stubber.add_response("batch_write_item", {"UnprocessedItems": {TABLE: _puts("c")}})
    assert dynamo.batch_write(client, TABLE, _puts("a", "b", "c"), chunk=2, attempts=2) == 1
    assert dynamodb_waits == [0.1, 0.1]
    [warning] = _left_out(caplog)
    assert (warning.writes, warning.unprocessed, warning.attempts) == (3, 1, 2)


def test_an_error_of_a_call_is_raised(stub: tuple[Any, Stubber]) -> None:
    client, stubber = stub
    stubber.add_client_error("batch_get_item", "ResourceNotFoundException")
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        dynamo.batch_get(client, TABLE, ["a"])
