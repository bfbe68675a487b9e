"""Training-job history in the state table: failures per family and finished jobs per day.

Items are read, merged and written back under an optimistic lock (``version``), so two failures of one
family handled at the same moment are both kept. Every item expires through the table's TTL (``expiration``),
and none grows without bound (DynamoDB refuses an item over 400 KB): each keeps a bounded number of entries
one by one and sums the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta
from decimal import Decimal
from functools import cache
from typing import Any

from costguard.aws import clients
from costguard.aws.dynamo import table_id
from costguard.detect.job_families import Failure, FailureHistory
from costguard.detect.training_guardrails import FinishedRest, JobSummary, with_finished
from costguard.permissions import needs

PERMISSIONS = needs("dynamodb:GetItem", "dynamodb:PutItem")

_ATTEMPTS = 8


@cache
def _types() -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """boto3's DynamoDB type (de)serializers, loaded with the first item: importing boto3 is the first client's."""
    from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

    return TypeSerializer().serialize, TypeDeserializer().deserialize


def _serialize(value: Any) -> Any:
    return _types()[0](value)


def _deserialize(value: Any) -> Any:
    return _types()[1](value)


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


_KEY_ATTRIBUTES = {"id", "version", "expiration"}


def _day_id(prefix: str, account: str, region: str, day: date) -> str:
    """A day's item of an account and region (an event's own account and region: held to the key limit too)."""
    return table_id(prefix, f"{account}#{region}#{day.isoformat()}")


class TrainingState:
    def __init__(self, table: str) -> None:
        self.table = table

    def _merge(
        self, key: str, change: Callable[[dict[str, Any]], dict[str, Any] | None], expires: datetime
    ) -> dict[str, Any]:
        """Apply ``change`` to the item's data attributes and write them back unless it returns None."""
        dynamodb = clients.client("dynamodb")
        for _ in range(_ATTEMPTS):
            found = dynamodb.get_item(TableName=self.table, Key={"id": {"S": key}}, ConsistentRead=True)
            item = found.get("Item")
            version = int(item["version"]["N"]) if item else 0
            data: dict[str, Any] = {
                k: _plain(_deserialize(v)) for k, v in (item or {}).items() if k not in _KEY_ATTRIBUTES
            }
            changed = change(dict(data))
            if changed is None:
                return data
            condition = "attribute_not_exists(id)" if item is None else "version = :v"
            values = {":v": {"N": str(version)}} if item is not None else {}
            try:
                dynamodb.put_item(
                    TableName=self.table,
                    Item={
                        "id": {"S": key},
                        **{k: _serialize(_dynamo(v)) for k, v in changed.items()},
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
    ) -> tuple[FailureHistory, bool]:
        """Keep the failure (once per job name) and return the family's history, and whether this job was new.

        The item stays small: the latest failures one by one (``entries``, by job name), the earlier ones of
        the window summed per time slot (``earlier``); see detect.job_families.FailureHistory."""
        key = table_id("failures#", f"{account}#{region}#{family}")  # a family is a tag or a job's name
        new = False

        def change(data: dict[str, Any]) -> dict[str, Any] | None:
            nonlocal new
            before = _history(data)
            after, new = before.add(failure, now, window)
            if after == before:
                return None
            entries, earlier = after.as_item()
            return {"entries": entries, "earlier": earlier}

        data = self._merge(key, change, max(now, failure.failed_at) + window + timedelta(days=1))
        return _history(data), new

    # -- finished jobs per day --------------------------------------------------------------------
    def record_finished(self, account: str, region: str, summary: JobSummary) -> None:
        """Keep the finished job (once per job name): the day's costliest one by one (``entries``), the rest
        summed (``rest``); see detect.training_guardrails.with_finished."""
        day = summary.ended_at.date()
        key = _day_id("finished#", account, region, day)

        def change(data: dict[str, Any]) -> dict[str, Any] | None:
            kept, rest = _finished(data)
            changed = with_finished(kept, rest, summary)
            if changed is None:
                return None
            jobs, rest = changed
            return {"entries": {k: v.as_item() for k, v in jobs.items()}, "rest": rest.as_item()}

        self._merge(
            key,
            change,
            datetime.combine(day, datetime.min.time(), summary.ended_at.tzinfo) + timedelta(days=4),
        )

    def finished_on(self, account: str, region: str, day: date) -> tuple[list[JobSummary], FinishedRest]:
        """The day's finished jobs kept one by one, and the others summed."""
        found = clients.client("dynamodb").get_item(
            TableName=self.table, Key={"id": {"S": _day_id("finished#", account, region, day)}}
        )
        item = found.get("Item") or {}
        kept, rest = _finished(
            {k: _plain(_deserialize(v)) for k, v in item.items() if k not in _KEY_ATTRIBUTES}
        )
        return list(kept.values()), rest

    def first_digest(self, account: str, region: str, day: date, now: datetime) -> bool:
        """True once per account, region and day: the digest is posted by one scheduled run only."""
        dynamodb = clients.client("dynamodb")
        try:
            dynamodb.put_item(
                TableName=self.table,
                Item={
                    "id": {"S": _day_id("digest#", account, region, day)},
                    "expiration": {"N": str(int((now + timedelta(days=4)).timestamp()))},
                },
                ConditionExpression="attribute_not_exists(id)",
            )
        except dynamodb.exceptions.ConditionalCheckFailedException:
            return False
        return True


def _history(data: dict[str, Any]) -> FailureHistory:
    return FailureHistory.from_item(data.get("entries") or {}, data.get("earlier") or [])


def _finished(data: dict[str, Any]) -> tuple[dict[str, JobSummary], FinishedRest]:
    kept = {k: JobSummary.from_item(v) for k, v in (data.get("entries") or {}).items()}
    return kept, FinishedRest.from_item(data.get("rest"))
