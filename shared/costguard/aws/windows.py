"""The windowed counts (costguard/windows.py) in the state table, shared by every invocation. The caps are read
from costguard.windows at each call (one place to set them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from costguard import windows
from costguard.aws import clients
from costguard.aws.dynamo import whole_id
from costguard.permissions import needs
from costguard.windows import WindowCount, fingerprint

PERMISSIONS = needs("dynamodb:UpdateItem", "dynamodb:PutItem")


def _epoch(at: datetime) -> str:
    return str(int(at.timestamp()))


class DynamoWindowCounter:
    """One item per key (its id: the key held to DynamoDB's key limit, dynamo.whole_id): the listed members (a
    string set), the fingerprints of the others (a string set), a count of those past both, the window's start
    and its end (also the item's TTL).

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
                Key={"id": {"S": whole_id(key)}},
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
                ReturnValues="ALL_OLD",
            ).get("Attributes", {})
        except dynamodb.exceptions.ConditionalCheckFailedException:
            return None
        return found

    def add(self, key: str, member: str, now: datetime, window: timedelta) -> WindowCount:
        member = member[: windows.MEMBER_CHARS]
        mark = fingerprint(member)
        live = {":now": {"N": _epoch(now)}}
        for _ in range(3):
            old = self._update(
                key,
                "ADD members :member",
                "expiration > :now AND (contains(members, :m) OR size(members) < :listed)",
                live
                | {
                    ":member": {"SS": [member]},
                    ":m": {"S": member},
                    ":listed": {"N": str(windows.LISTED_MEMBERS)},
                },
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
                    ":listed": {"N": str(windows.LISTED_MEMBERS)},
                    ":cap": {"N": str(windows.FINGERPRINTS_MAX)},
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
                    ":listed": {"N": str(windows.LISTED_MEMBERS)},
                    ":cap": {"N": str(windows.FINGERPRINTS_MAX)},
                },
            )
            if old is not None:
                return self._count(key, old, _strings(old, "members"), True, extra=1)
            dynamodb = clients.client("dynamodb")
            try:  # no live window (or it changed between the steps): open one
                dynamodb.put_item(
                    TableName=self.table,
                    Item={
                        "id": {"S": whole_id(key)},
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
