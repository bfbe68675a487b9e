"""The adaptive idle policy's per-instance histories (detect/adaptive.py) in the state table.

A sweep reads the histories of the instances it judges in one batched read (BatchGetItem, 100 keys a call) and
writes back only those that changed in one batched write (BatchWriteItem, 25 items a call). Each item holds the
history's compact text (a few hundred bytes) and expires 30 days after its last write, so an instance that is
gone leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Protocol

from costguard.aws import clients, dynamo
from costguard.detect.adaptive import IdleHistory
from costguard.permissions import needs

PERMISSIONS = needs("dynamodb:BatchGetItem", "dynamodb:BatchWriteItem")

KEEP = timedelta(days=30)


def history_key(account: str, region: str, resource_id: str) -> str:
    return f"idle-history#{account}/{region}/{resource_id}"


class IdleHistories(Protocol):
    def read(self, keys: Iterable[str]) -> dict[str, IdleHistory]: ...

    def write(self, changed: Mapping[str, IdleHistory], now: datetime) -> None: ...


class MemoryIdleHistories:
    """The same, in memory (tests, the backtest)."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}

    def read(self, keys: Iterable[str]) -> dict[str, IdleHistory]:
        return {k: IdleHistory.from_text(self.texts[k]) for k in keys if k in self.texts}

    def write(self, changed: Mapping[str, IdleHistory], now: datetime) -> None:
        self.texts.update({k: h.to_text() for k, h in changed.items()})


class DynamoIdleHistories:
    def __init__(self, table: str) -> None:
        self.table = table

    def read(self, keys: Iterable[str]) -> dict[str, IdleHistory]:
        """The stored histories. One DynamoDB leaves unprocessed after a few tries is absent (logged): the sweep
        then starts the instance a new history, written over the stored one."""
        items = dynamo.batch_get(clients.client("dynamodb"), self.table, keys)
        return {
            item["id"]["S"]: IdleHistory.from_text(item.get("history", {}).get("S", "")) for item in items
        }

    def write(self, changed: Mapping[str, IdleHistory], now: datetime) -> None:
        expires = str(int((now + KEEP).timestamp()))
        puts = [
            {
                "PutRequest": {
                    "Item": {
                        "id": {"S": key},
                        "history": {"S": history.to_text()},
                        "expiration": {"N": expires},
                    }
                }
            }
            for key, history in changed.items()
        ]
        # One left unwritten keeps its last stored state: the next sweep observes from there.
        dynamo.batch_write(clients.client("dynamodb"), self.table, puts)
