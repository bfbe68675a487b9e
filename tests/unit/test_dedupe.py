"""Repeat suppression: in memory and on the DynamoDB state table (moto)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from costguard.notify.dedupe import DynamoRepeatGate, MemoryRepeatGate, RepeatGate

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=240)
KEY = "123456789012/us-east-1/training_job/llama-ft/training_job_failed/notify"


@pytest.fixture
def dynamo_gate() -> Iterator[DynamoRepeatGate]:
    with mock_aws():
        boto3.client("dynamodb", region_name="us-east-1").create_table(
            TableName="state",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield DynamoRepeatGate("state")


@pytest.fixture(params=["memory", "dynamo"])
def gate(request: pytest.FixtureRequest) -> RepeatGate:
    if request.param == "memory":
        return MemoryRepeatGate()
    gate: RepeatGate = request.getfixturevalue("dynamo_gate")
    return gate


def test_first_call_passes(gate: RepeatGate) -> None:
    assert gate.first_in_window(KEY, NOW, WINDOW) is True


def test_repeat_within_the_window_is_held_back(gate: RepeatGate) -> None:
    assert gate.first_in_window(KEY, NOW, WINDOW) is True
    assert gate.first_in_window(KEY, NOW, WINDOW) is False
    assert gate.first_in_window(KEY, NOW + timedelta(minutes=1), WINDOW) is False
    assert gate.first_in_window(KEY, NOW + WINDOW - timedelta(seconds=1), WINDOW) is False


def test_other_keys_are_independent(gate: RepeatGate) -> None:
    assert gate.first_in_window(KEY, NOW, WINDOW) is True
    assert gate.first_in_window(KEY + "-other", NOW, WINDOW) is True


def test_after_the_window_passes_again_and_opens_a_new_window(gate: RepeatGate) -> None:
    assert gate.first_in_window(KEY, NOW, WINDOW) is True
    later = NOW + WINDOW + timedelta(minutes=1)
    assert gate.first_in_window(KEY, later, WINDOW) is True
    assert gate.first_in_window(KEY, later + timedelta(minutes=1), WINDOW) is False


def test_window_zero_always_passes(gate: RepeatGate) -> None:
    for _ in range(3):
        assert gate.first_in_window(KEY, NOW, timedelta(0)) is True


def test_window_zero_does_not_hold_back_a_later_windowed_call(gate: RepeatGate) -> None:
    assert gate.first_in_window(KEY, NOW, timedelta(0)) is True
    assert gate.first_in_window(KEY, NOW, WINDOW) is True
    assert gate.first_in_window(KEY, NOW, WINDOW) is False


def test_dynamo_gate_writes_an_expiring_entry(dynamo_gate: DynamoRepeatGate) -> None:
    assert dynamo_gate.first_in_window(KEY, NOW, WINDOW) is True
    item = boto3.client("dynamodb", region_name="us-east-1").get_item(
        TableName="state", Key={"id": {"S": f"repeat#{KEY}"}}
    )["Item"]
    assert int(item["expiration"]["N"]) == int((NOW + WINDOW).timestamp())
