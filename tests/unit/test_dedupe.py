"""Repeat suppression by episode, and the daily digest: in memory and on the DynamoDB state table (moto). Both
gates decide alike and write alike: news, and an episode end that must move, and nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from moto import mock_aws

from costguard.aws import clients
from costguard.notify.dedupe import DynamoRepeatGate, MemoryRepeatGate, RepeatGate, Sighting, refresh_of

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=240)
KEY = "123456789012/us-east-1/training_job/llama-ft/training_job_failed/notify"
REFRESH = refresh_of(WINDOW)


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


def test_unseen_for_longer_than_the_window_and_refresh_the_next_sighting_opens_a_new_episode(
    gate: RepeatGate,
) -> None:
    assert gate.sighting(KEY, NOW, WINDOW) is Sighting.NEW
    later = NOW + WINDOW + REFRESH  # it got busy (or was stopped) in between
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


def test_the_refresh_is_a_quarter_of_the_window() -> None:
    assert refresh_of(WINDOW) == timedelta(minutes=60)
    assert refresh_of(timedelta(days=30)) == timedelta(days=7, hours=12)


@pytest.mark.parametrize("seen_for", [0, 1, 5, 12, 13, 30])
def test_an_episode_ends_between_window_and_window_plus_refresh_after_its_last_sighting(
    gate: RepeatGate, seen_for: int
) -> None:
    """Seen at every sweep for a while, then unseen: the same episode under ``window`` after its last sighting,
    a new one from ``window + refresh`` on, whatever sweep last moved the stored end."""
    for n in range(seen_for + 1):
        gate.sighting(KEY, NOW + n * SWEEP, WINDOW)
        gate.sighting(KEY + "-late", NOW + n * SWEEP, WINDOW)
    last = NOW + seen_for * SWEEP
    assert gate.sighting(KEY, last + WINDOW - timedelta(seconds=1), WINDOW) is Sighting.REPEAT
    assert gate.sighting(KEY + "-late", last + WINDOW + REFRESH, WINDOW) is Sighting.NEW


def _written(gate: RepeatGate) -> int:
    if isinstance(gate, MemoryRepeatGate):
        return gate.writes
    return clients.calls[("dynamodb", "UpdateItem")]


def test_both_gates_write_only_news_and_an_end_that_must_move(gate: RepeatGate) -> None:
    """A day of 5-minute sweeps of one open finding: the news, then the end moved once it would fall under the
    window (the first sweep more than ``refresh`` after the last write: every 13th), and the digest."""
    clients.calls.clear()
    wrote = []
    for n in range(12 * 24 + 1):
        before = _written(gate)
        gate.sighting(KEY, NOW + n * SWEEP, WINDOW)
        if _written(gate) > before:
            wrote.append(n)
    digest = 12 * 24
    assert wrote == [*range(0, digest, 13), digest]
    assert len(wrote) == 24  # where every sweep wrote: 289 times


def test_dynamo_gate_writes_an_expiring_entry_and_when_it_was_told(dynamo_gate: DynamoRepeatGate) -> None:
    assert dynamo_gate.sighting(KEY, NOW, WINDOW) is Sighting.NEW
    dynamo_gate.sighting(KEY, NOW + SWEEP, WINDOW)
    item = boto3.client("dynamodb", region_name="us-east-1").get_item(
        TableName="state", Key={"id": {"S": f"repeat#{KEY}"}}
    )["Item"]
    assert int(item["expiration"]["N"]) == int(
        (NOW + WINDOW + REFRESH).timestamp()
    )  # not moved by the repeat
    assert int(item["told"]["N"]) == int(NOW.timestamp())
    dynamo_gate.sighting(KEY, NOW + REFRESH + SWEEP, WINDOW)  # the end would fall under the window: moved
    item = boto3.client("dynamodb", region_name="us-east-1").get_item(
        TableName="state", Key={"id": {"S": f"repeat#{KEY}"}}
    )["Item"]
    assert int(item["expiration"]["N"]) == int((NOW + REFRESH + SWEEP + WINDOW + REFRESH).timestamp())


def test_dynamo_gate_a_repeat_costs_one_read_and_no_write(dynamo_gate: DynamoRepeatGate) -> None:
    dynamo_gate.sighting(KEY, NOW, WINDOW)
    clients.calls.clear()
    assert dynamo_gate.sighting(KEY, NOW + SWEEP, WINDOW) is Sighting.REPEAT
    assert {k: v for k, v in clients.calls.items() if k[0] == "dynamodb"} == {("dynamodb", "BatchGetItem"): 1}


def test_dynamo_gate_reads_a_runs_sightings_100_keys_a_call(dynamo_gate: DynamoRepeatGate) -> None:
    windows = {f"{KEY}-{n}": WINDOW for n in range(250)} | {"no-window": timedelta(0)}
    clients.calls.clear()
    first = dynamo_gate.sightings(windows, NOW)
    assert set(first.values()) == {Sighting.NEW}
    assert clients.calls[("dynamodb", "BatchGetItem")] == 3
    assert clients.calls[("dynamodb", "UpdateItem")] == 250  # each news claimed
    clients.calls.clear()
    again = dynamo_gate.sightings(windows, NOW + SWEEP)
    assert again == {k: Sighting.REPEAT for k in windows} | {"no-window": Sighting.NEW}
    assert {k: v for k, v in clients.calls.items() if k[0] == "dynamodb"} == {("dynamodb", "BatchGetItem"): 3}


def test_dynamo_gate_news_read_by_two_runs_is_told_by_one(
    dynamo_gate: DynamoRepeatGate, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both runs read the key before either wrote: the second's conditional claim fails."""
    other = DynamoRepeatGate("state")
    assert dynamo_gate.sighting(KEY, NOW, WINDOW) is Sighting.NEW
    monkeypatch.setattr(other, "_read", lambda ids: {})  # what it read before the first run wrote
    assert other.sighting(KEY, NOW, WINDOW) is Sighting.REPEAT


