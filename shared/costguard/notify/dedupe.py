"""No repeats: one message per episode of a resource, reason and action, and a daily digest of what stays open.

An episode lasts while the same finding keeps being seen: a sighting keeps it open, so a GPU idle at every 5-minute
sweep is told once, not every few hours. Unseen for longer than ``window`` (it got busy, it was stopped), the
episode is over and the next sighting is news again. A finding still open a day after it was last told
(``digest_after``) is due in the daily digest, once a day, instead of being told again on its own.

**Writes on change only.** A sighting of an open episode writes nothing unless the stored end must move. The end
is stored ahead, ``window + refresh`` past the write (``refresh`` is a quarter of the window), and moved only once
it falls under ``window`` past the sighting. So an episode ends between ``window`` and ``window + refresh`` after
its last sighting (240 to 300 minutes for the default 240-minute window), and a finding seen at every 5-minute
sweep costs one write every 65 minutes instead of one a sweep. News (a new episode, a digest) is always written: that is
what claims it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from costguard.aws import clients, dynamo
from costguard.observability import logger
from costguard.permissions import needs

# DynamoRepeatGate: one read per 100 sightings, an update for news or to move an episode's end.
PERMISSIONS = needs("dynamodb:BatchGetItem", "dynamodb:UpdateItem")
PREFIX = "repeat#"

DIGEST_AFTER = timedelta(days=1)
# The stored end runs this share of the window ahead of what the rule needs: the writes it saves (a finding seen
# every 5 minutes under a 240-minute window is written every 65 minutes) against how much longer an episode may
# last.
REFRESH_SHARE = 0.25
_READ_TRIES = 4  # BatchGetItem calls per 100 keys: the first, and retries of what is left unprocessed


class Sighting(StrEnum):
    NEW = "new"  # the first of an episode: tell it
    REPEAT = "repeat"  # the same episode, told already: nothing
    DIGEST = "digest"  # the same episode, last told over a day ago: in the daily digest


def refresh_of(window: timedelta) -> timedelta:
    """How far past ``window`` an episode's end is stored, so that most sightings need not move it."""
    return window * REFRESH_SHARE


def _table_key(key: str) -> str:
    """An episode's id: a key built from a hostile resource id can be too long for DynamoDB (dynamo.table_id)."""
    return dynamo.table_id(PREFIX, key)


class RepeatGate(Protocol):
    def sightings(
        self, windows: Mapping[str, timedelta], now: datetime, digest_after: timedelta = DIGEST_AFTER
    ) -> dict[str, Sighting]:
        """Each key's sighting at ``now``, under its own window (one run's findings in one go)."""
        ...

    def sighting(
        self, key: str, now: datetime, window: timedelta, digest_after: timedelta = DIGEST_AFTER
    ) -> Sighting: ...


def _judge(
    old_end: datetime | None, told: datetime | None, now: datetime, digest_after: timedelta
) -> Sighting:
    if old_end is None or old_end <= now or told is None:
        return Sighting.NEW
    if now - told >= digest_after:
        return Sighting.DIGEST
    return Sighting.REPEAT


def _moves(old_end: datetime | None, now: datetime, window: timedelta) -> bool:
    """Whether a repeat must move the stored end: it would otherwise fall under ``window`` past this sighting."""
    return old_end is None or old_end < now + window


