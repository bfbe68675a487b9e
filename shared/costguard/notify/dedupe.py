"""No repeats: one message per episode of a resource, reason and action, and a daily digest of what stays open.

An episode lasts while the same finding keeps being seen: each sighting pushes its end ``window`` further, so a
GPU idle at every 5-minute sweep is told once, not every few hours. Unseen for longer than ``window`` (it got busy,
it was stopped), the episode is over and the next sighting is news again. A finding still open a day after it was
last told (``digest_after``) is due in the daily digest, once a day, instead of being told again on its own.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from costguard.aws import clients
from costguard.permissions import needs

PERMISSIONS = needs("dynamodb:UpdateItem")  # DynamoRepeatGate: one update per sighting, a second for news

# DynamoDB refuses partition keys over 2048 bytes; a key built from a hostile resource id can be longer.
_MAX_KEY_BYTES = 1024
DIGEST_AFTER = timedelta(days=1)


class Sighting(StrEnum):
    NEW = "new"  # the first of an episode: tell it
    REPEAT = "repeat"  # the same episode, told already: nothing
    DIGEST = "digest"  # the same episode, last told over a day ago: in the daily digest


def _table_key(key: str) -> str:
    encoded = key.encode("utf-8", "surrogatepass")
    if len(encoded) <= _MAX_KEY_BYTES:
        return f"repeat#{key}"
    return f"repeat#sha256:{hashlib.sha256(encoded).hexdigest()}"


class RepeatGate(Protocol):
    def sighting(
        self, key: str, now: datetime, window: timedelta, digest_after: timedelta = DIGEST_AFTER
    ) -> Sighting: ...


def _judge(
    old_end: datetime | None, told: datetime | None, now: datetime, digest_after: timedelta
) -> Sighting:
    if old_end is None or old_end <= now or told is None:
        return Sighting.NEW
    if now - told >= digest_after:
        return Sighting.DIGEST
    return Sighting.REPEAT


class DynamoRepeatGate:
    """An item per episode in the state table: ``expiration`` (the episode's end, also the table's TTL) and
    ``told`` (when it was last told). One UpdateItem per sighting returns the previous item; news (a new episode,
    a digest) costs a second, conditional one, so two runs never both tell it."""

    def __init__(self, table: str) -> None:
        self.table = table

    def sighting(
        self, key: str, now: datetime, window: timedelta, digest_after: timedelta = DIGEST_AFTER
    ) -> Sighting:
        if window <= timedelta(0):
            return Sighting.NEW
        dynamodb = clients.client("dynamodb")
        item_key = {"id": {"S": _table_key(key)}}
        old: dict[str, Any] = dynamodb.update_item(
            TableName=self.table,
            Key=item_key,
            UpdateExpression="SET expiration = :end",
            ExpressionAttributeValues={":end": {"N": str(int((now + window).timestamp()))}},
            ReturnValues="ALL_OLD",
        ).get("Attributes", {})
        seen = _judge(_epoch(old.get("expiration")), _epoch(old.get("told")), now, digest_after)
        if seen is Sighting.REPEAT:
            return seen  # the usual sweep: one call
        # News: claimed by one run only. Nobody told it since what this run read (or it has never been told).
        told = old.get("told")
        try:
            dynamodb.update_item(
                TableName=self.table,
                Key=item_key,
                UpdateExpression="SET told = :now",
                ConditionExpression="told = :told" if told else "attribute_not_exists(told)",
                ExpressionAttributeValues={":now": {"N": str(int(now.timestamp()))}}
                | ({":told": told} if told else {}),
            )
        except dynamodb.exceptions.ConditionalCheckFailedException:
            return Sighting.REPEAT
        return seen


def _epoch(value: dict[str, str] | None) -> datetime | None:
    if not value or "N" not in value:
        return None
    return datetime.fromtimestamp(int(value["N"]), tz=UTC)


class MemoryRepeatGate:
    """The same rule in memory, for tests and the backtest."""

    def __init__(self) -> None:
        self.until: dict[str, datetime] = {}
        self.told: dict[str, datetime] = {}

    def sighting(
        self, key: str, now: datetime, window: timedelta, digest_after: timedelta = DIGEST_AFTER
    ) -> Sighting:
        if window <= timedelta(0):
            return Sighting.NEW
        seen = _judge(self.until.get(key), self.told.get(key), now, digest_after)
        self.until[key] = now + window
        if seen is not Sighting.REPEAT:
            self.told[key] = now
        return seen

    def first_in_window(self, key: str, now: datetime, window: timedelta) -> bool:
        """Whether a sighting is news on its own (the backtest counts those)."""
        return self.sighting(key, now, window) is Sighting.NEW
