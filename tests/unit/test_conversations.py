"""One conversation per episode: what the notifier plans for a destination's batch (pure), and where it
remembers the conversations (the state table, on moto)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from botocore.stub import Stubber
from moto import mock_aws

from costguard.act.executor import Outcome
from costguard.aws import clients, dynamo
from costguard.flows.notifier import Post, plan
from costguard.model import Action, Decision, Finding, Reason, Resource, ResourceKind
from costguard.notify.conversation import (
    Conversation,
    DynamoConversationStore,
    destination_id,
    item_id,
)
from costguard.notify.notice import GroupNotice, Notice, group

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
TABLE = "state"
WEBHOOK = "https://hooks.slack.com/services/T0000/B0000/conversationSECRETtoken"
OTHER_WEBHOOK = "https://hooks.slack.com/services/T0000/B1111/otherSECRETtoken"


def _notice(
    n: int, hourly: float | None = 1.0, *, reason: Reason = Reason.GPU_IDLE, team: str = "ml"
) -> Notice:
    resource = Resource(
        kind=ResourceKind.EC2_INSTANCE,
        id=f"i-{n:017x}",
        account="123456789012",
        region="us-east-1",
        instance_type="p4d.24xlarge",
        tags={"team": team},
    )
    finding = Finding(
        reason=reason, resource=resource, summary=f"finding {n}", observed_at=NOW, hourly_usd=hourly
    )
    decision = Decision(
        action=Action.NOTIFY, reason=reason, finding=finding, dry_run=True, note="n", decided_at=NOW
    )
    return Notice(decision=decision, outcome=Outcome(done=False, detail="no change to the resource"))


def _conversation(
    notice: Notice, *, ts: str | None = "1700000000.000100", told: tuple[str, ...] = ()
) -> Conversation:
    return Conversation(
        key=notice.decision.finding.conversation,
        destination=destination_id(WEBHOOK),
        channel="C0123456789" if ts else None,
        ts=ts,
        told=told,
    )


def _hourly(notice: Notice) -> float:
    return notice.decision.hourly_usd if notice.decision.hourly_usd is not None else -1.0


# -- plan ---------------------------------------------------------------------------------------------------


def test_a_notice_with_an_open_conversation_is_a_reply_with_threads() -> None:
    notice = _notice(1)
    conversation = _conversation(notice)
    posts, told = plan([("m1", notice)], {conversation.key: conversation}, threads=True)
    assert told == []
    [post] = posts
    assert (post.kind, post.members, post.notices) == ("reply", ["m1"], [notice])
    assert post.conversation == conversation


def test_a_notice_with_an_open_conversation_is_an_opener_without_threads() -> None:
    notice = _notice(1)
    conversation = _conversation(notice)
    posts, told = plan([("m1", notice)], {conversation.key: conversation}, threads=False)
    assert told == []
    [post] = posts
    assert (post.kind, post.members, post.notices, post.conversation) == ("opener", ["m1"], [notice], None)


def test_a_conversation_without_ts_is_an_opener_even_with_threads() -> None:
    notice = _notice(1)
    conversation = _conversation(notice, ts=None)
    posts, _ = plan([("m1", notice)], {conversation.key: conversation}, threads=True)
    assert [p.kind for p in posts] == ["opener"]


def test_a_notice_already_told_in_its_conversation_is_skipped() -> None:
    notice = _notice(1)
    conversation = _conversation(notice, told=(notice.id,))
    posts, told = plan([("m1", notice)], {conversation.key: conversation}, threads=True)
    assert posts == []
    assert told == ["m1"]


def test_the_same_notice_twice_in_one_batch_is_told_once() -> None:
    notice = _notice(1)
    posts, told = plan([("m1", notice), ("m2", notice)], {}, threads=True)
    [post] = posts
    assert (post.kind, post.members) == ("opener", ["m1"])
    assert told == ["m2"]


def test_more_openers_than_above_become_one_group_with_every_member() -> None:
    items = [(f"m{n}", _notice(n, hourly=float(n))) for n in range(4)]
    posts, told = plan(items, {}, threads=True, above=3)
    assert told == []
    [post] = posts
    assert post.kind == "group"
    assert sorted(post.members) == ["m0", "m1", "m2", "m3"]
    assert post.group is not None
    assert post.group.count == 4
    assert {r.id for r in post.group.rows} == {n.id for _, n in items}


def test_up_to_above_openers_stay_separate() -> None:
    items = [(f"m{n}", _notice(n)) for n in range(3)]
    posts, told = plan(items, {}, threads=True, above=3)
    assert told == []
    assert [(p.kind, p.members) for p in posts] == [
        ("opener", ["m0"]),
        ("opener", ["m1"]),
        ("opener", ["m2"]),
    ]


def test_replies_are_not_counted_towards_the_group() -> None:
    replied = _notice(9)
    conversation = _conversation(replied)
    items = [("r", replied), *[(f"m{n}", _notice(n)) for n in range(3)]]
    posts, _ = plan(items, {conversation.key: conversation}, threads=True, above=3)
    assert [p.kind for p in posts] == ["reply", "opener", "opener", "opener"]


def _group_post(posts: list[Post], kind: str) -> GroupNotice:
    [post] = [p for p in posts if p.kind == kind]
    assert post.group is not None
    return post.group


def test_groups_from_producers_merge_with_loose_openers() -> None:
    produced = [_notice(n, hourly=float(n)) for n in range(10, 15)]  # 10..14 $/h
    produced_group = group(produced, routing_tag_key="team")
    loose = [_notice(1, hourly=100.0, reason=Reason.NOTEBOOK_IDLE), _notice(2, hourly=None)]
    items: list[tuple[str, Notice | GroupNotice]] = [("g", produced_group), ("a", loose[0]), ("b", loose[1])]
    posts, told = plan(items, {}, threads=True, above=3)
    assert told == []
    [post] = posts
    assert post.kind == "group"
    assert sorted(post.members) == ["a", "b", "g"]
    merged = _group_post(posts, "group")
    assert merged.count == 7
    assert merged.hourly_total_usd == pytest.approx(sum(range(10, 15)) + 100.0)
    assert merged.unpriced == 1
    assert merged.by_reason == {Reason.GPU_IDLE.value: 6, Reason.NOTEBOOK_IDLE.value: 1}
    hourly = [_hourly(r) for r in merged.rows]
    assert hourly == sorted(hourly, reverse=True)
    assert hourly[0] == 100.0 and hourly[-1] == -1.0  # the unpriced one last
    assert {r.id for r in merged.rows} == {n.id for n in [*produced, *loose]}
    assert not merged.digest
    assert merged.route_tags == {"team": "ml"}


def test_two_producer_groups_merge_into_one() -> None:
    first = group([_notice(n, hourly=2.0) for n in range(5)], routing_tag_key="team")
    second = group([_notice(n, hourly=3.0) for n in range(5, 10)], routing_tag_key="team")
    posts, _ = plan([("g1", first), ("g2", second)], {}, threads=False)
    [post] = posts
    assert post.kind == "group" and sorted(post.members) == ["g1", "g2"]
    merged = _group_post(posts, "group")
    assert merged.count == 10
    assert merged.hourly_total_usd == pytest.approx(25.0)
    assert [_hourly(r) for r in merged.rows] == [3.0] * 5 + [2.0] * 5


def test_digest_groups_merge_into_one_digest_post_apart_from_the_rest() -> None:
    digest_a = group([_notice(n, hourly=1.0) for n in range(3)], routing_tag_key="team", digest=True)
    digest_b = group([_notice(n, hourly=5.0) for n in range(3, 5)], routing_tag_key="team", digest=True)
    loose = _notice(20, hourly=50.0)
    items: list[tuple[str, Notice | GroupNotice]] = [("d1", digest_a), ("o", loose), ("d2", digest_b)]
    posts, told = plan(items, {}, threads=True, above=3)
    assert told == []
    assert sorted(p.kind for p in posts) == ["digest", "opener"]
    [opener] = [p for p in posts if p.kind == "opener"]
    assert opener.members == ["o"]
    [digest_post] = [p for p in posts if p.kind == "digest"]
    assert sorted(digest_post.members) == ["d1", "d2"]
    merged = _group_post(posts, "digest")
    assert merged.digest
    assert merged.count == 5
    assert merged.hourly_total_usd == pytest.approx(13.0)
    assert [_hourly(r) for r in merged.rows] == [5.0, 5.0, 1.0, 1.0, 1.0]
    assert loose.id not in {r.id for r in merged.rows}


def test_a_group_whose_rows_were_all_told_is_skipped() -> None:
    rows = [_notice(n) for n in range(4)]
    grouped = group(rows, routing_tag_key="team")
    conversations = {r.decision.finding.conversation: _conversation(r, told=(r.id,)) for r in rows}
    posts, told = plan([("g", grouped)], conversations, threads=True)
    assert posts == []
    assert told == ["g"]


# -- Conversation -------------------------------------------------------------------------------------------


def test_with_told_keeps_the_latest_twenty() -> None:
    conversation = _conversation(_notice(1))
    for n in range(25):
        conversation = conversation.with_told(f"id{n}")
    assert conversation.told == tuple(f"id{n}" for n in range(5, 25))
    again = conversation.with_told("id10")  # told again: moves to the end, not twice
    assert len(again.told) == 20
    assert again.told[-1] == "id10"
    assert again.told.count("id10") == 1


# -- DynamoConversationStore (moto) -------------------------------------------------------------------------


@pytest.fixture
def table() -> Iterator[str]:
    with mock_aws():
        clients.reset()
        clients.client("dynamodb").create_table(
            TableName=TABLE,
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield TABLE
        clients.reset()


def _stored(key: str, n: int = 0) -> Conversation:
    return Conversation(
        key=key,
        destination=destination_id(WEBHOOK),
        channel="C0123456789",
        ts=f"1700000000.{n:06d}",
        grouped=n % 2 == 1,
        told=(f"notice-{n}", f"notice-{n}-b"),
    )


def test_a_stored_conversation_is_read_back(table: str) -> None:
    store = DynamoConversationStore(table)
    conversation = _stored("123456789012/us-east-1/ec2_instance/i-0abc", 1)
    store.put(conversation, NOW)
    found = store.get_many(WEBHOOK, [conversation.key, "123456789012/us-east-1/ec2_instance/i-missing"])
    assert found == {conversation.key: conversation}


def test_more_than_a_hundred_keys_are_read_in_pages(table: str) -> None:
    store = DynamoConversationStore(table)
    keys = [f"123456789012/us-east-1/ec2_instance/i-{n:017x}" for n in range(130)]
    store.put(_stored(keys[0], 0), NOW)
    [written] = clients.client("dynamodb").scan(TableName=table)["Items"]
    # The rest written 25 at a time, each just as put() writes it (faster than 130 PutItems on moto).
    items = [
        {**written, "id": {"S": item_id(destination_id(WEBHOOK), key)}, "key": {"S": key}} for key in keys[1:]
    ]
    for start in range(0, len(items), 25):
        clients.client("dynamodb").batch_write_item(
            RequestItems={table: [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]}
        )
    found = store.get_many(WEBHOOK, [*keys, *keys[:10]])  # more than BatchGetItem's 100; repeats asked once
    assert set(found) == set(keys)
    assert found[keys[129]] == _stored(keys[0], 0).model_copy(update={"key": keys[129]})


def test_another_destination_does_not_see_it(table: str) -> None:
    store = DynamoConversationStore(table)
    conversation = _stored("123456789012/us-east-1/ec2_instance/i-0abc")
    store.put(conversation, NOW)
    assert store.get_many(OTHER_WEBHOOK, [conversation.key]) == {}
    assert store.get_many(WEBHOOK, [conversation.key]) == {conversation.key: conversation}


def test_the_webhook_url_is_never_stored(table: str) -> None:
    store = DynamoConversationStore(table)
    store.put(_stored("123456789012/us-east-1/ec2_instance/i-0abc"), NOW)
    items = clients.client("dynamodb").scan(TableName=table)["Items"]
    assert len(items) == 1
    dumped = json.dumps(items)
    assert WEBHOOK not in dumped
    assert "SECRETtoken" not in dumped
    assert "hooks.slack.com" not in dumped
    assert items[0]["expiration"]["N"] == str(int(NOW.timestamp()) + 30 * 24 * 3600)


def test_a_producers_group_replies_in_open_threads_and_groups_only_the_rest() -> None:
    """Stops of resources marked in their own threads are told there, not in a new group message."""
    rows = [_notice(n, hourly=float(n)) for n in range(1, 9)]
    threaded = {r.decision.finding.conversation: _conversation(r) for r in rows[:3]}
    told_already = _conversation(rows[3], told=(rows[3].id,))
    conversations = {**threaded, told_already.key: told_already}
    posts, told = plan([("m1", group(rows, routing_tag_key="team"))], conversations, threads=True)
    assert told == []
    replies = [p for p in posts if p.kind == "reply"]
    assert sorted(n.id for p in replies for n in p.notices) == sorted(r.id for r in rows[:3])
    [rest] = [p for p in posts if p.kind == "group"]
    assert rest.group is not None and rest.group.count == 4  # 8 less 3 replied less 1 told already
    assert rest.group.hourly_total_usd == 5.0 + 6.0 + 7.0 + 8.0
    assert {r.id for r in rest.group.rows} == {r.id for r in rows[4:]}
    assert rest.group.by_reason == {"gpu_idle": 4}


def test_what_is_left_of_a_producers_group_is_told_one_by_one_when_few() -> None:
    rows = [_notice(n) for n in range(1, 6)]
    threaded = {r.decision.finding.conversation: _conversation(r) for r in rows[:3]}
    posts, _ = plan([("m1", group(rows, routing_tag_key="team"))], threaded, threads=True)
    assert sorted(p.kind for p in posts) == ["opener", "opener", "reply", "reply", "reply"]


def test_a_conversation_dynamodb_keeps_leaving_unprocessed_is_read_as_none(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The old loop asked again at once, for as long as the table left the key unprocessed (until the function
    timed out); now it waits between tries and gives up after a few, and the notice opens its own message."""
    waits: list[float] = []
    monkeypatch.setattr(dynamo.time, "sleep", waits.append)
    client = clients.client("dynamodb", "us-east-1")
    monkeypatch.setattr(clients, "client", lambda service, region=None, account=None: client)
    key = "123456789012/us-east-1/ec2_instance/i-0abc"
    left = {TABLE: {"Keys": [{"id": {"S": item_id(destination_id(WEBHOOK), key)}}]}}
    with Stubber(client) as stub:
        for _ in range(dynamo.ATTEMPTS):
            stub.add_response("batch_get_item", {"Responses": {TABLE: []}, "UnprocessedKeys": left})
        assert DynamoConversationStore(TABLE).get_many(WEBHOOK, [key]) == {}
        stub.assert_no_pending_responses()
    assert waits == [0.1, 0.2, 0.4, 0.8]
    assert [r.unprocessed for r in caplog.records if "unprocessed" in r.getMessage()] == [1]
