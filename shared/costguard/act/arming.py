"""The owner's tags that arm a destructive action, read as costguard first saw them.

A ceiling (``costguard:max-usd``, ``costguard:max-hours``), an opt-in to stopping, deleting, cancelling or scaling
to zero (``costguard:stop-on-divergence``, ``costguard:stop-on-hang``, ``costguard:auto-delete``, ``costguard:auto-cancel``,
``costguard.io/scale-to-zero``): anyone allowed ``sagemaker:AddTags``, ``bedrock:TagResource`` or
``ec2:CreateTags`` on a colleague's resource can write one, and make costguard stop work its owner never opted in.
So such a tag counts as it was when costguard first saw the resource:

- The sweeps that list every resource of a kind (``observe``) keep, for each resource that carries an arming tag,
  ``armed#<resource key>``: its arming tags as first seen. A resource created since the kind's previous sweep
  (``armed-census#<account>#<region>#<kind>``, updated by every sweep) is seen for the first time: its tags then
  count. One created before, with no record, was seen before without them: they were added later, and the
  record says so (first seen with none).
- Before deciding, the pipeline (``vouch``) compares each remediable finding's ``armed_by`` (model.Finding) with
  the record: an opt-in or ceiling costguard first saw unchanged, or a ceiling since loosened (over the looser
  ceiling is over the first one too), arms the action; one added or tightened later makes a finding that only
  notifies and names the change. A resource no sweep recorded (an event's) is judged by the same census.
- When the records cannot be read, nothing armed by a tag is acted on: told, with why.

A kind's first census (costguard's first sweep of it, at install) takes the tags as they are: that is when
costguard first sees every resource then running.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from costguard.act.shadow import table_id
from costguard.aws import clients
from costguard.aws.dynamo import batch_get
from costguard.model import Finding, Resource, ResourceKind
from costguard.observability import logger
from costguard.permissions import needs

# One census UpdateItem per sweep, the records read in batches, a record written once per armed resource.
PERMISSIONS = needs("dynamodb:UpdateItem", "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem")

PREFIX = "armed#"
CENSUS_PREFIX = "armed-census#"
# Ceilings: a looser value later still arms (the finding is over the first one too); any other change does not.
CEILINGS = frozenset({"costguard:max-usd", "costguard:max-hours"})
OPT_INS = frozenset(
    {
        "costguard:stop-on-divergence",
        "costguard:stop-on-hang",
        "costguard:auto-delete",
        "costguard:auto-cancel",
        "costguard.io/scale-to-zero",
    }
)
ARMING_KEYS = CEILINGS | OPT_INS
# A resource created this long before the previous sweep may not have been listed by it yet (the listing's own
# lag, two functions' clocks): still seen for the first time.
LISTING_LAG = timedelta(minutes=5)
# How long a record is kept after its write, and when a sweep writes it again: a resource that runs for longer
# keeps its record (a reservation, a throughput), one gone for a year is forgotten.
KEPT = timedelta(days=400)
RENEW_BEFORE = timedelta(days=200)
UNREADABLE = "its arming tags cannot be checked against costguard's records (state table unreadable)"


@dataclass(frozen=True)
class FirstSeen:
    """A resource's arming tags as costguard first saw them (``tags``), and when (``seen``). ``later``: it was
    first recorded after costguard had seen it without any (they were added since)."""

    tags: Mapping[str, str]
    seen: datetime
    later: bool = False
    expires: datetime | None = None


@dataclass(frozen=True)
class Sighting:
    """One resource a sweep listed: its key, when it was created (None: unknown), its arming tags now."""

    key: str
    created: datetime | None
    tags: Mapping[str, str]


def arming_tags(tags: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in tags.items() if k in ARMING_KEYS}


def scope_of(account: str, region: str, kind: ResourceKind) -> str:
    return f"{account}#{region}#{kind.value}"


class ArmingRecords(Protocol):
    def census(self, scope: str, now: datetime) -> datetime | None:
        """The previous sweep of this scope (None: none yet), this one recorded."""
        ...

    def previous(self, scope: str) -> tuple[bool, datetime | None]:
        """Whether any sweep of this scope was recorded, and its last."""
        ...

    def read(self, keys: Sequence[str]) -> dict[str, FirstSeen]: ...

    def keep(self, key: str, first: FirstSeen, now: datetime) -> FirstSeen:
        """Record ``first`` (kept for KEPT from ``now``) unless another record is there; the record that stands."""
        ...


def first_sight(sighting: Sighting, previous: datetime | None, swept: bool, now: datetime) -> FirstSeen:
    """What costguard records of a resource with arming tags and no record. Pure.

    New since the previous sweep (or no sweep recorded yet: costguard's first look), its tags count; otherwise it
    was listed before without them."""
    tags = arming_tags(sighting.tags)
    if not swept or previous is None:
        return FirstSeen(tags=tags, seen=now)
    if sighting.created is not None and sighting.created >= previous - LISTING_LAG:
        return FirstSeen(tags=tags, seen=now)
    return FirstSeen(tags={}, seen=now, later=True)


def observe(
    records: ArmingRecords, scope: str, sightings: Iterable[Sighting], now: datetime
) -> dict[str, FirstSeen]:
    """A sweep's census of one scope: every resource it listed that carries an arming tag gets its record (read in
    batches, written once). The records by key. Never raises: a table that cannot be reached leaves the records
    unread, and ``vouch`` then acts on no arming tag."""
    armed = [s for s in sightings if arming_tags(s.tags)]
    try:
        previous = records.census(scope, now)
        if not armed:
            return {}
        found = records.read([s.key for s in armed])
        for sighting in armed:
            first = found.get(sighting.key)
            if first is None or (first.expires is not None and first.expires - now < RENEW_BEFORE):
                found[sighting.key] = records.keep(
                    sighting.key, first or first_sight(sighting, previous, True, now), now
                )
        return found
    except Exception:
        logger.warning("arming records not kept", extra={"scope": scope, "armed": len(armed)}, exc_info=True)
        return {}


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip().lstrip("$"))
    except ValueError:
        return None
    return number if math.isfinite(number) and number > 0 else None


def change_of(key: str, now_value: str, first: FirstSeen) -> str | None:
    """Why this arming tag does not arm, or None when costguard first saw it so (or a ceiling loosened). Pure."""
    was = first.tags.get(key)
    when = first.seen.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    if was is None:
        return f"{key}={now_value} was added after costguard first saw it ({when}, without it)"
    if key in CEILINGS:
        then, now_number = _number(was), _number(now_value)
        if then is not None and now_number is not None and now_number >= then:
            return None
        return f"{key} was changed from {was} to {now_value} after costguard first saw it ({when})"
    if was.strip().lower() == now_value.strip().lower():
        return None
    return f"{key} was changed from {was} to {now_value} after costguard first saw it ({when})"


def judged(finding: Finding, first: FirstSeen | None) -> Finding:
    """The finding, notify-only when none of its arming tags is as costguard first saw it. Pure."""
    if not finding.remediable or not finding.armed_by:
        return finding
    if first is None:
        return _told_only(finding, UNREADABLE)
    changes = [change_of(k, v, first) for k, v in finding.armed_by.items()]
    if any(c is None for c in changes):
        return finding
    return _told_only(finding, "; ".join(c for c in changes if c))


def _told_only(finding: Finding, why: str) -> Finding:
    note = f"told, not acted on: {why}. costguard acts only on an arming tag as it first saw it"
    logger.warning("arming tag not vouched for", extra={"resource": finding.resource.key[:300], "why": why})
    return finding.model_copy(
        update={"remediable": False, "report_note": note, "evidence": finding.evidence | {"Arming tag": why}}
    )


def vouch(findings: Sequence[Finding], records: ArmingRecords, now: datetime) -> list[Finding]:
    """The findings, each remediable one armed by a tag kept remediable only if costguard's record vouches for the
    tag. A resource with no record is recorded now by the same rule as a sweep's (its scope's census)."""
    armed = [f for f in findings if f.remediable and f.armed_by]
    if not armed:
        return list(findings)
    try:
        found = records.read([f.resource.key for f in armed])
        censuses: dict[str, tuple[bool, datetime | None]] = {}
        for finding in armed:
            resource = finding.resource
            if resource.key in found:
                continue
            scope = scope_of(resource.account, resource.region, resource.kind)
            if scope not in censuses:
                censuses[scope] = records.previous(scope)
            swept, previous = censuses[scope]
            sighting = Sighting(resource.key, _created(resource), resource.tags)
            found[resource.key] = records.keep(resource.key, first_sight(sighting, previous, swept, now), now)
    except Exception:
        logger.warning("arming records unreadable: nothing armed by a tag is acted on", exc_info=True)
        found = {}
    return [judged(f, found.get(f.resource.key)) if f.remediable and f.armed_by else f for f in findings]


def _created(resource: Resource) -> datetime | None:
    return resource.started


# --- the stores -------------------------------------------------------------------------------------------------


def _epoch(at: datetime) -> str:
    return str(int(at.timestamp()))


def _first_of(item: Mapping[str, Any]) -> FirstSeen:
    tags = {k: v["S"] for k, v in item.get("tags", {}).get("M", {}).items() if "S" in v}
    seen = datetime.fromtimestamp(int(item.get("seen", {}).get("N", "0")), UTC)
    expires = item.get("expiration", {}).get("N")
    return FirstSeen(
        tags=tags,
        seen=seen,
        later=item.get("later", {}).get("BOOL", False),
        expires=datetime.fromtimestamp(int(expires), UTC) if expires else None,
    )


@dataclass
class DynamoArmingRecords:
    """The records and censuses in the state table."""

    table: str

    def census(self, scope: str, now: datetime) -> datetime | None:
        answer = clients.client("dynamodb").update_item(
            TableName=self.table,
            Key={"id": {"S": CENSUS_PREFIX + scope}},
            UpdateExpression="SET #last = :now, #first = if_not_exists(#first, :now)",
            ExpressionAttributeNames={"#last": "last", "#first": "first"},
            ExpressionAttributeValues={":now": {"N": _epoch(now)}},
            ReturnValues="UPDATED_OLD",
        )
        last = answer.get("Attributes", {}).get("last", {}).get("N")
        return datetime.fromtimestamp(int(last), UTC) if last else None

    def previous(self, scope: str) -> tuple[bool, datetime | None]:
        item = (
            clients.client("dynamodb")
            .get_item(TableName=self.table, Key={"id": {"S": CENSUS_PREFIX + scope}}, ConsistentRead=True)
            .get("Item")
        )
        if not item or "last" not in item:
            return False, None
        return True, datetime.fromtimestamp(int(item["last"]["N"]), UTC)

    def read(self, keys: Sequence[str]) -> dict[str, FirstSeen]:
        ids = {table_id(PREFIX, k): k for k in keys}
        items = batch_get(clients.client("dynamodb"), self.table, list(ids), consistent=True)
        return {ids[i["id"]["S"]]: _first_of(i) for i in items if i["id"]["S"] in ids}

    def keep(self, key: str, first: FirstSeen, now: datetime) -> FirstSeen:
        dynamodb = clients.client("dynamodb")
        item = {
            "id": {"S": table_id(PREFIX, key)},
            "tags": {"M": {k: {"S": v} for k, v in first.tags.items()}},
            "seen": {"N": _epoch(first.seen)},
            "later": {"BOOL": first.later},
            "expiration": {"N": _epoch(now + KEPT)},
        }
        try:
            # A record already there stands (another sweep's, a moment ago); an expired one, or one this sweep
            # renews with the same first sight, is written.
            dynamodb.put_item(
                TableName=self.table,
                Item=item,
                ConditionExpression="attribute_not_exists(id) OR seen = :seen",
                ExpressionAttributeValues={":seen": {"N": _epoch(first.seen)}},
            )
        except dynamodb.exceptions.ConditionalCheckFailedException:
            standing = self.read([key]).get(key)
            return standing or first
        return first


@dataclass
class MemoryArmingRecords:
    """The same in memory (unit tests), with the calls counted."""

    censuses: dict[str, datetime] = field(default_factory=dict)
    items: dict[str, FirstSeen] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    fail: bool = False

    def _count(self, name: str) -> None:
        if self.fail:
            raise RuntimeError("state table unreachable")
        self.calls[name] = self.calls.get(name, 0) + 1

    def census(self, scope: str, now: datetime) -> datetime | None:
        self._count("census")
        previous = self.censuses.get(scope)
        self.censuses[scope] = now
        return previous

    def previous(self, scope: str) -> tuple[bool, datetime | None]:
        self._count("previous")
        last = self.censuses.get(scope)
        return last is not None, last

    def read(self, keys: Sequence[str]) -> dict[str, FirstSeen]:
        self._count("read")
        return {k: self.items[k] for k in keys if k in self.items}

    def keep(self, key: str, first: FirstSeen, now: datetime) -> FirstSeen:
        self._count("keep")
        standing = self.items.get(key)
        if standing is not None and standing.seen != first.seen:
            return standing
        kept = FirstSeen(first.tags, first.seen, first.later, now + KEPT)
        self.items[key] = kept
        return kept
