"""Notify mode's marks: kept in the state table, never on the resource.

A live run marks a resource with a tag (act/aws.py), then stops it once the grace period is over. A dry run makes
the same decisions on the same path; where a live run's final call tags, untags or stops the resource, a dry
run's writes here instead, so that the next run sees the mark a live run would see and its "would be stopped at
T" is the time remediate mode stops the same resource.

One item per marked resource, ``shadow-mark#<resource key>``:

- ``mark``: the mark tag's value a live run would have written (model.mark_text), written by a dry run's mark;
- ``stopped``: when a dry run decided the stop. A live run would have stopped the resource then; a dry run
  leaves it running, keeps its mark (its stop time stays the same), gives it no place under the per-run stop
  cap again (policy.decide_all), and writes nothing more about it until it works again;
- ``expiration``: the table's TTL, ``KEPT`` after the write.

A dry run's unmark (the resource works again) deletes the item: what comes after is a new episode.

The flows read the items of the resources they judge before judging (``overlay``: the mark as the tag a live
run would see, so that working again cancels it and the read schedule reads it at every sweep), and the pipeline
those of the findings it decides on: one BatchGetItem per 100 resources, each key read once per run (a run is
one moment: every read and write of the same ``now``). No write while nothing changes: a standing finding reads
its mark and writes nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from costguard.aws import clients
from costguard.aws.dynamo import MAX_KEY_BYTES as MAX_KEY_BYTES
from costguard.aws.dynamo import batch_get
from costguard.aws.dynamo import table_id as table_id
from costguard.events.common import to_datetime
from costguard.model import DRY_RUN_STOPPED_TAG_KEY, MARK_TAG_KEY, Resource, ResourceKind, mark_text
from costguard.observability import logger
from costguard.permissions import needs

# DynamoShadowMarks: the reads (batched), a mark or a stop written, a mark deleted.
PERMISSIONS = needs("dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:DeleteItem")

PREFIX = "shadow-mark#"
# DynamoDB refuses a partition key over 2,048 bytes on every read and write; a resource key built from a hostile
# id (a 10,000-character name) can be longer. Such a key is kept under its SHA-256 (aws/dynamo.table_id, the one
# key function of the state table; importable from here as before).
# How long an item is kept after its write. A live mark stays until the resource works again; a shadow mark
# outlives any grace period and snooze, and a resource left idle after its would-be stop is marked anew a month
# later: told again, rather than never.
KEPT = timedelta(days=30)

T = TypeVar("T")


@dataclass(frozen=True)
class Shadow:
    """One resource's shadow mark."""

    mark: str | None = None  # the mark tag's value a live run would have written
    stopped: datetime | None = None  # when a dry run decided its stop


class ShadowMarks(Protocol):
    """The marks of a dry run, and its final calls for a mark, a stop and an unmark."""

    def read(self, keys: Iterable[str], now: datetime) -> dict[str, Shadow]:
        """The shadow marks of these resource keys at ``now`` (a key with none is left out)."""
        ...

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        """What a live run's mark would tag the resource with, kept (``reason`` as for Remediator.mark)."""
        ...

    def stop(self, resource: Resource, at: datetime) -> None:
        """The stop a live run would make at ``at``, kept once; the mark stays."""
        ...

    def unmark(self, resource: Resource) -> None: ...


def key_of(account: str, region: str, kind: ResourceKind, resource_id: str) -> str:
    """The key of a resource (model.Resource.key) from its parts, for what a flow reads before it is a Resource."""
    return Resource.model_construct(kind=kind, id=resource_id, account=account, region=region).key


def mark_value(resource: Resource, at: datetime, reason: str | None) -> str:
    """The mark tag's value a live run writes (act/aws.py): the reason only on a training job."""
    return mark_text(at, reason if resource.kind is ResourceKind.TRAINING_JOB else None)


