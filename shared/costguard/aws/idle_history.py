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

from costguard.aws import clients
from costguard.detect.adaptive import IdleHistory
from costguard.permissions import needs

PERMISSIONS = needs("dynamodb:BatchGetItem", "dynamodb:BatchWriteItem")

KEEP = timedelta(days=30)
_READ_BATCH, _WRITE_BATCH, _ATTEMPTS = 100, 25, 5


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
        wanted = list(dict.fromkeys(keys))
        found: dict[str, IdleHistory] = {}
        dynamodb = clients.client("dynamodb")
        for start in range(0, len(wanted), _READ_BATCH):
            request = {self.table: {"Keys": [{"id": {"S": k}} for k in wanted[start : start + _READ_BATCH]]}}
            for _ in range(_ATTEMPTS):  # DynamoDB may leave keys unprocessed under load: asked again
                answer = dynamodb.batch_get_item(RequestItems=request)
                for item in answer.get("Responses", {}).get(self.table, []):
                    found[item["id"]["S"]] = IdleHistory.from_text(item.get("history", {}).get("S", ""))
                request = answer.get("UnprocessedKeys") or {}
                if not request:
                    break
        return found

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
        dynamodb = clients.client("dynamodb")
        for start in range(0, len(puts), _WRITE_BATCH):
            request = {self.table: puts[start : start + _WRITE_BATCH]}
            for _ in range(_ATTEMPTS):
                request = dynamodb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
                if not request:
                    break
