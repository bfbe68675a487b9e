"""One conversation per episode: where a resource's news was told in Slack, so what follows is a reply there.

A conversation is keyed by the destination (a channel, or a webhook) and the finding's conversation key (its
resource, or the budget or job family it belongs to). It remembers the parent message's ``ts`` (Slack app only:
a webhook cannot thread), whether the parent is a group, and the ids of the notices told in it, so the same
notice delivered twice (an SQS redelivery, a redrive) is told once. It lives 30 days past its last news.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from costguard.aws import clients, dynamo
from costguard.permissions import needs

PERMISSIONS = needs("dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:PutItem")
LIFETIME = timedelta(days=30)
_KEPT_IDS = 20  # the notice ids a conversation remembers (the latest)


class Conversation(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str  # the finding's conversation key
    destination: str  # destination_id(): a webhook URL is a secret, never stored
    channel: str | None = None  # the channel id (Slack app)
    ts: str | None = None  # the parent message (Slack app)
    grouped: bool = False  # the parent is a group message: replies only, no update
    told: tuple[str, ...] = Field(default=())  # notice ids told here, latest last

    def with_told(self, notice_id: str) -> Conversation:
        told = (*tuple(t for t in self.told if t != notice_id), notice_id)
        return self.model_copy(update={"told": told[-_KEPT_IDS:]})


def destination_id(destination: str) -> str:
    return hashlib.sha256(destination.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def item_id(where: str, key: str) -> str:
    """The state table id of a conversation, from its destination's id and its key."""
    digest = hashlib.sha256(f"{where}|{key}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"conv#{digest[:40]}"


class ConversationStore(Protocol):
    def get_many(self, destination: str, keys: Iterable[str]) -> dict[str, Conversation]: ...

    def put(self, conversation: Conversation, now: datetime) -> None: ...

    def put_group(self, where: str, ts: str, body: str, now: datetime) -> None:
        """A group message's rows (a GroupNotice's JSON), so a reply in its thread can update its row."""
        ...

    def get_group(self, where: str, ts: str) -> str | None: ...


def group_id(where: str, ts: str) -> str:
    return f"group#{hashlib.sha256(f'{where}|{ts}'.encode()).hexdigest()[:40]}"


class DynamoConversationStore:
    def __init__(self, table: str) -> None:
        self.table = table

    def get_many(self, destination: str, keys: Iterable[str]) -> dict[str, Conversation]:
        """The stored conversations of these keys. One DynamoDB leaves unprocessed after a few tries is absent,
        as if there were none: its notice opens a message of its own."""
        where = destination_id(destination)
        ids = [item_id(where, k) for k in keys]
        found: dict[str, Conversation] = {}
        for item in dynamo.batch_get(clients.client("dynamodb"), self.table, ids):
            conversation = _from_item(item)
            if conversation is not None:
                found[conversation.key] = conversation
        return found

    def put(self, conversation: Conversation, now: datetime) -> None:
        item: dict[str, Any] = {
            "id": {"S": item_id(conversation.destination, conversation.key)},
            "key": {"S": conversation.key},
            "destination": {"S": conversation.destination},
            "grouped": {"BOOL": conversation.grouped},
            "expiration": {"N": str(int((now + LIFETIME).timestamp()))},
        }
        if conversation.channel:
            item["channel"] = {"S": conversation.channel}
        if conversation.ts:
            item["ts"] = {"S": conversation.ts}
        if conversation.told:
            item["told"] = {"L": [{"S": t} for t in conversation.told]}
        clients.client("dynamodb").put_item(TableName=self.table, Item=item)

    def put_group(self, where: str, ts: str, body: str, now: datetime) -> None:
        item = {
            "id": {"S": group_id(where, ts)},
            "body": {"S": body},
            "expiration": {"N": str(int((now + LIFETIME).timestamp()))},
        }
        clients.client("dynamodb").put_item(TableName=self.table, Item=item)

    def get_group(self, where: str, ts: str) -> str | None:
        found = clients.client("dynamodb").get_item(
            TableName=self.table, Key={"id": {"S": group_id(where, ts)}}
        )
        body = found.get("Item", {}).get("body", {}).get("S")
        return body if isinstance(body, str) else None


def _from_item(item: dict[str, Any]) -> Conversation | None:
    try:
        return Conversation(
            key=item["key"]["S"],
            destination=item["destination"]["S"],
            channel=item.get("channel", {}).get("S"),
            ts=item.get("ts", {}).get("S"),
            grouped=item.get("grouped", {}).get("BOOL", False),
            told=tuple(t["S"] for t in item.get("told", {}).get("L", [])),
        )
    except (KeyError, TypeError, ValueError):
        return None


class MemoryConversationStore:
    def __init__(self) -> None:
        self.items: dict[tuple[str, str], Conversation] = {}
        self.groups: dict[tuple[str, str], str] = {}

    def get_many(self, destination: str, keys: Iterable[str]) -> dict[str, Conversation]:
        where = destination_id(destination)
        return {k: self.items[(where, k)] for k in keys if (where, k) in self.items}

    def put(self, conversation: Conversation, now: datetime) -> None:
        self.items[(conversation.destination, conversation.key)] = conversation

    def put_group(self, where: str, ts: str, body: str, now: datetime) -> None:
        self.groups[(where, ts)] = body

    def get_group(self, where: str, ts: str) -> str | None:
        return self.groups.get((where, ts))