class _Remembered:
    """What one run (one ``now``) read and wrote: each key is read once, however many steps of the run ask for
    it, and a write it made is what it reads after."""

    def __init__(self) -> None:
        self._now: datetime | None = None
        self._known: dict[str, Shadow | None] = {}

    def read(self, keys: Iterable[str], now: datetime) -> dict[str, Shadow]:
        if now != self._now:
            self._now, self._known = now, {}
        wanted = list(dict.fromkeys(keys))
        unread = [k for k in wanted if k not in self._known]
        if unread:
            found = self._fetch(unread, now)
            self._known.update({k: found.get(k) for k in unread})
        return {k: s for k in wanted if (s := self._known.get(k)) is not None}

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        value = mark_value(resource, at, reason)
        if self._put_new(resource.key, value, at):
            self._known[resource.key] = Shadow(mark=value)

    def stop(self, resource: Resource, at: datetime) -> None:
        known = self._known.get(resource.key)
        if known is not None and known.stopped is not None:
            return  # told once: nothing more to keep
        # The mark the stop was decided on stays: the one kept here, else the resource's own (a mark the
        # adaptive policy dates back, say), so the next run decides on the same one.
        mark = known.mark if known is not None else resource.tags.get(MARK_TAG_KEY)
        shadow = Shadow(mark=mark, stopped=at)
        self._put(resource.key, shadow, at)
        self._known[resource.key] = shadow

    def unmark(self, resource: Resource) -> None:
        if resource.key in self._known and self._known[resource.key] is None:
            return  # nothing kept: the mark was a tag of the resource's own
        self._delete(resource.key)
        self._known[resource.key] = None

    def _fetch(self, keys: Sequence[str], now: datetime) -> dict[str, Shadow]:
        raise NotImplementedError

    def _put_new(self, key: str, mark: str, at: datetime) -> bool:
        """Keep a new mark unless one is kept already (a run that could not read it must not move it)."""
        raise NotImplementedError

    def _put(self, key: str, shadow: Shadow, at: datetime) -> None:
        raise NotImplementedError

    def _delete(self, key: str) -> None:
        raise NotImplementedError


class DynamoShadowMarks(_Remembered):
    """The shadow marks in the state table."""

    prefix = PREFIX

    def __init__(self, table: str) -> None:
        super().__init__()
        self.table = table

    def _fetch(self, keys: Sequence[str], now: datetime) -> dict[str, Shadow]:
        # Consistent: a mark written by another function a moment ago (an alarm's, before the sweep) is seen.
        ids = {table_id(self.prefix, k): k for k in keys}
        items = batch_get(clients.client("dynamodb"), self.table, list(ids), consistent=True)
        found = {}
        for item in items:
            shadow = _shadow_of(item, now)
            key = ids.get(item["id"]["S"])
            if shadow is not None and key is not None:
                found[key] = shadow
        return found

    def _put_new(self, key: str, mark: str, at: datetime) -> bool:
        dynamodb = clients.client("dynamodb")
        try:
            dynamodb.put_item(
                TableName=self.table,
                Item=_item(table_id(self.prefix, key), Shadow(mark=mark), at),
                ConditionExpression="attribute_not_exists(id) OR expiration <= :now",
                ExpressionAttributeValues={":now": {"N": str(int(at.timestamp()))}},
            )
        except dynamodb.exceptions.ConditionalCheckFailedException:
            logger.info("shadow mark kept already", extra={"resource": key[:300]})
            return False
        return True

    def _put(self, key: str, shadow: Shadow, at: datetime) -> None:
        clients.client("dynamodb").put_item(
            TableName=self.table, Item=_item(table_id(self.prefix, key), shadow, at)
        )

    def _delete(self, key: str) -> None:
        clients.client("dynamodb").delete_item(
            TableName=self.table, Key={"id": {"S": table_id(self.prefix, key)}}
        )


