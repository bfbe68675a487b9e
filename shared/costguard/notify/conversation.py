"""One conversation per episode: where a resource's news was told in Slack, so what follows is a reply there.

A conversation is keyed by the destination (a channel, or a webhook) and the finding's conversation key (its
resource, or the budget or job family it belongs to). It remembers the parent message's ``ts`` (Slack app only:
a webhook cannot thread), whether the parent is a group, and the ids of the notices told in it, so the same
notice delivered twice (an SQS redelivery, a redrive) is told once. It lives 30 days past its last news.

Two notifiers may tell the same conversation at once (the event source runs two), so nothing here is rewritten
whole after a read; every write says what it expects:

- **The parent is claimed before it is posted** (``claim``): the conversation takes the post's key only if it has
  no parent and no live claim. The loser waits for the winner's ``ts`` and replies in its thread. A claim whose
  holder is gone (its Lambda timed out) may be taken over; the post it claimed may have been made, so it is
  looked for in Slack first (``Claim.before``). ``open`` then records the parent's ``ts``.
- **Told notices are added to a set** (``add_told``: DynamoDB ``ADD``), never written back from a copy.
- **A single parent shows the newest notice** (``set_parent`` keeps the newest by decision time; ``shown_at``
  says what Slack was last seen to show, so a parent whose update failed is re-rendered later).
- **A render is marked shown only if no other render began, and none failed, after it began** (``renders``, a
  counter each render takes a token from): two notifiers' updates may land in Slack in either order, and one
  whose answer was lost may have landed after the other was marked; then the parent is rendered again.
- **A group's rows** are kept under the group's post key with a version (``group``, ``put_group_version``): a
  row update is written only over the version it read, and retried.
- **Each reply and digest takes a lease** (``begin``) on its key: a second notifier holding the same notice waits
  instead of posting it twice, and a lease left behind by a notifier that stopped mid-post means its outcome is
  unknown (``Lease.unsure``): the post is looked for in Slack before it is made again.

Reads that decide something are strongly consistent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from costguard.aws import clients, dynamo
from costguard.clock import wall as wall_clock
from costguard.notify.notice import GroupNotice, Notice
from costguard.observability import logger
from costguard.permissions import needs

PERMISSIONS = needs("dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")
LIFETIME = timedelta(days=30)
LEASE_LIFETIME = timedelta(days=2)  # a post's lease record: past any redelivery of its notice
_KEPT_IDS = 50  # the notice ids a conversation remembers (the latest)
_TRIM_ABOVE = 60  # trimmed back to _KEPT_IDS once it holds more
_VERSION_TRIES = 8  # a group row update read and written again when another changed the group meanwhile
# Read back, everything but the parent notice itself (read only to render it).
_FIELDS = (
    "key",
    "destination",
    "channel",
    "ts",
    "grouped",
    "told",
    "told_ids",
    "post",
    "claim",
    "claim_until",
    "parent_at",
    "shown_at",
)


def order_of(notice: Notice) -> str:
    """Which of two notices of a conversation is newer: its decision time, then its id (sortable text)."""
    decided = notice.decision.decided_at
    decided = decided.replace(tzinfo=UTC) if decided.tzinfo is None else decided.astimezone(UTC)
    return f"{decided:%Y-%m-%dT%H:%M:%S.%fZ}|{notice.id}"


class Conversation(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str  # the finding's conversation key
    destination: str  # destination_id(): a webhook URL is a secret, never stored
    channel: str | None = None  # the channel id (Slack app)
    ts: str | None = None  # the parent message (Slack app)
    grouped: bool = False  # the parent is a group message: its row is updated, not the whole message
    told: tuple[str, ...] = Field(default=())  # notice ids told here, oldest first
    post: str | None = None  # the parent's post key (a group's rows are kept under it)
    claim: str | None = None  # the post claiming the parent while it has no ts
    claim_until: float | None = None  # epoch seconds: the claim's holder is gone by then
    parent_at: str | None = None  # order_of() the notice a single parent should show
    shown_at: str | None = None  # order_of() the notice Slack was last seen to show there

    @property
    def stale(self) -> bool:
        """A single parent that may not show the newest notice (its last update failed or was overtaken)."""
        return not self.grouped and self.parent_at is not None and self.shown_at != self.parent_at


@dataclass(frozen=True)
class Claim:
    """A claim on a conversation's parent. Won: ``before`` is what it took over (a claim whose holder is gone:
    its post may have been made). Lost: ``before`` is what holds it (an open conversation, or a live claim)."""

    won: bool
    before: Conversation | None


@dataclass(frozen=True)
class Lease:
    """A lease on one post's key. ``ts``: posted already. ``busy``: another notifier is posting it now.
    ``unsure``: taken over from a notifier that stopped mid-post: look for the post before making it; ``post``:
    the post to look for when it was not its own (a group of news, notify/posts.py)."""

    won: bool
    ts: str | None = None
    busy: bool = False
    unsure: bool = False
    post: str | None = None


@dataclass(frozen=True)
class ParentState:
    """What a single parent should show (the newest notice of its conversation, and its order_of()), and the
    order Slack was last seen to show (None: not known)."""

    notice: Notice | None
    order: str | None
    shown: str | None
    token: int | None = None  # the render this state may mark shown (taken by set_parent or begin_render)

    @property
    def stale(self) -> bool:
        return self.order is not None and self.shown != self.order


@dataclass(frozen=True)
class GroupState:
    """A group message's rows as kept: the body (a GroupNotice), its version, the version Slack was last seen
    to show, and the ids of the notices it told when posted."""

    body: GroupNotice
    version: int
    shown: int
    posted: tuple[str, ...]
    token: int | None = (
        None  # the render this state may mark shown (taken by put_group_version or begin_render)
    )

    @property
    def stale(self) -> bool:
        return self.shown != self.version


def destination_id(destination: str) -> str:
    return hashlib.sha256(destination.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def item_id(where: str, key: str) -> str:
    """The state table id of a conversation, from its destination's id and its key."""
    digest = hashlib.sha256(f"{where}|{key}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"conv#{digest[:40]}"


def group_id(where: str, ts: str) -> str:
    """A group kept under its message's ts (as groups were kept before they had a post key)."""
    return f"group#{hashlib.sha256(f'{where}|{ts}'.encode()).hexdigest()[:40]}"


def group_post_id(where: str, post: str) -> str:
    return f"group#{hashlib.sha256(f'{where}|post:{post}'.encode()).hexdigest()[:40]}"


def group_item(where: str, conversation: Conversation) -> str | None:
    """Where a grouped conversation's group is kept: under its post key, or (older) its ts."""
    if conversation.post:
        return group_post_id(where, conversation.post)
    return group_id(where, conversation.ts) if conversation.ts else None


def lease_id(where: str, key: str) -> str:
    return f"post#{hashlib.sha256(f'{where}|{key}'.encode('utf-8', 'surrogatepass')).hexdigest()[:40]}"


def _told_element(notice_id: str, at: float) -> str:
    """A told id as kept in the set: when it was told first, so the oldest can be trimmed."""
    return f"{int(at):010d} {notice_id}"


def _failed_condition(error: Exception) -> bool:
    code = getattr(error, "response", {}).get("Error", {}).get("Code")
    return bool(code == "ConditionalCheckFailedException")


class _Expression:
    """Attribute names as placeholders (``key`` is one of DynamoDB's reserved words) and values."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.values: dict[str, Any] = {}

    def name(self, attribute: str) -> str:
        placeholder = f"#{attribute}"
        self.names[placeholder] = attribute
        return placeholder

    def value(self, name: str, value: dict[str, Any]) -> str:
        self.values[f":{name}"] = value
        return f":{name}"

    def args(self) -> dict[str, Any]:
        found: dict[str, Any] = {"ExpressionAttributeNames": self.names}
        if self.values:
            found["ExpressionAttributeValues"] = self.values
        return found


class DynamoConversationStore:
    def __init__(self, table: str) -> None:
        self.table = table

    def _client(self) -> Any:
        return clients.client("dynamodb")

    def _update(
        self, item: str, expression: str, e: _Expression, condition: str | None = None, **extra: Any
    ) -> Any:
        args: dict[str, Any] = {
            "TableName": self.table,
            "Key": {"id": {"S": item}},
            "UpdateExpression": expression,
        }
        if condition:
            args["ConditionExpression"] = condition
        return self._client().update_item(**args, **e.args(), **extra)

    def _get(self, item: str, attributes: Sequence[str] = ()) -> dict[str, Any] | None:
        args: dict[str, Any] = {"TableName": self.table, "Key": {"id": {"S": item}}, "ConsistentRead": True}
        if attributes:
            e = _Expression()
            args["ProjectionExpression"] = ", ".join(e.name(a) for a in attributes)
            args.update(e.args())
        found = self._client().get_item(**args).get("Item")
        return found if isinstance(found, dict) else None

    # -- conversations ------------------------------------------------------------------------------------

    def get_many(self, destination: str, keys: Iterable[str]) -> dict[str, Conversation]:
        """The stored conversations of these keys, strongly consistent (what is told next depends on them).
        One DynamoDB leaves unprocessed after a few tries is absent, as if there were none: its notice opens a
        message of its own (claimed first: it cannot open a second parent)."""
        where = destination_id(destination)
        ids = [item_id(where, k) for k in keys]
        found: dict[str, Conversation] = {}
        items = dynamo.batch_get(self._client(), self.table, ids, consistent=True, attributes=_FIELDS)
        for item in items:
            conversation = _from_item(item)
            if conversation is not None:
                found[conversation.key] = conversation
        return found

    def get(self, where: str, key: str) -> Conversation | None:
        item = self._get(item_id(where, key), _FIELDS)
        return _from_item(item) if item else None

    def _identity(
        self, e: _Expression, where: str, key: str, now: datetime, channel: str | None
    ) -> list[str]:
        sets = [
            f"{e.name('key')} = {e.value('key', {'S': key})}",
            f"{e.name('destination')} = {e.value('where', {'S': where})}",
            f"{e.name('expiration')} = {e.value('expiration', {'N': str(int((now + LIFETIME).timestamp()))})}",
        ]
        if channel:
            sets.append(f"{e.name('channel')} = {e.value('channel', {'S': channel})}")
        return sets

    def claim(
        self, where: str, key: str, channel: str | None, post: str, until: float, now: datetime
    ) -> Claim:
        """Claim the conversation's parent for ``post``: won only if it has no parent and no live claim."""
        e = _Expression()
        sets = self._identity(e, where, key, now, channel)
        sets += [f"{e.name('claim')} = {e.value('post', {'S': post})}"]
        sets += [f"{e.name('claim_until')} = {e.value('until', {'N': f'{until:.3f}'})}"]
        ts, claim, claim_until = e.name("ts"), e.name("claim"), e.name("claim_until")
        condition = (
            f"attribute_not_exists({ts}) AND "
            f"(attribute_not_exists({claim}) OR {claim_until} < {e.value('now', {'N': f'{wall_clock():.3f}'})})"
        )
        try:
            answer = self._update(
                item_id(where, key),
                "SET " + ", ".join(sets),
                e,
                condition,
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as error:
            if not _failed_condition(error):
                raise
            held = getattr(error, "response", {}).get("Item")
            return Claim(False, _from_item(held) if isinstance(held, dict) else None)
        old = answer.get("Attributes")
        return Claim(True, _from_item(old) if isinstance(old, dict) else None)

    def release(self, where: str, key: str, post: str, before: Conversation | None = None) -> None:
        """Give up an unposted claim (the post failed, or another claim of the same post was lost). A stale claim
        it took over (``before``) is put back as it was: its post may have been made, and the next claimant
        looks for it."""
        e = _Expression()
        claim, until = e.name("claim"), e.name("claim_until")
        condition = f"{claim} = {e.value('post', {'S': post})} AND attribute_not_exists({e.name('ts')})"
        if before is not None and before.claim:
            expression = (
                f"SET {claim} = {e.value('old', {'S': before.claim})}, "
                f"{until} = {e.value('old_until', {'N': f'{before.claim_until or 0:.3f}'})}"
            )
        else:
            expression = f"REMOVE {claim}, {until}"
        try:
            self._update(item_id(where, key), expression, e, condition)
        except Exception as error:
            if not _failed_condition(error):
                logger.warning("claim not released", extra={"cause": type(error).__name__})

    def abandon(self, where: str, key: str, post: str, grace: float) -> None:
        """This notifier gives up a claim whose post may have been made (its answer was lost): another may take
        it over after ``grace`` seconds, looking for the post first."""
        e = _Expression()
        condition = (
            f"{e.name('claim')} = {e.value('post', {'S': post})} AND attribute_not_exists({e.name('ts')})"
        )
        until = e.value("until", {"N": f"{wall_clock() + grace:.3f}"})
        try:
            self._update(item_id(where, key), f"SET {e.name('claim_until')} = {until}", e, condition)
        except Exception as error:
            if not _failed_condition(error):
                logger.warning("claim not handed on", extra={"cause": type(error).__name__})

    def open(
        self,
        where: str,
        key: str,
        *,
        channel: str | None,
        post: str,
        ts: str,
        grouped: bool,
        told: Sequence[str],
        now: datetime,
        parent: Notice | None = None,
        claims: Sequence[str] = (),
    ) -> bool:
        """Record the parent posted for ``post`` at ``ts`` (with the notices it told), if the conversation has no
        other parent and, when ``claims`` are given, is still claimed by one of them. False otherwise."""
        e = _Expression()
        sets = self._identity(e, where, key, now, channel)
        sets += [
            f"{e.name('ts')} = {e.value('ts', {'S': ts})}",
            f"{e.name('grouped')} = {e.value('grouped', {'BOOL': grouped})}",
            f"{e.name('post')} = {e.value('post', {'S': post})}",
        ]
        if parent is not None:
            order = e.value("order", {"S": order_of(parent)})
            sets += [
                f"{e.name('parent')} = {e.value('parent', {'S': parent.model_dump_json()})}",
                f"{e.name('parent_at')} = {order}",
                f"{e.name('shown_at')} = {order}",
            ]
        expression = "SET " + ", ".join(sets) + f" REMOVE {e.name('claim')}, {e.name('claim_until')}"
        if told:
            at = wall_clock()
            elements = sorted({_told_element(t, at) for t in told})
            expression += f" ADD {e.name('told_ids')} {e.value('told', {'SS': elements})}"
        condition = f"(attribute_not_exists({e.name('ts')}) OR {e.name('ts')} = :ts)"
        if claims:
            held = " OR ".join(
                f"{e.name('claim')} = {e.value(f'c{n}', {'S': c})}" for n, c in enumerate(claims)
            )
            condition += f" AND ({held})"
        try:
            self._update(item_id(where, key), expression, e, condition)
        except Exception as error:
            if not _failed_condition(error):
                raise
            return False
        return True

    def add_told(
        self, where: str, key: str, told: Sequence[str], now: datetime, *, ts: str | None = None
    ) -> None:
        """Add notice ids to the conversation's told set (in the thread at ``ts``, when given: a conversation
        that has since another parent is left alone). The set keeps the latest _KEPT_IDS."""
        if not told:
            return
        e = _Expression()
        sets = self._identity(e, where, key, now, None)
        at = wall_clock()
        elements = sorted({_told_element(t, at) for t in told})
        expression = (
            "SET " + ", ".join(sets) + f" ADD {e.name('told_ids')} {e.value('told', {'SS': elements})}"
        )
        condition = f"{e.name('ts')} = {e.value('ts', {'S': ts})}" if ts else None
        try:
            answer = self._update(item_id(where, key), expression, e, condition, ReturnValues="UPDATED_NEW")
        except Exception as error:
            if not _failed_condition(error):
                raise
            logger.warning("told not recorded: the conversation has another parent", extra={"key": key})
            return
        kept = answer.get("Attributes", {}).get("told_ids", {}).get("SS", [])
        if len(kept) > _TRIM_ABOVE:
            old = sorted(kept)[: len(kept) - _KEPT_IDS]
            e = _Expression()
            self._update(item_id(where, key), f"DELETE {e.name('told_ids')} {e.value('old', {'SS': old})}", e)

    def set_parent(self, where: str, key: str, notice: Notice) -> ParentState:
        """The notice a single parent should show, if it is newer than the one it should show already; what it
        should show now, either way."""
        e = _Expression()
        at, order = e.name("parent_at"), e.value("order", {"S": order_of(notice)})
        try:
            answer = self._update(
                item_id(where, key),
                f"SET {e.name('parent')} = {e.value('parent', {'S': notice.model_dump_json()})}, {at} = {order} "
                f"ADD {e.name('renders')} {e.value('one', {'N': '1'})}",
                e,
                f"attribute_exists({e.name('ts')}) AND (attribute_not_exists({at}) OR {at} < {order})",
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as error:
            if not _failed_condition(error):
                raise
            return _parent_state(getattr(error, "response", {}).get("Item") or {})
        return _parent_state(answer.get("Attributes") or {}, token=True)

    def begin_render(self, where: str, key: str) -> ParentState:
        """A render's token (any render marked shown before this one's is marked no more), and what the parent
        should show now."""
        found = self._take_token(item_id(where, key), "ts")
        return ParentState(None, None, None) if found is None else _parent_state(found, token=True)

    def _take_token(self, item: str, kept: str) -> dict[str, Any] | None:
        """Add one to the item's render counter, if it has ``kept`` (an open parent's ts, a group's body): the
        item as it is now, or None when there is nothing to render."""
        e = _Expression()
        try:
            answer = self._update(
                item,
                f"ADD {e.name('renders')} {e.value('one', {'N': '1'})}",
                e,
                f"attribute_exists({e.name(kept)})",
                ReturnValues="ALL_NEW",
            )
        except Exception as error:
            if not _failed_condition(error):
                raise
            return None
        return dict(answer.get("Attributes") or {})

    def parent(self, where: str, key: str) -> ParentState:
        """The notice a single parent should show, its order, and the order Slack was last seen to show."""
        return _parent_state(self._get(item_id(where, key), ("parent", "parent_at", "shown_at")) or {})

    def mark_shown(self, where: str, key: str, order: str, token: int) -> ParentState | None:
        """Slack shows the notice of ``order``, if that is still the newest and no render began or failed since
        the one of ``token``: None, marked; else what the parent should show now and what Slack was last seen to
        show (rendered again, unless another render of the same notice was marked)."""
        e = _Expression()
        value = e.value("order", {"S": order})
        try:
            self._update(
                item_id(where, key),
                f"SET {e.name('shown_at')} = {value}",
                e,
                f"{e.name('parent_at')} = {value} AND {e.name('renders')} = {e.value('token', {'N': str(token)})}",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as error:
            if not _failed_condition(error):
                raise
            return _parent_state(getattr(error, "response", {}).get("Item") or {})
        return None

    def forget_shown(self, where: str, key: str) -> None:
        """What Slack shows is not known (an update failed, or was overtaken): the parent is rendered again, and
        no render begun before now is marked shown."""
        e = _Expression()
        self._update(
            item_id(where, key),
            f"REMOVE {e.name('shown_at')} ADD {e.name('renders')} {e.value('one', {'N': '1'})}",
            e,
        )

    # -- groups ---------------------------------------------------------------------------------------------

    def put_group(self, where: str, post: str, body: GroupNotice, now: datetime) -> None:
        """A group's rows, kept under its post key before it is posted (so a reply in its thread can update its
        row, and a notifier that finds the post made by another knows what it told). Kept as first written."""
        item = {
            "id": {"S": group_post_id(where, post)},
            "body": {"S": body.model_dump_json()},
            "version": {"N": "1"},
            "shown": {"N": "1"},
            "posted": {"L": [{"S": row.id} for row in body.rows]},
            "expiration": {"N": str(int((now + LIFETIME).timestamp()))},
        }
        try:
            self._client().put_item(
                TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(id)"
            )
        except Exception as error:
            if not _failed_condition(error):
                raise

    def group(self, item: str) -> GroupState | None:
        return _group_state(self._get(item) or {})

    def put_group_version(self, item: str, body: GroupNotice, version: int) -> GroupState | None:
        """The group's new rows, written only over ``version`` (the one read): the group as written, or None if
        another wrote first."""
        e = _Expression()
        current = e.name("version")
        condition = (
            f"{current} = {e.value('read', {'N': str(version)})}"
            if version
            else f"attribute_not_exists({current})"
        )
        try:
            answer = self._update(
                item,
                f"SET {e.name('body')} = {e.value('body', {'S': body.model_dump_json()})}, "
                f"{current} = {e.value('version', {'N': str(version + 1)})} "
                f"ADD {e.name('renders')} {e.value('one', {'N': '1'})}",
                e,
                condition,
                ReturnValues="ALL_NEW",
            )
        except Exception as error:
            if not _failed_condition(error):
                raise
            return None
        return _group_state(answer.get("Attributes") or {}, token=True)

    def begin_group_render(self, item: str) -> GroupState | None:
        """A render's token for a group message (as begin_render), and the group as it is now."""
        found = self._take_token(item, "body")
        return None if found is None else _group_state(found, token=True)

    def mark_group_shown(self, item: str, version: int, token: int) -> GroupState | None:
        """Slack shows ``version`` of the group, if that is still its latest and no render began or failed since
        the one of ``token``: None, marked; else the group as it is now (rendered again, unless another render of
        the same version was marked)."""
        e = _Expression()
        value = e.value("version", {"N": str(version)})
        try:
            self._update(
                item,
                f"SET {e.name('shown')} = {value}",
                e,
                f"{e.name('version')} = {value} AND {e.name('renders')} = {e.value('token', {'N': str(token)})}",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as error:
            if not _failed_condition(error):
                raise
            return _group_state(getattr(error, "response", {}).get("Item") or {})
        return None

    def forget_group_shown(self, item: str) -> None:
        e = _Expression()
        self._update(
            item,
            f"SET {e.name('shown')} = {e.value('unknown', {'N': '-1'})} "
            f"ADD {e.name('renders')} {e.value('one', {'N': '1'})}",
            e,
        )

    # -- leases on single posts (replies, digests) --------------------------------------------------------

    def begin(self, where: str, key: str, until: float, now: datetime) -> Lease:
        """Take the lease on post ``key``: free, released, or left by a notifier that is gone (then ``unsure``)."""
        item = {
            "id": {"S": lease_id(where, key)},
            "until": {"N": f"{until:.3f}"},
            "expiration": {"N": str(int((now + LEASE_LIFETIME).timestamp()))},
        }
        try:
            answer = self._client().put_item(
                TableName=self.table,
                Item=item,
                ConditionExpression="attribute_not_exists(id) OR (attribute_not_exists(ts) AND #until < :now)",
                ExpressionAttributeNames={"#until": "until"},
                ExpressionAttributeValues={":now": {"N": f"{wall_clock():.3f}"}},
                ReturnValues="ALL_OLD",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as error:
            if not _failed_condition(error):
                raise
            held = getattr(error, "response", {}).get("Item") or {}
            ts = held.get("ts", {}).get("S")
            return Lease(False, ts=ts if isinstance(ts, str) else None, busy=not isinstance(ts, str))
        old = answer.get("Attributes") or {}
        unsure = bool(old) and not old.get("released", {}).get("BOOL", False)
        post = old.get("post", {}).get("S") if unsure else None
        return Lease(True, unsure=unsure, post=post if isinstance(post, str) else None)

    def finish(self, where: str, key: str, ts: str) -> None:
        e = _Expression()
        self._update(lease_id(where, key), f"SET {e.name('ts')} = {e.value('ts', {'S': ts})}", e)

    def abandon_lease(self, where: str, key: str, grace: float, *, post: str | None = None) -> None:
        """Given up with the post's outcome unknown: another may take the lease after ``grace`` (and look first,
        for ``post`` when it was told in another post than its own: a group of news)."""
        e = _Expression()
        until = e.value("until", {"N": f"{wall_clock() + grace:.3f}"})
        also = f", {e.name('post')} = {e.value('post', {'S': post})}" if post else ""
        try:
            self._update(
                lease_id(where, key),
                f"SET {e.name('until')} = {until}{also}",
                e,
                f"attribute_not_exists({e.name('ts')})",
            )
        except Exception as error:
            if not _failed_condition(error):
                logger.warning("lease not handed on", extra={"cause": type(error).__name__})

    def release_lease(self, where: str, key: str) -> None:
        """Nothing was posted (a refusal, or a failure before Slack took it): the next try need not look."""
        e = _Expression()
        try:
            self._update(
                lease_id(where, key),
                f"SET {e.name('until')} = {e.value('zero', {'N': '0'})}, "
                f"{e.name('released')} = {e.value('yes', {'BOOL': True})}",
                e,
                f"attribute_not_exists({e.name('ts')})",
            )
        except Exception as error:
            if not _failed_condition(error):
                logger.warning("lease not released", extra={"cause": type(error).__name__})


def _token(item: dict[str, Any], taken: bool) -> int | None:
    """The render counter of an item just incremented by this render (``taken``); None otherwise."""
    return int(item.get("renders", {}).get("N", "0")) if taken else None


def _parent_state(item: dict[str, Any], *, token: bool = False) -> ParentState:
    body = item.get("parent", {}).get("S")
    return ParentState(
        notice=Notice.model_validate_json(body) if isinstance(body, str) else None,
        order=item.get("parent_at", {}).get("S"),
        shown=item.get("shown_at", {}).get("S"),
        token=_token(item, token),
    )


def _group_state(found: dict[str, Any], *, token: bool = False) -> GroupState | None:
    body = found.get("body", {}).get("S")
    if not isinstance(body, str):
        return None
    return GroupState(
        body=GroupNotice.model_validate_json(body),
        version=int(found.get("version", {}).get("N", "0")),
        shown=int(found.get("shown", {}).get("N", "0")),
        posted=tuple(p["S"] for p in found.get("posted", {}).get("L", []) if "S" in p),
        token=_token(found, token),
    )


def _from_item(item: dict[str, Any]) -> Conversation | None:
    try:
        legacy = [t["S"] for t in item.get("told", {}).get("L", [])]
        added = [element.split(" ", 1)[-1] for element in sorted(item.get("told_ids", {}).get("SS", []))]
        until = item.get("claim_until", {}).get("N")
        return Conversation(
            key=item["key"]["S"],
            destination=item["destination"]["S"],
            channel=item.get("channel", {}).get("S"),
            ts=item.get("ts", {}).get("S"),
            grouped=item.get("grouped", {}).get("BOOL", False),
            told=tuple(dict.fromkeys([*legacy, *added])),
            post=item.get("post", {}).get("S"),
            claim=item.get("claim", {}).get("S"),
            claim_until=float(until) if until is not None else None,
            parent_at=item.get("parent_at", {}).get("S"),
            shown_at=item.get("shown_at", {}).get("S"),
        )
    except (KeyError, TypeError, ValueError):
        return None
