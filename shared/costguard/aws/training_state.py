"""Training-job history in the state table: failures per family and finished jobs per day.

Items are read, merged and written back under an optimistic lock (``version``), so two failures of one
family handled at the same moment are both kept. Every item expires through the table's TTL (``expiration``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from costguard.aws import clients
from costguard.detect.job_families import Failure
from costguard.detect.training_guardrails import JobSummary
from costguard.permissions import needs

PERMISSIONS = needs("dynamodb:GetItem", "dynamodb:PutItem")

_ATTEMPTS = 8
_serialize = TypeSerializer().serialize
_deserialize = TypeDeserializer().deserialize


def _plain(value: Any) -> Any:
    """DynamoDB numbers come back as Decimal: back to int or float."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _dynamo(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, dict):
        return {k: _dynamo(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_dynamo(v) for v in value]
    return value


class TrainingState:
    def __init__(self, table: str) -> None:
        self.table = table

    def _merge(
        self, key: str, change: Callable[[dict[str, Any]], dict[str, Any] | None], expires: datetime
    ) -> dict[str, Any]:
        """Apply ``change`` to the item's ``entries`` map and write it back unless it returns None."""
        dynamodb = clients.client("dynamodb")
        for _ in range(_ATTEMPTS):
            found = dynamodb.get_item(TableName=self.table, Key={"id": {"S": key}}, ConsistentRead=True)
            item = found.get("Item")
            version = int(item["version"]["N"]) if item else 0
            entries: dict[str, Any] = (
                _plain(_deserialize(item["entries"])) if item and "entries" in item else {}
            )
            changed = change(dict(entries))
            if changed is None:
                return entries
            condition = "attribute_not_exists(id)" if item is None else "version = :v"
            values = {":v": {"N": str(version)}} if item is not None else {}
            try:
                dynamodb.put_item(
                    TableName=self.table,
                    Item={
                        "id": {"S": key},
                        "entries": _serialize(_dynamo(changed)),
                        "version": {"N": str(version + 1)},
                        "expiration": {"N": str(int(expires.timestamp()))},
                    },
                    ConditionExpression=condition,
                    **({"ExpressionAttributeValues": values} if values else {}),
                )
            except dynamodb.exceptions.ConditionalCheckFailedException:
                continue  # someone else wrote in between: read again
            return changed
        raise RuntimeError(f"state item {key} kept changing under {_ATTEMPTS} attempts")

    # -- failures per family ----------------------------------------------------------------------
    def record_failure(
        self, account: str, region: str, family: str, failure: Failure, window: timedelta, now: datetime
    ) -> tuple[list[Failure], bool]:
        """Keep the failure (once per job name) and return the family's failures within the window, and
        whether this job was new."""
        key = f"failures#{account}#{region}#{family}"
        horizon = max(now, failure.failed_at) - window
        new = False

        def change(entries: dict[str, Any]) -> dict[str, Any] | None:
            nonlocal new
            kept = {k: v for k, v in entries.items() if datetime.fromisoformat(v["failed_at"]) >= horizon}
            if failure.job_name in entries:
                return None if kept == entries else kept
            new = True
            kept[failure.job_name] = {
                "job": failure.job_name,
                "failed_at": failure.failed_at.isoformat(),
                "reason": failure.reason[:1000],
                "cost": failure.cost_usd,
            }
            return kept

        entries = self._merge(key, change, max(now, failure.failed_at) + window + timedelta(days=1))
        failures = [
            Failure(v["job"], datetime.fromisoformat(v["failed_at"]), v["reason"], v.get("cost"))
            for v in entries.values()
        ]
        return sorted(failures, key=lambda f: f.failed_at), new

    # -- finished jobs per day --------------------------------------------------------------------
    def record_finished(self, account: str, region: str, summary: JobSummary) -> None:
        day = summary.ended_at.date()
        key = f"finished#{account}#{region}#{day.isoformat()}"
        item = summary.as_item()

        def change(entries: dict[str, Any]) -> dict[str, Any] | None:
            return None if entries.get(summary.job) == item else entries | {summary.job: item}

        self._merge(
            key,
            change,
            datetime.combine(day, datetime.min.time(), summary.ended_at.tzinfo) + timedelta(days=4),
        )

    def finished_on(self, account: str, region: str, day: date) -> list[JobSummary]:
        found = clients.client("dynamodb").get_item(
            TableName=self.table, Key={"id": {"S": f"finished#{account}#{region}#{day.isoformat()}"}}
        )
        item = found.get("Item")
        if not item or "entries" not in item:
            return []
        return [JobSummary.from_item(v) for v in _plain(_deserialize(item["entries"])).values()]

    def first_digest(self, account: str, region: str, day: date, now: datetime) -> bool:
        """True once per account, region and day: the digest is posted by one scheduled run only."""
        dynamodb = clients.client("dynamodb")
        try:
            dynamodb.put_item(
                TableName=self.table,
                Item={
                    "id": {"S": f"digest#{account}#{region}#{day.isoformat()}"},
                    "expiration": {"N": str(int((now + timedelta(days=4)).timestamp()))},
                },
                ConditionExpression="attribute_not_exists(id)",
            )
        except dynamodb.exceptions.ConditionalCheckFailedException:
            return False
        return True