class MemoryShadowMarks(_Remembered):
    """The shadow marks in memory (tests), with the calls a DynamoDB store would make, counted."""

    def __init__(self) -> None:
        super().__init__()
        self.items: dict[str, tuple[Shadow, datetime]] = {}  # key -> (shadow, expiration)
        self.calls: dict[str, int] = {"read": 0, "put": 0, "delete": 0}

    def _fetch(self, keys: Sequence[str], now: datetime) -> dict[str, Shadow]:
        self.calls["read"] += -(-len(keys) // 100)
        return {k: self.items[k][0] for k in keys if k in self.items and self.items[k][1] > now}

    def _put_new(self, key: str, mark: str, at: datetime) -> bool:
        self.calls["put"] += 1
        if key in self.items and self.items[key][1] > at:
            return False
        self.items[key] = (Shadow(mark=mark), at + KEPT)
        return True

    def _put(self, key: str, shadow: Shadow, at: datetime) -> None:
        self.calls["put"] += 1
        self.items[key] = (shadow, at + KEPT)

    def _delete(self, key: str) -> None:
        self.calls["delete"] += 1
        self.items.pop(key, None)


def _item(item_id: str, shadow: Shadow, at: datetime) -> dict[str, Any]:
    item: dict[str, Any] = {"id": {"S": item_id}, "expiration": {"N": str(int((at + KEPT).timestamp()))}}
    if shadow.mark is not None:
        item["mark"] = {"S": shadow.mark}
    if shadow.stopped is not None:
        item["stopped"] = {"S": shadow.stopped.isoformat()}
    return item


def _shadow_of(item: Mapping[str, Any], now: datetime) -> Shadow | None:
    """An item's shadow mark; None when it has expired (the TTL deletes late) or cannot be read."""
    try:
        if int(item.get("expiration", {}).get("N", "0")) <= now.timestamp():
            return None
        stopped = item.get("stopped", {}).get("S")
        return Shadow(mark=item.get("mark", {}).get("S"), stopped=to_datetime(stopped) if stopped else None)
    except ValueError:
        logger.warning("unreadable shadow mark ignored", extra={"id": str(item.get("id"))[:200]})
        return None


def read_marks(marks: ShadowMarks | None, keys: Iterable[str], now: datetime) -> dict[str, Shadow]:
    """The shadow marks of these keys: none without a store (a live run: its marks are tags), and none when the
    state table cannot be read (logged: the run then decides as if nothing were marked)."""
    if marks is None:
        return {}
    wanted = list(keys)
    if not wanted:
        return {}
    try:
        return marks.read(wanted, now)
    except Exception:  # the state table is unreachable
        logger.warning("shadow marks unreadable: deciding without them", extra={"keys": len(wanted)})
        return {}


# Beside the shadow mark once a dry run has decided the stop: nothing said of it can change at any minute.
STOPPED_TAG_KEY = DRY_RUN_STOPPED_TAG_KEY


def marked_tags(tags: Mapping[str, str], shadow: Shadow | None) -> dict[str, str] | None:
    """The tags with the shadow mark, as a live run would have tagged the resource (and, once a dry run has
    decided its stop, STOPPED_TAG_KEY); None when that changes nothing (no shadow mark, or a mark tag of the
    resource's own, which always counts)."""
    if shadow is None or shadow.mark is None or MARK_TAG_KEY in tags:
        return None
    marked = {**tags, MARK_TAG_KEY: shadow.mark}
    if shadow.stopped is not None:
        marked[STOPPED_TAG_KEY] = shadow.stopped.isoformat()
    return marked


def shown_tags(tags: Mapping[str, str], shadow: Shadow | None) -> dict[str, str] | None:
    """The tags a message shows of a resource carrying its shadow mark: without what marked_tags added (the
    resource does not carry it); None when there is nothing to take out."""
    if shadow is None or shadow.mark is None or tags.get(MARK_TAG_KEY) != shadow.mark:
        return None
    return {k: v for k, v in tags.items() if k not in (MARK_TAG_KEY, STOPPED_TAG_KEY)}


def overlay(
    items: Sequence[T],
    marks: ShadowMarks | None,
    now: datetime,
    key: Callable[[T], str],
    field: str = "tags",
    dry: Callable[[T], bool] | None = None,
) -> list[T]:
    """The items (resources as a flow reads them: dataclasses or models whose tags are ``field``) with their
    shadow marks as tags: what a live run would read. Unchanged without a store. ``dry``: which items are decided
    as dry runs, when not all are (ReasonModes, RemediateScope); the others' marks are their tags alone."""
    if marks is None or not items:
        return list(items)
    wanted = [i for i in items if dry is None or dry(i)]
    found = read_marks(marks, (key(i) for i in wanted), now)
    if not found:
        return list(items)
    out = []
    for item in items:
        shadow = found.get(key(item)) if dry is None or dry(item) else None
        tags = marked_tags(getattr(item, field), shadow)
        out.append(item if tags is None else _with(item, field, tags))
    return out


def _with(item: T, field: str, tags: dict[str, str]) -> T:
    if isinstance(item, BaseModel):
        return item.model_copy(update={field: tags})
    return dataclasses.replace(item, **{field: tags})  # type: ignore[type-var]
