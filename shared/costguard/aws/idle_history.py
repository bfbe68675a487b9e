"""The adaptive idle policy's state in the state table: per-resource histories and the fleet's pooled priors.

A sweep reads the histories of the resources it judges and the pools of their peer groups (detect/idle_priors.py)
in one batched read (BatchGetItem, 100 keys a call) and writes back only those that changed in one batched write
(BatchWriteItem, 25 items a call). A history holds its compact text (a few hundred bytes), a pool a few KB; each
item expires 30 days after its last write, so a resource or group that is gone leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from costguard.aws import clients, dynamo
from costguard.permissions import needs

# The policy's own modules are loaded by the first read: the sweeps import this module for its PERMISSIONS, and
# with the default (fixed) idle policy never read a history.
if TYPE_CHECKING:
    from costguard.detect.adaptive import IdleHistory
    from costguard.detect.idle_priors import Pool

PERMISSIONS = needs("dynamodb:BatchGetItem", "dynamodb:BatchWriteItem")

KEEP = timedelta(days=30)


def history_key(account: str, region: str, resource_id: str) -> str:
    """A resource's history: its id (a name, for a notebook) held to DynamoDB's key limit (dynamo.table_id)."""
    return dynamo.table_id("idle-history#", f"{account}/{region}/{resource_id}")


def prior_key(account: str, region: str, group: str) -> str:
    """A peer group's pool, per account and region (the group is made of tags: held to the limit too)."""
    return dynamo.table_id("idle-prior#", f"{account}/{region}/{group}")


class IdleHistories(Protocol):
    def read(self, keys: Iterable[str]) -> dict[str, IdleHistory]: ...

    def write(self, changed: Mapping[str, IdleHistory], now: datetime) -> None: ...

    def read_state(
        self, history_keys: Iterable[str], prior_keys: Iterable[str]
    ) -> tuple[dict[str, IdleHistory], dict[str, Pool]]: ...

    def write_state(
        self, histories: Mapping[str, IdleHistory], pools: Mapping[str, Pool], now: datetime
    ) -> None: ...


class MemoryIdleHistories:
    """The same, in memory (tests, the backtest)."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}

    def read(self, keys: Iterable[str]) -> dict[str, IdleHistory]:
        return self.read_state(keys, [])[0]

    def write(self, changed: Mapping[str, IdleHistory], now: datetime) -> None:
        self.write_state(changed, {}, now)

    def read_state(
        self, history_keys: Iterable[str], prior_keys: Iterable[str]
    ) -> tuple[dict[str, IdleHistory], dict[str, Pool]]:
        from costguard.detect.adaptive import IdleHistory
        from costguard.detect.idle_priors import Pool

        histories = {k: IdleHistory.from_text(self.texts[k]) for k in history_keys if k in self.texts}
        pools = {k: Pool.from_text(self.texts[k]) for k in prior_keys if k in self.texts}
        return histories, pools

    def write_state(
        self, histories: Mapping[str, IdleHistory], pools: Mapping[str, Pool], now: datetime
    ) -> None:
        self.texts.update({k: h.to_text() for k, h in histories.items()})
        self.texts.update({k: p.to_text() for k, p in pools.items()})


class DynamoIdleHistories:
    def __init__(self, table: str) -> None:
        self.table = table

    def read(self, keys: Iterable[str]) -> dict[str, IdleHistory]:
        return self.read_state(keys, [])[0]

    def write(self, changed: Mapping[str, IdleHistory], now: datetime) -> None:
        self.write_state(changed, {}, now)

    def read_state(
        self, history_keys: Iterable[str], prior_keys: Iterable[str]
    ) -> tuple[dict[str, IdleHistory], dict[str, Pool]]:
        """The stored histories and pools, in one batched read. One DynamoDB leaves unprocessed after a few
        tries is absent (logged): the sweep then starts it afresh, written over the stored one."""
        from costguard.detect.adaptive import IdleHistory
        from costguard.detect.idle_priors import Pool

        wanted = [*history_keys, *prior_keys]
        items = dynamo.batch_get(clients.client("dynamodb"), self.table, wanted)
        histories: dict[str, IdleHistory] = {}
        pools: dict[str, Pool] = {}
        for item in items:
            key = item["id"]["S"]
            if "prior" in item:
                pools[key] = Pool.from_text(item["prior"].get("S", ""))
            else:
                histories[key] = IdleHistory.from_text(item.get("history", {}).get("S", ""))
        return histories, pools

    def write_state(
        self, histories: Mapping[str, IdleHistory], pools: Mapping[str, Pool], now: datetime
    ) -> None:
        """The changed histories and pools, in one batched write. A pool is written whole: two sweeps of one
        account and region at once (an alarm's and the schedule's) may lose one's additions to the other's,
        which only slows the pool's learning a little."""
        expires = {"N": str(int((now + KEEP).timestamp()))}
        puts = [
            {"PutRequest": {"Item": {"id": {"S": k}, "history": {"S": h.to_text()}, "expiration": expires}}}
            for k, h in histories.items()
        ] + [
            {"PutRequest": {"Item": {"id": {"S": k}, "prior": {"S": p.to_text()}, "expiration": expires}}}
            for k, p in pools.items()
        ]
        if puts:
            # One left unwritten keeps its last stored state: the next sweep observes from there.
            dynamo.batch_write(clients.client("dynamodb"), self.table, puts)
