"""Windowed counts of distinct things (failed jobs per Batch queue, interruptions per workload) in the state
table, so every invocation shares them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from costguard.aws import clients
from costguard.permissions import needs

PERMISSIONS = needs("dynamodb:UpdateItem", "dynamodb:PutItem")


@dataclass(frozen=True)
class WindowCount:
    """The members counted under one key in its current window."""

    key: str
    members: frozenset[str]
    started_at: datetime
    expires_at: datetime
    added: bool  # this call counted a member not seen before in the window

    @property
    def count(self) -> int:
        return len(self.members)

    def reached(self, threshold: int) -> bool:
        """True for exactly one new member per window: the one that brings the count to ``threshold``."""
        return self.added and self.count == threshold


class WindowCounter(Protocol):
    def add(self, key: str, member: str, now: datetime, window: timedelta) -> WindowCount: ...


def _epoch(at: datetime) -> str:
    return str(int(at.timestamp()))


class DynamoWindowCounter:
    """One item per key: a string set of members, the window's start and its end (also the item's TTL).

    The window opens with the first member and lasts ``window``; TTL deletes lazily, so expiry is checked here.
    Adding to a string set is atomic, so concurrent invocations never lose or double-count a member.
    """

    def __init__(self, table: str) -> None:
        self.table = table

    def add(self, key: str, member: str, now: datetime, window: timedelta) -> WindowCount:
        dynamodb = clients.client("dynamodb")
        for _ in range(3):
            try:
                old = dynamodb.update_item(
                    TableName=self.table,
                    Key={"id": {"S": key}},
                    UpdateExpression="ADD members :member",
                    ConditionExpression="expiration > :now",
                    ExpressionAttributeValues={":member": {"SS": [member]}, ":now": {"N": _epoch(now)}},
                    ReturnValues="ALL_OLD",
                ).get("Attributes", {})
            except dynamodb.exceptions.ConditionalCheckFailedException:
                pass  # no live window: open one
            else:
                before = frozenset(old.get("members", {}).get("SS", []))
                return WindowCount(
                    key=key,
                    members=before | {member},
                    started_at=datetime.fromtimestamp(int(old["started"]["N"]), UTC),
                    expires_at=datetime.fromtimestamp(int(old["expiration"]["N"]), UTC),
                    added=member not in before,
                )
            try:
                dynamodb.put_item(
                    TableName=self.table,
                    Item={
                        "id": {"S": key},
                        "members": {"SS": [member]},
                        "started": {"N": _epoch(now)},
                        "expiration": {"N": _epoch(now + window)},
                    },
                    ConditionExpression="attribute_not_exists(id) OR expiration <= :now",
                    ExpressionAttributeValues={":now": {"N": _epoch(now)}},
                )
            except dynamodb.exceptions.ConditionalCheckFailedException:
                continue  # another invocation opened the window first: add to it
            start = datetime.fromtimestamp(int(_epoch(now)), UTC)
            return WindowCount(key, frozenset({member}), start, start + window, added=True)
        raise RuntimeError(f"could not count {member!r} under {key!r}: the window kept changing")


class MemoryWindowCounter:
    """The same rule in memory, for tests."""

    def __init__(self) -> None:
        self.windows: dict[str, WindowCount] = {}

    def add(self, key: str, member: str, now: datetime, window: timedelta) -> WindowCount:
        current = self.windows.get(key)
        if current is None or current.expires_at <= now:
            current = WindowCount(key, frozenset(), now, now + window, added=False)
        counted = WindowCount(
            key,
            current.members | {member},
            current.started_at,
            current.expires_at,
            member not in current.members,
        )
        self.windows[key] = counted
        return counted
