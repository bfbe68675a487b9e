"""The savings ledger's store: one item per action in the state table, read one query per team.

- ``ledger#<decision id>``: the entry (ledger.Entry), written once when the action succeeds (a redelivered event
  writes nothing more: the decision's id is stable), with ``ledger_team`` and ``ledger_at`` (``<ISO time>#<id>``),
  the keys of the table's sparse ``ledger`` index: a team's entries of a period are one Query;
- ``ledger-open#<mode>#<resource key>``: the id of the resource's entry still open (``acted``, or ``would`` in
  notify mode), so that its return closes it, and no second entry counts the same hours;
- ``ledger-teams``: the set of teams with entries (one GetItem, then a Query per team).

Each item expires after the retention (``COSTGUARD_LEDGER_RETENTION_DAYS``, 400 by default). A write that fails is
logged and never fails the action: the ledger counts what was done, it does not decide anything.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from costguard.aws import clients
from costguard.aws.dynamo import batch_get, table_id
from costguard.events.common import to_datetime
from costguard.ledger import ACTED, Entry, entry_for
from costguard.model import Decision
from costguard.permissions import needs

WRITE_PERMISSIONS = needs(
    "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:GetItem", "dynamodb:DeleteItem"
)
READ_PERMISSIONS = needs("dynamodb:GetItem", "dynamodb:Query")
# returns: the open markers of the resources a sweep sees running, one BatchGetItem per 100, and a close each.
RETURN_PERMISSIONS = needs("dynamodb:BatchGetItem") | WRITE_PERMISSIONS
INDEX = "ledger"
ENTRY, OPEN, TEAMS = "ledger#", "ledger-open#", "ledger-teams"
RETENTION_DAYS = 400
_TEXT = ("id", "account", "region", "kind", "resource_id", "name", "team", "owner", "reason", "mode")
_TIMES = ("at", "planned_end", "returned_at")


class Ledger(Protocol):
    """Where the actions' entries are kept."""

    def record(self, decision: Decision) -> None: ...

    def returned(self, resource_key: str, at: datetime, mode: str = ACTED) -> Entry | None: ...

    def entries(
        self, since: datetime, until: datetime, teams: Sequence[str] | None = None
    ) -> list[Entry]: ...

    def returns(self, seen: Mapping[str, datetime], mode: str = ACTED) -> list[Entry]: ...


def stamp(at: datetime) -> str:
    """A time as the index sorts it: UTC, to the second (ISO 8601 text orders as time then)."""
    return at.astimezone(UTC).isoformat(timespec="seconds")


def open_id(mode: str, resource_key: str) -> str:
    """The id of a resource's open entry of a mode (``acted``, ``would``)."""
    return table_id(f"{OPEN}{mode}#", resource_key)


def item_of(entry: Entry, retention: timedelta) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": {"S": ENTRY + entry.id},
        "ledger_team": {"S": entry.team},
        "ledger_at": {"S": f"{stamp(entry.at)}#{entry.id}"},
        "expiration": {"N": str(int((entry.at + retention).timestamp()))},
    }
    for name in _TEXT:
        value = getattr(entry, name)
        if value:
            item[f"e_{name}"] = {"S": str(value)[:1000]}
    for name in _TIMES:
        value = getattr(entry, name)
        if value is not None:
            item[f"e_{name}"] = {"S": stamp(value)}
    if entry.hourly_usd is not None:
        item["e_hourly_usd"] = {"N": repr(float(entry.hourly_usd))}
    return item


def entry_of(item: dict[str, Any]) -> Entry:
    def text(name: str) -> str | None:
        value = item.get(f"e_{name}", {}).get("S")
        return str(value) if value is not None else None

    def time(name: str) -> datetime | None:
        value = text(name)
        return to_datetime(value) if value else None

    rate = item.get("e_hourly_usd", {}).get("N")
    at = time("at")
    assert at is not None  # every entry is written with its time
    return Entry(
        id=text("id") or "",
        at=at,
        account=text("account") or "",
        region=text("region") or "",
        kind=text("kind") or "",
        resource_id=text("resource_id") or "",
        name=text("name") or "",
        team=text("team") or "",
        owner=text("owner"),
        reason=text("reason") or "",
        mode=text("mode") or "",
        hourly_usd=float(rate) if rate is not None else None,
        planned_end=time("planned_end"),
        returned_at=time("returned_at"),
    )


