"""costguard's own record of the marks it tags resources with: a mark tag counts only when the record matches.

A live run marks a resource with a tag (act/aws.py). Anyone allowed ``ec2:CreateTags`` or ``sagemaker:AddTags``
can write the same tag: dated in the past, it would skip the grace period in which the owner is told and can
click Keep; dated in the future, it would keep an idle resource "in its grace period" for ever. So a live mark is
also written here, ``mark#<resource key>``, when the tag is written, and deleted when the mark ends (unmarked, or
the resource stopped). Before deciding, the pipeline reads the records of the findings whose resource carries a
mark tag (one BatchGetItem per 100) and voids a tag that:

- has no record, or a record of another value (costguard did not write it);
- is dated ahead of now by more than CLOCK_SKEW;
- is older than the resource's current run (an instance started again since, a new LaunchTime).

A void mark is decided as no mark: costguard marks afresh, tells, and gives the grace period; the message says
what was ignored. When the records cannot be read, a marked resource is not stopped (its mark cannot be vouched
for) and is told so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from costguard.act.shadow import (
    STOPPED_TAG_KEY,
    DynamoShadowMarks,
    MemoryShadowMarks,
    Shadow,
    mark_value,
)
from costguard.model import MARK_TAG_KEY, Finding, Resource
from costguard.observability import logger
from costguard.permissions import needs
from costguard.policy import marked_at, utc_text

# DynamoMarkRecords: the reads (batched), a mark written, a mark deleted.
PERMISSIONS = needs("dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:DeleteItem")
PREFIX = "mark#"
# How far ahead of now a mark may be dated before it is void: the clocks of two functions a moment apart.
CLOCK_SKEW = timedelta(minutes=5)
UNCHECKABLE = (
    "its costguard:marked-at tag cannot be checked against costguard's records (state table unreadable)"
)


class MarkRecords(Protocol):
    """The live marks costguard wrote, by resource key."""

    def read(self, keys: Sequence[str], now: datetime) -> dict[str, Shadow]: ...

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None: ...

    def unmark(self, resource: Resource) -> None: ...


class DynamoMarkRecords(DynamoShadowMarks):
    """The live marks' records in the state table."""

    prefix = PREFIX

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        # Unconditional: the tag was just written with this value, and the record must say the same.
        value = mark_value(resource, at, reason)
        self._put(resource.key, Shadow(mark=value), at)
        self._known[resource.key] = Shadow(mark=value)


class MemoryMarkRecords(MemoryShadowMarks):
    """The live marks' records in memory (tests), with the calls counted."""

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        value = mark_value(resource, at, reason)
        self._put(resource.key, Shadow(mark=value), at)
        self._known[resource.key] = Shadow(mark=value)


def void_reason(value: str, record: Shadow | None, started: datetime | None, now: datetime) -> str | None:
    """Why a mark tag of this value is not costguard's live mark; None when it is. Pure."""
    if record is None or record.mark is None:
        return "costguard holds no record of writing it"
    if record.mark != value:
        return "it differs from the mark costguard recorded"
    at = marked_at({MARK_TAG_KEY: value})
    if at is None:
        return None  # unreadable: the policy marks afresh anyway
    if at > now + CLOCK_SKEW:
        return f"it is dated {utc_text(at)}, ahead of now"
    return _before_run(value, started)


def _before_run(value: str, started: datetime | None) -> str | None:
    at = marked_at({MARK_TAG_KEY: value})
    if started is not None and at is not None and at < started:
        return f"it is older than the resource's current run (started {utc_text(started)})"
    return None


def vouched(
    findings: Sequence[Finding],
    records: MarkRecords,
    now: datetime,
    shadows: Mapping[str, Shadow] | None = None,
) -> list[Finding]:
    """The findings with every mark tag costguard cannot vouch for taken off (and said why, ``mark_void``).

    ``shadows``: the dry runs' marks the flow overlaid as tags (act/shadow.py): costguard's own, not checked here.
    """
    shadows = shadows or {}

    def own_shadow(finding: Finding) -> bool:
        shadow = shadows.get(finding.resource.key)
        return shadow is not None and shadow.mark == finding.resource.tags.get(MARK_TAG_KEY)

    checked = [f for f in findings if MARK_TAG_KEY in f.resource.tags and not own_shadow(f)]
    if not any(MARK_TAG_KEY in f.resource.tags for f in findings):
        return list(findings)
    try:
        found = records.read([f.resource.key for f in checked], now) if checked else {}
    except Exception:  # the state table is unreachable: no mark can be vouched for, so none stops anything
        logger.warning("mark records unreadable: marked resources not stopped", extra={"keys": len(checked)})
        blocked = {f.resource.key for f in checked}
        return [
            f.model_copy(update={"resource": f.resource.model_copy(update={"stop_blocker": UNCHECKABLE})})
            if f.resource.key in blocked and f.resource.stop_blocker is None
            else f
            for f in findings
        ]
    out = []
    for finding in findings:
        resource = finding.resource
        value = resource.tags.get(MARK_TAG_KEY)
        if value is None:
            why = None
        elif own_shadow(finding):  # costguard's own store: only a mark from an earlier run is void
            why = _before_run(value, resource.started)
        else:
            why = void_reason(value, found.get(resource.key), resource.started, now)
        if why is None:
            out.append(finding)
            continue
        logger.warning(
            "mark tag void",
            extra={"resource": resource.key[:300], "value": value[:64] if value else "", "why": why},
        )
        tags = {k: v for k, v in resource.tags.items() if k not in (MARK_TAG_KEY, STOPPED_TAG_KEY)}
        void = f"a costguard:marked-at tag ({(value or '')[:64]}) was ignored: {why}"
        out.append(
            finding.model_copy(
                update={
                    "resource": resource.model_copy(update={"tags": tags, "mark_void": void}),
                    "evidence": finding.evidence | {"Mark tag ignored": void},
                }
            )
        )
    return out