class DynamoRepeatGate:
    """An item per episode in the state table: ``expiration`` (the episode's stored end, also the table's TTL)
    and ``told`` (when it was last told). A run reads its sightings with BatchGetItem (100 a call), then writes
    only what changed: news is claimed by a conditional update on the ``told`` it read, so two runs never both
    tell it; a repeat moves ``expiration`` only when it falls under ``window`` past the sighting."""

    def __init__(self, table: str) -> None:
        self.table = table

    def sighting(
        self, key: str, now: datetime, window: timedelta, digest_after: timedelta = DIGEST_AFTER
    ) -> Sighting:
        return self.sightings({key: window}, now, digest_after)[key]

    def sightings(
        self, windows: Mapping[str, timedelta], now: datetime, digest_after: timedelta = DIGEST_AFTER
    ) -> dict[str, Sighting]:
        """Raises if the table cannot be read (the caller decides what an unknown sighting means); a key whose
        news cannot be written is NEW (told, maybe twice), one whose end cannot be moved stays a REPEAT."""
        seen = {key: Sighting.NEW for key, window in windows.items() if window <= timedelta(0)}
        gated = [key for key in windows if key not in seen]
        stored = self._read([_table_key(key) for key in gated])
        for key in gated:
            old = stored.get(_table_key(key), {})
            seen[key] = self._write(key, old, now, windows[key], digest_after)
        return seen

    def _read(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored items of these ids. Keys DynamoDB leaves unprocessed after a few tries are left out: each
        is then judged news, and its conditional claim refuses it if it was told already."""
        items = dynamo.batch_get(
            clients.client("dynamodb"),
            self.table,
            ids,
            consistent=True,
            attributes=("id", "expiration", "told"),
            attempts=_READ_TRIES,
        )
        return {item["id"]["S"]: item for item in items}

    def _write(
        self, key: str, old: dict[str, Any], now: datetime, window: timedelta, digest_after: timedelta
    ) -> Sighting:
        old_end = _epoch(old.get("expiration"))
        seen = _judge(old_end, _epoch(old.get("told")), now, digest_after)
        end = {":end": {"N": str(int((now + window + refresh_of(window)).timestamp()))}}
        dynamodb = clients.client("dynamodb")
        item_key = {"id": {"S": _table_key(key)}}
        if seen is Sighting.REPEAT:
            if _moves(old_end, now, window):
                try:
                    dynamodb.update_item(
                        TableName=self.table,
                        Key=item_key,
                        UpdateExpression="SET expiration = :end",
                        ConditionExpression="expiration < :end",  # never backwards (a later run moved it)
                        ExpressionAttributeValues=end,
                    )
                except dynamodb.exceptions.ConditionalCheckFailedException:
                    pass  # another run moved it as far, or the item expired since it was read
                except Exception:  # unwritable: still the same episode, and the next sighting tries again
                    logger.warning("repeat gate: episode end not moved", extra={"key": key})
            return seen
        # News: claimed by one run only. Nobody told it since what this run read (or it has never been told).
        told = old.get("told")
        try:
            dynamodb.update_item(
                TableName=self.table,
                Key=item_key,
                UpdateExpression="SET told = :now, expiration = :end",
                ConditionExpression="told = :told" if told else "attribute_not_exists(told)",
                ExpressionAttributeValues={":now": {"N": str(int(now.timestamp()))}}
                | end
                | ({":told": told} if told else {}),
            )
        except dynamodb.exceptions.ConditionalCheckFailedException:
            return Sighting.REPEAT
        except Exception:  # unwritable: a message twice beats one nobody sent
            logger.warning("repeat gate unavailable: notifying anyway", extra={"key": key})
            return Sighting.NEW
        return seen


def _epoch(value: dict[str, str] | None) -> datetime | None:
    if not value or "N" not in value:
        return None
    return datetime.fromtimestamp(int(value["N"]), tz=UTC)


def _seconds(at: datetime) -> datetime:
    """A time as the state table keeps it: whole epoch seconds."""
    return datetime.fromtimestamp(int(at.timestamp()), tz=UTC)


class MemoryRepeatGate:
    """The same rule in memory, for tests and the backtest, down to when it writes (``writes`` counts them)."""

    def __init__(self) -> None:
        self.until: dict[str, datetime] = {}
        self.told: dict[str, datetime] = {}
        self.writes = 0

    def sightings(
        self, windows: Mapping[str, timedelta], now: datetime, digest_after: timedelta = DIGEST_AFTER
    ) -> dict[str, Sighting]:
        return {key: self.sighting(key, now, window, digest_after) for key, window in windows.items()}

    def sighting(
        self, key: str, now: datetime, window: timedelta, digest_after: timedelta = DIGEST_AFTER
    ) -> Sighting:
        if window <= timedelta(0):
            return Sighting.NEW
        old_end = self.until.get(key)
        seen = _judge(old_end, self.told.get(key), now, digest_after)
        if seen is not Sighting.REPEAT:
            self.told[key] = _seconds(now)
        elif not _moves(old_end, now, window):
            return seen
        self.until[key] = _seconds(now + window + refresh_of(window))
        self.writes += 1
        return seen

    def first_in_window(self, key: str, now: datetime, window: timedelta) -> bool:
        """Whether a sighting is news on its own (the backtest counts those)."""
        return self.sighting(key, now, window) is Sighting.NEW
