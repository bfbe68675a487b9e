"""Repeat suppression: one message per resource, reason and action within a window."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from costguard.aws import clients


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
                    "id": {"S": f"repeat#{key}"},
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
