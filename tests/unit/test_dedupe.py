"""Repeat suppression by episode, and the daily digest: in memory and on the DynamoDB state table (moto)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from costguard.notify.dedupe import DynamoRepeatGate, MemoryRepeatGate, RepeatGate, Sighting

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


SWEEP = timedelta(minutes=5)


def test_first_sighting_is_news(gate: RepeatGate) -> None:
    assert gate.sighting(KEY, NOW, WINDOW) is Sighting.NEW


def test_the_same_episode_is_not_told_again_however_long_it_lasts(gate: RepeatGate) -> None:
    """Seen at every 5-minute sweep for 23 hours: told once (the old 4-hour window re-posted it 5 times)."""
    assert gate.sighting(KEY, NOW, WINDOW) is Sighting.NEW
    seen = [gate.sighting(KEY, NOW + n * SWEEP, WINDOW) for n in range(1, 12 * 23)]
    assert set(seen) == {Sighting.REPEAT}


def test_still_open_a_day_after_it_was_told_is_due_in_the_digest_once(gate: RepeatGate) -> None:
    assert gate.sighting(KEY, NOW, WINDOW) is Sighting.NEW
    seen = [gate.sighting(KEY, NOW + n * SWEEP, WINDOW) for n in range(1, 12 * 24 + 12)]
    assert seen.count(Sighting.DIGEST) == 1
    assert seen.index(Sighting.DIGEST) == 12 * 24 - 1  # the first sweep a full day after it was told
    assert seen.count(Sighting.NEW) == 0


def test_other_keys_are_independent(gate: RepeatGate) -> None:
    assert gate.sighting(KEY, NOW, WINDOW) is Sighting.NEW
    assert gate.sighting(KEY + "-other", NOW, WINDOW) is Sighting.NEW


def test_unseen_for_longer_than_the_window_the_next_sighting_opens_a_new_episode(gate: RepeatGate) -> None:
    assert gate.sighting(KEY, NOW, WINDOW) is Sighting.NEW
    later = NOW + WINDOW + timedelta(minutes=1)  # it got busy (or was stopped) in between
    assert gate.sighting(KEY, later, WINDOW) is Sighting.NEW
    assert gate.sighting(KEY, later + SWEEP, WINDOW) is Sighting.REPEAT


def test_each_sighting_extends_the_episode(gate: RepeatGate) -> None:
    assert gate.sighting(KEY, NOW, WINDOW) is Sighting.NEW
    assert gate.sighting(KEY, NOW + WINDOW - SWEEP, WINDOW) is Sighting.REPEAT
    # Past the first window's end, but within the window of the last sighting: the same episode.
    assert gate.sighting(KEY, NOW + WINDOW + SWEEP, WINDOW) is Sighting.REPEAT


def test_window_zero_always_news(gate: RepeatGate) -> None:
    for _ in range(3):
        assert gate.sighting(KEY, NOW, timedelta(0)) is Sighting.NEW


def test_window_zero_does_not_hold_back_a_later_windowed_call(gate: RepeatGate) -> None:
    assert gate.sighting(KEY, NOW, timedelta(0)) is Sighting.NEW
    assert gate.sighting(KEY, NOW, WINDOW) is Sighting.NEW
    assert gate.sighting(KEY, NOW, WINDOW) is Sighting.REPEAT


def test_dynamo_gate_writes_an_expiring_entry_and_when_it_was_told(dynamo_gate: DynamoRepeatGate) -> None:
    assert dynamo_gate.sighting(KEY, NOW, WINDOW) is Sighting.NEW
    dynamo_gate.sighting(KEY, NOW + SWEEP, WINDOW)
    item = boto3.client("dynamodb", region_name="us-east-1").get_item(
        TableName="state", Key={"id": {"S": f"repeat#{KEY}"}}
    )["Item"]
    assert int(item["expiration"]["N"]) == int((NOW + SWEEP + WINDOW).timestamp())
    assert int(item["told"]["N"]) == int(NOW.timestamp())


def test_dynamo_gate_a_repeat_costs_one_call(dynamo_gate: DynamoRepeatGate) -> None:
    from costguard.aws import clients

    dynamo_gate.sighting(KEY, NOW, WINDOW)
    clients.calls.clear()
    dynamo_gate.sighting(KEY, NOW + SWEEP, WINDOW)
    assert {k: v for k, v in clients.calls.items() if k[0] == "dynamodb"} == {("dynamodb", "UpdateItem"): 1}


def test_a_digest_is_claimed_once(dynamo_gate: DynamoRepeatGate) -> None:
    """Two runs at the same instant: the second reads the digest as told already."""
    assert dynamo_gate.sighting(KEY, NOW, WINDOW) is Sighting.NEW
    for n in range(1, 12 * 24):
        dynamo_gate.sighting(KEY, NOW + n * SWEEP, WINDOW)
    day = NOW + 12 * 24 * SWEEP
    table = boto3.client("dynamodb", region_name="us-east-1")
    assert dynamo_gate.sighting(KEY, day, WINDOW) is Sighting.DIGEST
    assert dynamo_gate.sighting(KEY, day, WINDOW) is Sighting.REPEAT
    item = table.get_item(TableName="state", Key={"id": {"S": f"repeat#{KEY}"}})["Item"]
    assert int(item["told"]["N"]) == int(day.timestamp())
