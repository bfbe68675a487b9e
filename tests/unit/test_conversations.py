"""One conversation per episode: what the notifier plans for a destination's batch (pure), and where it
remembers the conversations (the state table, on moto)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from botocore.stub import Stubber
from moto import mock_aws

from costguard.act.executor import Outcome
from costguard.aws import clients, dynamo
from costguard.model import Action, Decision, Finding, Reason, Resource, ResourceKind
from costguard.notify.conversation import (
    Conversation,
    DynamoConversationStore,
    Lease,
    destination_id,
    group_post_id,
    item_id,
    order_of,
)
from costguard.notify.notice import GroupNotice, Notice, group
from costguard.notify.planning import Post, plan

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


WHERE = destination_id(WEBHOOK)


def _opened(store: DynamoConversationStore, key: str, n: int = 0) -> Conversation:
    """A conversation opened by a post (as the notifier records one), read back."""
    store.open(
        WHERE,
        key,
        channel="C0123456789",
        post=f"post-{n}",
        ts=f"1700000000.{n:06d}",
        grouped=n % 2 == 1,
        told=[f"notice-{n}", f"notice-{n}-b"],
        now=NOW,
    )
    return store.get_many(WEBHOOK, [key])[key]


def test_an_opened_conversation_is_read_back(table: str) -> None:
    store = DynamoConversationStore(table)
    key = "123456789012/us-east-1/ec2_instance/i-0abc"
    conversation = _opened(store, key, 1)
    assert (conversation.channel, conversation.ts, conversation.grouped) == (
        "C0123456789",
        "1700000000.000001",
        True,
    )
    assert (conversation.post, conversation.claim) == ("post-1", None)
    assert sorted(conversation.told) == ["notice-1", "notice-1-b"]
    found = store.get_many(WEBHOOK, [key, "123456789012/us-east-1/ec2_instance/i-missing"])
    assert found == {key: conversation}


def test_more_than_a_hundred_keys_are_read_in_pages(table: str) -> None:
    store = DynamoConversationStore(table)
    keys = [f"123456789012/us-east-1/ec2_instance/i-{n:017x}" for n in range(130)]
    first = _opened(store, keys[0])
    [written] = clients.client("dynamodb").scan(TableName=table)["Items"]
    # The rest written 25 at a time, each just as open() writes it (faster than 130 UpdateItems on moto).
    items = [{**written, "id": {"S": item_id(WHERE, key)}, "key": {"S": key}} for key in keys[1:]]
    for start in range(0, len(items), 25):
        clients.client("dynamodb").batch_write_item(
            RequestItems={table: [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]}
        )
    found = store.get_many(WEBHOOK, [*keys, *keys[:10]])  # more than BatchGetItem's 100; repeats asked once
    assert set(found) == set(keys)
    assert found[keys[129]] == first.model_copy(update={"key": keys[129]})


def test_another_destination_does_not_see_it(table: str) -> None:
    store = DynamoConversationStore(table)
    key = "123456789012/us-east-1/ec2_instance/i-0abc"
    conversation = _opened(store, key)
    assert store.get_many(OTHER_WEBHOOK, [key]) == {}
    assert store.get_many(WEBHOOK, [key]) == {key: conversation}


def test_the_webhook_url_is_never_stored(table: str) -> None:
    store = DynamoConversationStore(table)
    store.add_told(WHERE, "123456789012/us-east-1/ec2_instance/i-0abc", ["n1"], NOW)
    items = clients.client("dynamodb").scan(TableName=table)["Items"]
    assert len(items) == 1
    dumped = json.dumps(items)
    assert WEBHOOK not in dumped
    assert "SECRETtoken" not in dumped
    assert "hooks.slack.com" not in dumped
    assert items[0]["expiration"]["N"] == str(int(NOW.timestamp()) + 30 * 24 * 3600)


def test_a_conversation_stored_before_told_became_a_set_is_read_with_both(table: str) -> None:
    key = "123456789012/us-east-1/ec2_instance/i-0abc"
    clients.client("dynamodb").put_item(
        TableName=table,
        Item={
            "id": {"S": item_id(WHERE, key)},
            "key": {"S": key},
            "destination": {"S": WHERE},
            "channel": {"S": "C0123456789"},
            "ts": {"S": "1700000000.000100"},
            "grouped": {"BOOL": False},
            "told": {"L": [{"S": "old-1"}, {"S": "old-2"}]},
        },
    )
    store = DynamoConversationStore(table)
    store.add_told(WHERE, key, ["new-1"], NOW, ts="1700000000.000100")
    assert store.get_many(WEBHOOK, [key])[key].told == ("old-1", "old-2", "new-1")


# -- claims, told sets, groups and leases: written with conditions ------------------------------------------

KEY = "123456789012/us-east-1/ec2_instance/i-0abc"


def test_a_parent_is_claimed_once_and_the_loser_sees_the_winner(table: str) -> None:
    store = DynamoConversationStore(table)
    later = time.time() + 60
    first = store.claim(WHERE, KEY, "C1", "post-a", later, NOW)
    second = store.claim(WHERE, KEY, "C1", "post-b", later, NOW)
    assert (first.won, first.before) == (True, None)
    assert not second.won and second.before is not None and second.before.claim == "post-a"
    assert store.open(
        WHERE,
        KEY,
        channel="C1",
        post="post-a",
        ts="1.1",
        grouped=False,
        told=["n"],
        now=NOW,
        claims=["post-a"],
    )
    third = store.claim(WHERE, KEY, "C1", "post-c", later, NOW)
    assert not third.won and third.before is not None and third.before.ts == "1.1"  # open: reply there
    conversation = store.get(WHERE, KEY)
    assert conversation is not None and (conversation.ts, conversation.claim) == ("1.1", None)


def test_a_claim_whose_holder_is_gone_is_taken_over_and_says_what_it_held(table: str) -> None:
    store = DynamoConversationStore(table)
    assert store.claim(WHERE, KEY, "C1", "post-a", time.time() - 1, NOW).won  # its Lambda is over
    taken = store.claim(WHERE, KEY, "C1", "post-b", time.time() + 60, NOW)
    assert taken.won and taken.before is not None and taken.before.claim == "post-a"
    store.release(WHERE, KEY, "post-b", taken.before)  # put back: post-a may be in Slack, the next one looks
    held = store.get(WHERE, KEY)
    assert held is not None and held.claim == "post-a"
    store.release(WHERE, KEY, "post-a")
    released = store.get(WHERE, KEY)
    assert released is not None and released.claim is None


def test_a_parent_posted_for_another_claim_is_not_recorded(table: str) -> None:
    store = DynamoConversationStore(table)
    store.claim(WHERE, KEY, "C1", "post-a", time.time() + 60, NOW)
    assert not store.open(
        WHERE,
        KEY,
        channel="C1",
        post="post-b",
        ts="1.2",
        grouped=False,
        told=["n"],
        now=NOW,
        claims=["post-b"],
    )
    assert store.open(
        WHERE,
        KEY,
        channel="C1",
        post="post-a",
        ts="1.1",
        grouped=False,
        told=["n"],
        now=NOW,
        claims=["post-a"],
    )
    # Opened: another ts is refused, the same one is taken again (a redelivery recording what it found).
    assert not store.open(WHERE, KEY, channel="C1", post="post-a", ts="1.9", grouped=False, told=[], now=NOW)
    assert store.open(WHERE, KEY, channel="C1", post="post-a", ts="1.1", grouped=False, told=["m"], now=NOW)


def test_told_ids_are_added_never_rewritten_and_trimmed_to_the_latest(
    table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard import clock as wall

    clock = [1_000_000.0]
    monkeypatch.setattr(wall, "_played_wall", lambda: clock[0])
    store = DynamoConversationStore(table)
    store.open(WHERE, KEY, channel="C1", post="p", ts="1.1", grouped=False, told=["opener"], now=NOW)
    for n in range(70):
        clock[0] += 1
        store.add_told(WHERE, KEY, [f"id{n:02d}"], NOW, ts="1.1")
    told = store.get_many(WEBHOOK, [KEY])[KEY].told
    assert len(told) <= 60 and told[-1] == "id69"
    assert "opener" not in told and "id00" not in told  # the oldest went first
    store.add_told(WHERE, KEY, ["elsewhere"], NOW, ts="9.9")  # another thread: not recorded here
    assert "elsewhere" not in store.get_many(WEBHOOK, [KEY])[KEY].told


def test_a_single_parent_keeps_the_newest_notice_and_what_slack_shows(table: str) -> None:
    store = DynamoConversationStore(table)
    old, new = _notice(1), _notice(1).model_copy(deep=True)
    new = new.model_copy(
        update={
            "decision": new.decision.model_copy(update={"decided_at": NOW.replace(hour=13), "note": "later"})
        }
    )
    store.open(
        WHERE, KEY, channel="C1", post=old.id, ts="1.1", grouped=False, told=[old.id], now=NOW, parent=old
    )
    taken = store.set_parent(WHERE, KEY, new)
    assert taken.notice == new and taken.token is not None  # newer: recorded, and its render's token taken
    assert store.set_parent(WHERE, KEY, old).notice == new  # older: the parent keeps showing the newer one
    state = store.parent(WHERE, KEY)
    assert (state.notice, state.order, state.shown) == (new, order_of(new), order_of(old))
    assert state.stale and store.get_many(WEBHOOK, [KEY])[KEY].stale
    newer = store.mark_shown(WHERE, KEY, order_of(old), taken.token)  # rendered the old one: not the newest
    assert newer is not None and newer.notice == new
    render = store.begin_render(WHERE, KEY)
    assert render.token is not None and render.notice == new
    assert store.mark_shown(WHERE, KEY, order_of(new), render.token) is None
    assert store.parent(WHERE, KEY).shown == order_of(new)
    assert not store.get_many(WEBHOOK, [KEY])[KEY].stale


def test_a_render_overtaken_by_a_later_or_failed_one_is_not_marked_shown(table: str) -> None:
    """Two notifiers render the same parent; their updates may land in Slack in either order, and one whose
    answer was lost (a timeout after Slack acted) may land after the other's was marked. A render is marked
    only if no render began, and none failed, after it began."""
    store = DynamoConversationStore(table)
    old, new = _notice(1), _notice(1).model_copy(deep=True)
    new = new.model_copy(
        update={
            "decision": new.decision.model_copy(update={"decided_at": NOW.replace(hour=13), "note": "later"})
        }
    )
    store.open(
        WHERE, KEY, channel="C1", post=old.id, ts="1.1", grouped=False, told=[old.id], now=NOW, parent=old
    )
    first = store.begin_render(WHERE, KEY)  # A renders the old notice...
    second = store.set_parent(WHERE, KEY, new)  # ...B records newer news and renders it
    assert first.token is not None and second.token is not None and second.token > first.token
    store.forget_shown(WHERE, KEY)  # A's update timed out (it may have landed after B's): unknown
    overtaken = store.mark_shown(WHERE, KEY, order_of(new), second.token)
    assert overtaken is not None and overtaken.shown is None  # B is not marked: the parent is rendered again
    assert store.get_many(WEBHOOK, [KEY])[KEY].stale
    again = store.begin_render(WHERE, KEY)
    assert again.token is not None
    late = store.begin_render(WHERE, KEY)  # another render begins before this one is marked
    assert store.mark_shown(WHERE, KEY, order_of(new), again.token) is not None
    assert store.mark_shown(WHERE, KEY, order_of(new), late.token) is None  # the last one begun: marked
    assert not store.get_many(WEBHOOK, [KEY])[KEY].stale


def test_a_group_row_is_written_over_the_version_read(table: str) -> None:
    store = DynamoConversationStore(table)
    body = group([_notice(n) for n in range(4)], routing_tag_key="team")
    store.put_group(WHERE, "g1", body, NOW)
    item = group_post_id(WHERE, "g1")
    state = store.group(item)
    assert state is not None and (state.version, state.shown, state.stale) == (1, 1, False)
    assert state.posted == tuple(r.id for r in body.rows)
    changed = body.model_copy(update={"rows": body.rows[:3]})
    written = store.put_group_version(item, changed, 1)
    assert written is not None and written.version == 2 and written.body == changed
    assert store.put_group_version(item, body, 1) is None  # read at 1, written at 2 meanwhile: refused
    assert written.token is not None
    latest = store.mark_group_shown(item, 1, written.token)  # rendered version 1: not the latest
    assert latest is not None and latest.version == 2
    after = store.group(item)
    assert after is not None and (after.version, after.body, after.stale) == (2, changed, True)
    render = store.begin_group_render(item)
    assert render is not None and render.token is not None
    store.forget_group_shown(item)  # another render failed meanwhile: this one is not marked
    assert store.mark_group_shown(item, 2, render.token) is not None
    assert store.group(item).stale  # type: ignore[union-attr]
    render = store.begin_group_render(item)
    assert render is not None and render.token is not None
    assert store.mark_group_shown(item, 2, render.token) is None
    assert not store.group(item).stale  # type: ignore[union-attr]
    assert store.begin_group_render(group_post_id(WHERE, "none")) is None  # no group kept: nothing to render


def test_a_lease_is_taken_once_until_its_holder_is_gone(table: str) -> None:
    store = DynamoConversationStore(table)
    assert store.begin(WHERE, "n1", time.time() + 60, NOW) == Lease(True)
    assert store.begin(WHERE, "n1", time.time() + 60, NOW) == Lease(False, busy=True)
    store.abandon_lease(WHERE, "n1", -1)  # its answer lost: handed on
    assert store.begin(WHERE, "n1", time.time() + 60, NOW) == Lease(True, unsure=True)  # look first
    store.finish(WHERE, "n1", "1.5")
    assert store.begin(WHERE, "n1", time.time() + 60, NOW) == Lease(False, ts="1.5")
    assert store.begin(WHERE, "n2", time.time() + 60, NOW).won
    store.release_lease(WHERE, "n2")  # nothing posted: the next need not look
    assert store.begin(WHERE, "n2", time.time() + 60, NOW) == Lease(True)


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
