"""Windowed counts of distinct things (failed jobs per Batch queue, interruptions per workload) in the state
table, so every invocation shares them.

An item never outgrows DynamoDB's 400 KB: it lists at most ``LISTED_MEMBERS`` members by name, remembers up to
``FINGERPRINTS_MAX`` more by an 8-character fingerprint (so each is still counted once), and past that only
counts (a member seen again then counts again; the threshold settings stay far below that point).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from costguard.aws import clients
from costguard.permissions import needs

PERMISSIONS = needs("dynamodb:UpdateItem", "dynamodb:PutItem")

LISTED_MEMBERS = 50  # members kept by name (shown in alerts)
FINGERPRINTS_MAX = 4000  # members beyond those kept by fingerprint: 8 bytes each, 32 KB at most
MEMBER_CHARS = 300  # a member's name is cut to this length
FINGERPRINT_CHARS = 8


def fingerprint(value: str) -> str:
    """A short fixed-width stand-in for a name: 48 bits of BLAKE2b, 8 URL-safe characters."""
    return base64.urlsafe_b64encode(hashlib.blake2b(value.encode(), digest_size=6).digest()).decode()


def has_fingerprint(blob: str, value: str) -> bool:
    """Whether a string of fingerprints end to end holds ``value``'s (found at a fingerprint boundary)."""
    mark = fingerprint(value)
    at = blob.find(mark)
    while at != -1:
        if at % FINGERPRINT_CHARS == 0:
            return True
        at = blob.find(mark, at + 1)
    return False


@dataclass(frozen=True)
class WindowCount:
    """The members counted under one key in its current window."""

    key: str
    members: frozenset[str]  # the members listed by name (at most LISTED_MEMBERS)
    started_at: datetime
    expires_at: datetime
    added: bool  # this call counted a member not seen before in the window
    unlisted: int = 0  # members counted beyond those listed

    @property
    def count(self) -> int:
        return len(self.members) + self.unlisted

    def reached(self, threshold: int) -> bool:
        """True for exactly one new member per window: the one that brings the count to ``threshold``."""
        return self.added and self.count == threshold


class WindowCounter(Protocol):
    def add(self, key: str, member: str, now: datetime, window: timedelta) -> WindowCount: ...


def _epoch(at: datetime) -> str:
    return str(int(at.timestamp()))


class DynamoWindowCounter:
    """One item per key: the listed members (a string set), the fingerprints of the others (a string set), a
    count of those past both, the window's start and its end (also the item's TTL).

    The window opens with the first member and lasts ``window``; TTL deletes lazily, so expiry is checked here.
    Each step is one conditional atomic update of one attribute, so concurrent invocations never lose or
    double-count a member: a new member goes to the list while it has room, else to the fingerprints while
    they have room, else to the plain count.
    """

    def __init__(self, table: str) -> None:
        self.table = table

    def _update(
        self, key: str, expression: str, condition: str, values: dict[str, Any]
    ) -> dict[str, Any] | None:
        dynamodb = clients.client("dynamodb")
        try:
            found: dict[str, Any] = dynamodb.update_item(
                TableName=self.table,
                Key={"id": {"S": key}},
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_OLD",
            ).get("Attributes", {})
        except dynamodb.exceptions.ConditionalCheckFailedException:
            return None
        return found

    def add(self, key: str, member: str, now: datetime, window: timedelta) -> WindowCount:
        member = member[:MEMBER_CHARS]
        mark = fingerprint(member)
        live = {":now": {"N": _epoch(now)}}
        for _ in range(3):
            old = self._update(
                key,
                "ADD members :member",
                "expiration > :now AND (contains(members, :m) OR size(members) < :listed)",
                live
                | {":member": {"SS": [member]}, ":m": {"S": member}, ":listed": {"N": str(LISTED_MEMBERS)}},
            )
            if old is not None:
                before = _strings(old, "members")
                return self._count(key, old, before | {member}, member not in before)
            old = self._update(
                key,
                "ADD seen :mark",
                "expiration > :now AND size(members) >= :listed AND "
                "(attribute_not_exists(seen) OR contains(seen, :f) OR size(seen) < :cap)",
                live
                | {
                    ":mark": {"SS": [mark]},
                    ":f": {"S": mark},
                    ":listed": {"N": str(LISTED_MEMBERS)},
                    ":cap": {"N": str(FINGERPRINTS_MAX)},
                },
            )
            if old is not None:
                new = mark not in _strings(old, "seen")
                return self._count(key, old, _strings(old, "members"), new, extra=int(new))
            old = self._update(
                key,
                "ADD overflow :one",
                "expiration > :now AND size(members) >= :listed AND size(seen) >= :cap "
                "AND NOT contains(seen, :f) AND NOT contains(members, :m)",
                live
                | {
                    ":one": {"N": "1"},
                    ":f": {"S": mark},
                    ":m": {"S": member},
                    ":listed": {"N": str(LISTED_MEMBERS)},
                    ":cap": {"N": str(FINGERPRINTS_MAX)},
                },
            )
            if old is not None:
                return self._count(key, old, _strings(old, "members"), True, extra=1)
            dynamodb = clients.client("dynamodb")
            try:  # no live window (or it changed between the steps): open one
                dynamodb.put_item(
                    TableName=self.table,
                    Item={
                        "id": {"S": key},
                        "members": {"SS": [member]},
                        "started": {"N": _epoch(now)},
                        "expiration": {"N": _epoch(now + window)},
                    },
                    ConditionExpression="attribute_not_exists(id) OR expiration <= :now",
                    ExpressionAttributeValues=live,
                )
            except dynamodb.exceptions.ConditionalCheckFailedException:
                continue  # another invocation opened the window first: add to it
            start = datetime.fromtimestamp(int(_epoch(now)), UTC)
            return WindowCount(key, frozenset({member}), start, start + window, added=True)
        raise RuntimeError(f"could not count {member!r} under {key!r}: the window kept changing")

    @staticmethod
    def _count(
        key: str, old: dict[str, Any], members: frozenset[str], added: bool, extra: int = 0
    ) -> WindowCount:
        unlisted = len(_strings(old, "seen")) + int(old.get("overflow", {}).get("N", "0")) + extra
        return WindowCount(
            key=key,
            members=members,
            started_at=datetime.fromtimestamp(int(old["started"]["N"]), UTC),
            expires_at=datetime.fromtimestamp(int(old["expiration"]["N"]), UTC),
            added=added,
            unlisted=unlisted,
        )


def _strings(item: dict[str, Any], name: str) -> frozenset[str]:
    return frozenset(item.get(name, {}).get("SS", []))


@dataclass
class _Window:
    started_at: datetime
    expires_at: datetime
    members: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)
    overflow: int = 0


class MemoryWindowCounter:
    """The same rule in memory, for tests."""

    def __init__(self) -> None:
        self.windows: dict[str, _Window] = {}

    def add(self, key: str, member: str, now: datetime, window: timedelta) -> WindowCount:
        member = member[:MEMBER_CHARS]
        current = self.windows.get(key)
        if current is None or current.expires_at <= now:
            current = self.windows[key] = _Window(now, now + window)
        mark = fingerprint(member)
        if member in current.members or mark in current.seen:
            added = False
        elif len(current.members) < LISTED_MEMBERS:
            current.members.add(member)
            added = True
        elif len(current.seen) < FINGERPRINTS_MAX:
            current.seen.add(mark)
            added = True
        else:
            current.overflow += 1
            added = True
        return WindowCount(
            key,
            frozenset(current.members),
            current.started_at,
            current.expires_at,
            added,
            unlisted=len(current.seen) + current.overflow,
        )
