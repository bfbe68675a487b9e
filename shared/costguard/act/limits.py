"""The per-hour stop cap, counted in the state table so every invocation shares it."""

from __future__ import annotations

from datetime import datetime, timedelta

from costguard.aws import clients
from costguard.permissions import needs

# DynamoStopLimiter.acquire and release; GetItem: whether an hour found full has room again.
PERMISSIONS = needs("dynamodb:UpdateItem", "dynamodb:GetItem")


class DynamoStopLimiter:
    """One counter item per clock hour; a conditional increment refuses once the cap is reached.

    A stop held back by the cap is decided again at every sweep until the hour turns. Once this process has found
    the hour full, it does not try the increment again (a refused conditional write is still a write): later stops
    of the same run are refused without a call, and those of a later run read the counter first and write only if
    a place came free (a refused stop gave its place back)."""

    def __init__(self, table: str, per_hour: int) -> None:
        self.table = table
        self.per_hour = per_hour
        self._full: tuple[str, datetime] | None = None  # the hour found full, and the run that found it

    def acquire(self, at: datetime) -> bool:
        if self.per_hour <= 0:
            return False
        dynamodb = clients.client("dynamodb")
        hour = at.strftime("%Y-%m-%dT%H")
        full = self._full is not None and self._full[0] == hour
        if full and (self._full == (hour, at) or self._taken(hour) >= self.per_hour):
            return False
        try:
            dynamodb.update_item(
                TableName=self.table,
                Key={"id": {"S": f"stops#{hour}"}},
                UpdateExpression="ADD stops :one SET expiration = :expires",
                ConditionExpression="attribute_not_exists(stops) OR stops < :cap",
                ExpressionAttributeValues={
                    ":one": {"N": "1"},
                    ":cap": {"N": str(self.per_hour)},
                    ":expires": {"N": str(int((at + timedelta(days=2)).timestamp()))},
                },
            )
        except dynamodb.exceptions.ConditionalCheckFailedException:
            self._full = (hour, at)
            return False
        self._full = None  # a place was had: the hour is not known full any more
        return True

    def _taken(self, hour: str) -> int:
        item = (
            clients.client("dynamodb")
            .get_item(TableName=self.table, Key={"id": {"S": f"stops#{hour}"}}, ConsistentRead=True)
            .get("Item", {})
        )
        return int(item.get("stops", {}).get("N", "0"))

    def release(self, at: datetime) -> None:
        """One stop of the hour given back (AWS refused it): a conditional decrement, never below zero."""
        self._full = None
        dynamodb = clients.client("dynamodb")
        try:
            dynamodb.update_item(
                TableName=self.table,
                Key={"id": {"S": f"stops#{at.strftime('%Y-%m-%dT%H')}"}},
                UpdateExpression="ADD stops :minus_one",
                ConditionExpression="stops > :zero",
                ExpressionAttributeValues={":minus_one": {"N": "-1"}, ":zero": {"N": "0"}},
            )
        except dynamodb.exceptions.ConditionalCheckFailedException:
            return


class MemoryStopLimiter:
    def __init__(self, per_hour: int) -> None:
        self.per_hour = per_hour
        self.counts: dict[str, int] = {}

    def acquire(self, at: datetime) -> bool:
        hour = at.strftime("%Y-%m-%dT%H")
        if self.counts.get(hour, 0) >= self.per_hour:
            return False
        self.counts[hour] = self.counts.get(hour, 0) + 1
        return True

    def release(self, at: datetime) -> None:
        hour = at.strftime("%Y-%m-%dT%H")
        if self.counts.get(hour, 0) > 0:
            self.counts[hour] -= 1
