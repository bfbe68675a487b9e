"""What interactions keep in the state table: replayed requests refused, clicks recorded once, mutes."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from botocore.stub import Stubber
from moto import mock_aws

from costguard.aws import clients, dynamo
from costguard.interact import state

TABLE = "costguard-state"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
KEY = "123456789012/us-east-1/ec2_instance/i-0a1f00000000000d1"


@pytest.fixture(autouse=True)
def table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        clients.reset()
        clients.client("dynamodb").create_table(
            TableName=TABLE,
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield
    clients.reset()


def test_a_signed_request_is_taken_once_within_ten_minutes() -> None:
    assert state.first_delivery(TABLE, "abc", NOW)
    assert not state.first_delivery(TABLE, "abc", NOW + timedelta(minutes=9))
    assert state.first_delivery(TABLE, "other", NOW)
    # an expired record the table's TTL has not deleted yet no longer counts
    assert state.first_delivery(TABLE, "abc", NOW + timedelta(minutes=11))


def test_a_click_is_recorded_once_with_who_what_and_the_outcome() -> None:
    click = state.click_id("U0OPS00001", "costguard:keep", "1795176300.000100", f"2|gpu_idle|{KEY}")
    record = state.ActionRecord(TABLE, click)
    assert record.start(user="U0OPS00001", action="costguard:keep", resource=KEY, at=NOW)
    assert not state.ActionRecord(TABLE, click).start(
        user="U0OPS00001", action="costguard:keep", resource=KEY, at=NOW
    )
    record.finish("done", "kept running")
    item = clients.client("dynamodb").get_item(TableName=TABLE, Key={"id": {"S": f"action#{click}"}})["Item"]
    assert {
        k: next(iter(v.values())) for k, v in item.items() if k in ("user", "resource", "status", "at")
    } == {
        "user": "U0OPS00001",
        "resource": KEY,
        "status": "done",
        "at": NOW.isoformat(),
    }
    record.forget()
    assert state.ActionRecord(TABLE, click).start(
        user="U0OPS00001", action="costguard:keep", resource=KEY, at=NOW
    )


def test_a_mute_holds_until_its_time_for_its_reason_only() -> None:
    state.mute(TABLE, KEY, "gpu_idle", NOW + timedelta(hours=4), by="U0OPS00001")
    assert state.is_muted(TABLE, KEY, "gpu_idle", NOW)
    assert not state.is_muted(TABLE, KEY, "gpu_starved", NOW)
    assert not state.is_muted(TABLE, KEY, "gpu_idle", NOW + timedelta(hours=4))
    item = clients.client("dynamodb").get_item(TableName=TABLE, Key={"id": {"S": f"mute#{KEY}|gpu_idle"}})[
        "Item"
    ]
    assert item["expiration"]["N"] == str(int((NOW + timedelta(hours=4)).timestamp()))


def test_the_batch_form_answers_many_pairs_in_few_calls() -> None:
    keys = [f"123456789012/us-east-1/ec2_instance/i-{n:017d}" for n in range(250)]
    for key in keys[::50]:
        state.mute(TABLE, key, "gpu_idle", NOW + timedelta(hours=1), by="U0OPS00001")
    state.mute(TABLE, keys[1], "gpu_idle", NOW - timedelta(minutes=1), by="U0OPS00001")  # ended
    found = state.muted(TABLE, [(k, "gpu_idle") for k in keys] + [(keys[0], "gpu_starved")], NOW)
    assert found == {(k, "gpu_idle") for k in keys[::50]}


def test_a_mute_dynamodb_keeps_leaving_unprocessed_is_not_in_force(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The old loop asked again at once, for as long as the table left the key unprocessed (until the function
    timed out); now it waits between tries and gives up after a few: the message is told, not lost."""
    waits: list[float] = []
    monkeypatch.setattr(dynamo.time, "sleep", waits.append)
    state.mute(TABLE, KEY, "gpu_idle", NOW + timedelta(hours=1), by="U0OPS00001")
    client = clients.client("dynamodb")
    left = {TABLE: {"Keys": [{"id": {"S": state.mute_id(KEY, "gpu_idle")}}], "ConsistentRead": True}}
    with Stubber(client) as stub:
        for _ in range(dynamo.ATTEMPTS):
            stub.add_response("batch_get_item", {"Responses": {TABLE: []}, "UnprocessedKeys": left})
        assert state.muted(TABLE, [(KEY, "gpu_idle")], NOW) == set()
        stub.assert_no_pending_responses()
    assert waits == [0.1, 0.2, 0.4, 0.8]
    assert [r.unprocessed for r in caplog.records if "unprocessed" in r.getMessage()] == [1]
