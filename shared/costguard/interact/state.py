"""What interactions keep in the state table: requests seen, clicks acted on, and mutes."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from costguard.aws import clients, dynamo
from costguard.permissions import needs

REQUEST_WINDOW = timedelta(minutes=10)  # a replayed signature is refused for twice Slack's 5-minute window
ACTION_RECORD_DAYS = 90

SEEN_PERMISSIONS = needs("dynamodb:PutItem")  # first_delivery
RECORD_PERMISSIONS = needs("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")  # ActionRecord
MUTE_PERMISSIONS = needs("dynamodb:PutItem")  # mute
IS_MUTED_PERMISSIONS = needs("dynamodb:GetItem", "dynamodb:BatchGetItem")  # is_muted, muted


def _epoch(at: datetime) -> str:
    return str(int(at.timestamp()))


def _put_once(table: str, item: dict[str, Any]) -> bool:
    """A conditional put: False when an item of that id is already there."""
    dynamodb = clients.client("dynamodb")
    try:
        dynamodb.put_item(TableName=table, Item=item, ConditionExpression="attribute_not_exists(id)")
    except dynamodb.exceptions.ConditionalCheckFailedException:
        return False
    return True


def first_delivery(table: str, fingerprint: str, now: datetime) -> bool:
    """Whether this signed request (signature and timestamp) is seen for the first time in REQUEST_WINDOW.

    An expired record the table's TTL has not deleted yet still counts as absent."""
    dynamodb = clients.client("dynamodb")
    try:
        dynamodb.put_item(
            TableName=table,
            Item={
                "id": {"S": f"slack-request#{fingerprint}"},
                "expiration": {"N": _epoch(now + REQUEST_WINDOW)},
            },
            ConditionExpression="attribute_not_exists(id) OR expiration < :now",
            ExpressionAttributeValues={":now": {"N": _epoch(now)}},
        )
    except dynamodb.exceptions.ConditionalCheckFailedException:
        return False
    return True


def click_id(user: str, action_id: str, action_ts: str, value: str) -> str:
    """One click, the same however often Slack delivers it (a retry is signed anew, with a new timestamp)."""
    return hashlib.sha256(f"{user}|{action_id}|{action_ts}|{value}".encode()).hexdigest()[:40]


class ActionRecord:
    """``action#<click id>``: who did what to which resource, when, and what came of it. Written before
    acting, so a second delivery of the same click finds it and does nothing."""

    def __init__(self, table: str, click: str) -> None:
        self.table = table
        self.key = {"id": {"S": f"action#{click}"}}

    def start(self, *, user: str, action: str, resource: str, at: datetime) -> bool:
        """False when the click was already acted on (or is being)."""
        return _put_once(
            self.table,
            {
                **self.key,
                "user": {"S": user},
                "action": {"S": action},
                "resource": {"S": resource},
                "at": {"S": at.astimezone(UTC).isoformat()},
                "status": {"S": "started"},
                "expiration": {"N": _epoch(at + timedelta(days=ACTION_RECORD_DAYS))},
            },
        )

    def finish(self, outcome: str, detail: str) -> None:
        clients.client("dynamodb").update_item(
            TableName=self.table,
            Key=self.key,
            UpdateExpression="SET #status = :status, outcome = :detail",
            ExpressionAttributeNames={"#status": "status"},
            ExpressionAttributeValues={":status": {"S": outcome}, ":detail": {"S": detail[:1000]}},
        )

    def forget(self) -> None:
        """The work failed before anything changed: the redelivery may try again."""
        clients.client("dynamodb").delete_item(TableName=self.table, Key=self.key)


def mute_id(resource_key: str, reason: str) -> str:
    """A mute's id: the resource key can be too long for DynamoDB (a hostile name), see dynamo.table_id."""
    return dynamo.table_id("mute#", f"{resource_key}|{reason}")


def mute(table: str, resource_key: str, reason: str, until: datetime, *, by: str) -> None:
    """No message about this resource for this reason until ``until`` (the pipeline asks is_muted/muted)."""
    clients.client("dynamodb").put_item(
        TableName=table,
        Item={
            "id": {"S": mute_id(resource_key, reason)},
            "until": {"S": until.astimezone(UTC).isoformat()},
            "by": {"S": by},
            "expiration": {"N": _epoch(until)},
        },
    )


def _in_force(item: dict[str, Any] | None, now: datetime) -> bool:
    # The table's TTL deletes expired items only eventually: the expiration is checked here too.
    return bool(item) and int(item["expiration"]["N"]) > now.timestamp()  # type: ignore[index]


def is_muted(table: str, resource_key: str, reason: str, now: datetime) -> bool:
    item = clients.client("dynamodb").get_item(
        TableName=table, Key={"id": {"S": mute_id(resource_key, reason)}}, ConsistentRead=True
    )
    return _in_force(item.get("Item"), now)


def muted(table: str, pairs: Iterable[tuple[str, str]], now: datetime) -> set[tuple[str, str]]:
    """The (resource key, reason) pairs muted now, in ceil(pairs/100) BatchGetItem calls (plus retries of
    what DynamoDB leaves unprocessed). A pair whose key is still unprocessed after a few tries is not muted:
    a muted message beats a lost one."""
    wanted = {mute_id(key, reason): (key, reason) for key, reason in pairs}
    items = dynamo.batch_get(clients.client("dynamodb"), table, sorted(wanted), consistent=True)
    return {wanted[item["id"]["S"]] for item in items if _in_force(item, now)}
