"""The read schedule's entries (detect/read_schedule.py) in the state table.

The entries of one account and region are spread over ``SHARDS`` items by a hash of the instance id: a sweep
reads them all in one BatchGetItem and writes back, in one BatchWriteItem call per 25, only the items whose
entries changed. An entry is a few dozen bytes, so an item stays far under DynamoDB's 400 KB at 100,000
instances, and a fleet whose instances say the same as at the last sweep costs no write at all but a standing
idle finding's next slot, once an idle window.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Protocol

from costguard.aws import clients, dynamo
from costguard.detect.read_schedule import Entry
from costguard.permissions import needs

PERMISSIONS = needs("dynamodb:BatchGetItem", "dynamodb:BatchWriteItem")

SHARDS = 64


def shard_of(instance_id: str) -> int:
    digest = hashlib.blake2b(instance_id.encode("utf-8", "surrogatepass"), digest_size=4).digest()
    return int.from_bytes(digest, "big") % SHARDS


def _key(account: str, region: str, shard: int) -> str:
    return dynamo.table_id("read-plan#", f"{account}/{region}/{shard}")


def changed_shards(before: Mapping[str, Entry], after: Mapping[str, Entry]) -> set[int]:
    """The shards whose entries differ (an entry added, changed or gone)."""
    return {shard_of(i) for i in before.keys() | after.keys() if before.get(i) != after.get(i)}


class ReadPlans(Protocol):
    def read(self, account: str, region: str) -> dict[str, Entry]: ...

    def write(
        self, account: str, region: str, before: Mapping[str, Entry], after: Mapping[str, Entry]
    ) -> int:
        """Store ``after``, writing only what differs from ``before``; returns the items written."""
        ...


class MemoryReadPlans:
    """The same, in memory (tests)."""

    def __init__(self) -> None:
        self.entries: dict[tuple[str, str], dict[str, Entry]] = {}
        self.items_written = 0

    def read(self, account: str, region: str) -> dict[str, Entry]:
        return dict(self.entries.get((account, region), {}))

    def write(
        self, account: str, region: str, before: Mapping[str, Entry], after: Mapping[str, Entry]
    ) -> int:
        written = len(changed_shards(before, after))
        self.items_written += written
        self.entries[(account, region)] = dict(after)
        return written


class DynamoReadPlans:
    def __init__(self, table: str) -> None:
        self.table = table

    def read(self, account: str, region: str) -> dict[str, Entry]:
        """The stored entries; those of a shard DynamoDB leaves unprocessed are absent (each such instance is
        simply read)."""
        ids = [_key(account, region, n) for n in range(SHARDS)]
        entries: dict[str, Entry] = {}
        for item in dynamo.batch_get(clients.client("dynamodb"), self.table, ids):
            for instance_id, text in item.get("entries", {}).get("M", {}).items():
                entry = Entry.decode(text.get("S", ""))
                if entry is not None:  # unreadable: the instance is simply read
                    entries[instance_id] = entry
        return entries

    def write(
        self, account: str, region: str, before: Mapping[str, Entry], after: Mapping[str, Entry]
    ) -> int:
        shards = sorted(changed_shards(before, after))
        by_shard: dict[int, dict[str, Any]] = {n: {} for n in shards}
        for instance_id, entry in after.items():
            shard = shard_of(instance_id)
            if shard in by_shard:
                by_shard[shard][instance_id] = {"S": entry.encode()}
        puts = [
            {"PutRequest": {"Item": {"id": {"S": _key(account, region, n)}, "entries": {"M": by_shard[n]}}}}
            for n in shards
        ]
        # A shard left unwritten keeps its entries of the last write, lower bounds still (see Planner.save).
        return len(puts) - dynamo.batch_write(clients.client("dynamodb"), self.table, puts)
