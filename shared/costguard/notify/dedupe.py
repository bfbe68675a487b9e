"""Repeat suppression: one message per resource, reason and action within a window."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Protocol

from costguard.aws import clients
from costguard.permissions import needs

PERMISSIONS = needs("dynamodb:PutItem")  # DynamoRepeatGate: one conditional put

# DynamoDB refuses partition keys over 2048 bytes; a key built from a hostile resource id can be longer.
_MAX_KEY_BYTES = 1024


def _table_key(key: str) -> str:
    encoded = key.encode("utf-8", "surrogatepass")
    if len(encoded) <= _MAX_KEY_BYTES:
        return f"repeat#{key}"
    return f"repeat#sha256:{hashlib.sha256(encoded).hexdigest()}"


class RepeatGate(Protocol):
    def first_in_window(self, key: str, now: datetime, window: timedelta) -> bool: ...


class DynamoRepeatGate:
    """A conditional put on the state table: it succeeds only if no live entry holds the key."""

    def __init__(self, table: str) -> None:
        self.table = table

    def first_in_window(self, key: str, now: datetime, window: timedelta) -> bool:
        if window <= timedelta(0):
            return True
        dynamodb = clients.client("dynamodb")
        try:
            dynamodb.put_item(
                TableName=self.table,
                Item={
                    "id": {"S": _table_key(key)},
                    "expiration": {"N": str(int((now + window).timestamp()))},
                },
                ConditionExpression="attribute_not_exists(id) OR expiration <= :now",
                ExpressionAttributeValues={":now": {"N": str(int(now.timestamp()))}},
            )
        except dynamodb.exceptions.ConditionalCheckFailedException:
            return False
        return True


class MemoryRepeatGate:
    """The same rule in memory, for tests and the backtest."""

    def __init__(self) -> None:
        self.until: dict[str, datetime] = {}

    def first_in_window(self, key: str, now: datetime, window: timedelta) -> bool:
        if window > timedelta(0) and self.until.get(key, now) > now:
            return False
        self.until[key] = now + window
        return True