class DynamoLedger:
    """The ledger in the state table."""

    def __init__(self, table: str, *, team_key: str = "team", retention_days: int = RETENTION_DAYS) -> None:
        self.table = table
        self.team_key = team_key
        self.retention = timedelta(days=retention_days)

    def record(self, decision: Decision) -> None:
        """Write the entry of a stop made (or, a dry run, kept): once per decision, and none while the resource
        has an entry of the same mode still open (a second stop of it in the same run, or a dry run's later stop
        of it for another reason, would count the same hours twice). A live stop of a resource whose entry is
        still open, started again since (its LaunchTime after that entry), closes that entry there first: its
        return was not seen (its mark was taken off), but a resource stopped now was running."""
        entry = entry_for(decision, team_key=self.team_key)
        dynamodb = clients.client("dynamodb")
        started = decision.resource.started
        if not self._open(entry):
            back = entry.mode == ACTED and started is not None and started <= entry.at
            if not (back and started and self.returned(entry.resource_key, started) and self._open(entry)):
                return  # open already: the same resource off
        try:
            dynamodb.put_item(
                TableName=self.table,
                Item=item_of(entry, self.retention),
                ConditionExpression="attribute_not_exists(id)",
            )
        except dynamodb.exceptions.ConditionalCheckFailedException:
            return  # this decision recorded already (a redelivery)
        dynamodb.update_item(
            TableName=self.table,
            Key={"id": {"S": TEAMS}},
            UpdateExpression="ADD teams :team",
            ExpressionAttributeValues={":team": {"SS": [entry.team]}},
        )

    def _open(self, entry: Entry) -> bool:
        """Point the resource's open marker at this entry; False when another entry holds it."""
        dynamodb = clients.client("dynamodb")
        try:
            dynamodb.put_item(
                TableName=self.table,
                Item={
                    "id": {"S": open_id(entry.mode, entry.resource_key)},
                    "entry": {"S": ENTRY + entry.id},
                    "expiration": {"N": str(int((entry.at + self.retention).timestamp()))},
                },
                ConditionExpression="attribute_not_exists(id) OR entry = :entry",
                ExpressionAttributeValues={":entry": {"S": ENTRY + entry.id}},
            )
        except dynamodb.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def returned(self, resource_key: str, at: datetime, mode: str = ACTED) -> Entry | None:
        """Close the resource's open entry of ``mode``: it came back (or, a dry run's, worked again) at ``at``.
        None when it has none open, or when ``at`` is before that entry (not a return: the marker stays)."""
        dynamodb = clients.client("dynamodb")
        marker = open_id(mode, resource_key)
        found = dynamodb.get_item(TableName=self.table, Key={"id": {"S": marker}}, ConsistentRead=True)
        entry_id = found.get("Item", {}).get("entry", {}).get("S")
        if not entry_id:
            return None
        try:
            updated = dynamodb.update_item(
                TableName=self.table,
                Key={"id": {"S": entry_id}},
                UpdateExpression="SET e_returned_at = :at",
                ConditionExpression="attribute_exists(id) AND attribute_not_exists(e_returned_at) AND e_at <= :at",
                ExpressionAttributeValues={":at": {"S": stamp(at)}},
                ReturnValues="ALL_NEW",
            )
        except dynamodb.exceptions.ConditionalCheckFailedException:
            current = dynamodb.get_item(TableName=self.table, Key={"id": {"S": entry_id}}).get("Item")
            if current is not None and "e_returned_at" not in current:
                return None  # dated before the action: not its return
            updated = None  # closed already, or gone (expired): the marker is stale
        dynamodb.delete_item(TableName=self.table, Key={"id": {"S": marker}})
        return entry_of(updated["Attributes"]) if updated else None

    def returns(self, seen: Mapping[str, datetime], mode: str = ACTED) -> list[Entry]:
        """Close the open entries of the resources a sweep sees running again, each at the time given (when its
        run began, as AWS or Kubernetes wrote it, or the sweep's own time): one consistent BatchGetItem per 100
        resources for their open markers, then a close (returned) for each one open. The closed entries."""
        markers = {open_id(mode, key): key for key in seen}
        found = batch_get(
            clients.client("dynamodb"), self.table, markers, consistent=True, attributes=("id",)
        )
        closed = []
        for item in found:
            key = markers[item["id"]["S"]]
            entry = self.returned(key, seen[key], mode)
            if entry is not None:
                closed.append(entry)
        return closed

    def entries(self, since: datetime, until: datetime, teams: Sequence[str] | None = None) -> list[Entry]:
        """The entries of ``since`` to ``until``: one GetItem for the teams (unless given), a Query per team."""
        dynamodb = clients.client("dynamodb")
        if teams is None:
            got = dynamodb.get_item(TableName=self.table, Key={"id": {"S": TEAMS}}, ConsistentRead=True)
            teams = sorted(got.get("Item", {}).get("teams", {}).get("SS", []))
        found: list[Entry] = []
        for team in teams:
            pages = dynamodb.get_paginator("query").paginate(
                TableName=self.table,
                IndexName=INDEX,
                KeyConditionExpression="ledger_team = :team AND ledger_at BETWEEN :since AND :until",
                ExpressionAttributeValues={
                    ":team": {"S": team},
                    ":since": {"S": stamp(since)},
                    ":until": {"S": stamp(until) + "#~"},
                },
            )
            found += [entry_of(item) for page in pages for item in page.get("Items", [])]
        return sorted(found, key=lambda e: (e.at, e.id))