def test_dynamo_gate_news_it_cannot_write_is_told(
    dynamo_gate: DynamoRepeatGate, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(**_: object) -> None:
        raise RuntimeError("throttled past retries")

    monkeypatch.setattr(clients.client("dynamodb"), "update_item", refuse)
    assert dynamo_gate.sighting(KEY, NOW, WINDOW) is Sighting.NEW
    assert dynamo_gate.sighting(KEY, NOW, WINDOW) is Sighting.NEW  # nothing was recorded: news again


def test_dynamo_gate_an_unreadable_table_raises(dynamo_gate: DynamoRepeatGate) -> None:
    """The caller decides what an unknown sighting means (pipeline.act_on: news)."""
    boto3.client("dynamodb", region_name="us-east-1").delete_table(TableName="state")
    with pytest.raises(ClientError, match="ResourceNotFoundException"):
        dynamo_gate.sighting(KEY, NOW, WINDOW)


def test_dynamo_gate_hashes_a_key_dynamodb_would_refuse(dynamo_gate: DynamoRepeatGate) -> None:
    long_key = "k" * 3000
    assert dynamo_gate.sighting(long_key, NOW, WINDOW) is Sighting.NEW
    assert dynamo_gate.sighting(long_key, NOW + SWEEP, WINDOW) is Sighting.REPEAT


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


def _stored(key: str, end: datetime, told: datetime) -> dict[str, dict[str, str]]:
    return {
        "id": {"S": f"repeat#{key}"},
        "expiration": {"N": str(int(end.timestamp()))},
        "told": {"N": str(int(told.timestamp()))},
    }


UNPROCESSED = {"state": {"Keys": [{"id": {"S": f"repeat#{KEY}"}}], "ConsistentRead": True}}


def test_dynamo_gate_reads_keys_left_unprocessed_again(stubbed_dynamodb: Stubber) -> None:
    """BatchGetItem may answer part of a request (the table is throttling); moto never does, so stubbed."""
    stubbed_dynamodb.add_response(
        "batch_get_item", {"Responses": {"state": []}, "UnprocessedKeys": UNPROCESSED}
    )
    stubbed_dynamodb.add_response(
        "batch_get_item", {"Responses": {"state": [_stored(KEY, NOW + WINDOW + REFRESH, NOW)]}}
    )
    assert DynamoRepeatGate("state").sighting(KEY, NOW + SWEEP, WINDOW) is Sighting.REPEAT
    stubbed_dynamodb.assert_no_pending_responses()  # two reads, and no write


def test_dynamo_gate_a_key_never_read_is_claimed_and_refused_if_told(stubbed_dynamodb: Stubber) -> None:
    from costguard.notify import dedupe

    for _ in range(dedupe._READ_TRIES):
        stubbed_dynamodb.add_response(
            "batch_get_item", {"Responses": {"state": []}, "UnprocessedKeys": UNPROCESSED}
        )
    stubbed_dynamodb.add_client_error("update_item", "ConditionalCheckFailedException")  # told already
    assert DynamoRepeatGate("state").sighting(KEY, NOW + SWEEP, WINDOW) is Sighting.REPEAT
