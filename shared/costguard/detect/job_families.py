"""Training-job families and failure loops. Pure.

A family is what one retrying workload has in common across its runs:
1. the explicit tag ``costguard:family`` when present;
2. else the pipeline that launched it (tag ``sagemaker:pipeline-name``, set by SageMaker Pipelines);
3. else the job name without its timestamp or counter suffix: ``llama-ft-nightly-2026-11-20-06-30-00``,
   ``llama-ft-nightly-1732000000`` and ``llama-ft-nightly-3`` all belong to ``llama-ft-nightly``.

A family guessed from names is only a guess: a counter suffix and a model size look alike, so ``resnet-18``
and another team's ``resnet-152`` both become ``resnet``. Such a family is reported, never acted on: only a
family someone declared (the tag, or the pipeline) may have its running jobs stopped.

A family's failure history stays small whatever the family does (an HPO sweep may fail by the thousand): the
latest ``KEEP_FAILURES`` failures are kept one by one (reasons cut to ``REASON_CHARS``); older ones inside the
window are summed into time slots (count, cost, first failure, and the jobs' fingerprints, so a job is still
counted once), and the loop reports the true count and total.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from costguard.windows import FINGERPRINT_CHARS, fingerprint, has_fingerprint

FAMILY_TAG = "costguard:family"
PIPELINE_TAG = "sagemaker:pipeline-name"

KEEP_FAILURES = 50  # failures kept one by one per family
REASON_CHARS = 500  # a kept failure reason is cut to this length
FINGERPRINTS_MAX = 3000  # fingerprints of older failures kept per family (8 bytes each)
SLOTS_PER_WINDOW = 24  # older failures are summed per 1/24 of the window

# Suffixes stripped repeatedly from the end of a job name, most specific first.
_SUFFIXES = [
    re.compile(r"[-_]\d{4}-\d{2}-\d{2}[-_T]\d{2}-\d{2}-\d{2}(?:-\d{3})?$"),  # SageMaker SDK timestamps
    re.compile(r"[-_]\d{8}[-_T]?\d{4,6}$"),  # 20261120-063000
    re.compile(r"[-_]\d{4}-\d{2}-\d{2}$"),  # a date
    re.compile(r"[-_]\d{9,13}$"),  # epoch seconds or millis
    re.compile(r"[-_](?:retry|attempt|run|try)?[-_]?\d{1,4}$", re.IGNORECASE),  # counters
    re.compile(r"[-_][0-9a-f]{8,}$"),  # a hash or uuid fragment
]

FamilySource = Literal["tag", "pipeline", "name"]


@dataclass(frozen=True)
class Family:
    """A family and where it comes from: declared (``tag``, ``pipeline``) or guessed from a name."""

    name: str
    source: FamilySource = "name"

    @property
    def key(self) -> str:
        """Its identity in the state table and as an alert's resource. Job names hold no ``:``, so a family
        guessed from names never shares a key with a declared one of the same name."""
        if self.source == "tag":
            return f"tag:{self.name}"
        if self.source == "pipeline":
            return f"pipeline:{self.name}"
        return self.name

    @property
    def declared(self) -> bool:
        """Whether someone said these jobs belong together: only then may costguard stop its jobs."""
        return self.source != "name"

    def describe(self) -> str:
        if self.source == "tag":
            return f"{self.name} (tag {FAMILY_TAG})"
        if self.source == "pipeline":
            return f"{self.name} (SageMaker pipeline)"
        return f"{self.name} (guessed from job names)"


def stripped_name(job_name: str) -> str:
    """The job name without its timestamp, counter or hash suffixes."""
    name = job_name
    changed = True
    while changed:
        changed = False
        for suffix in _SUFFIXES:
            stripped = suffix.sub("", name)
            if stripped and stripped != name:
                name, changed = stripped, True
                break
    return name


def job_family(job_name: str, tags: dict[str, str] | None = None) -> Family:
    tags = tags or {}
    if tags.get(FAMILY_TAG):
        return Family(tags[FAMILY_TAG], "tag")
    if tags.get(PIPELINE_TAG):
        return Family(tags[PIPELINE_TAG], "pipeline")
    return Family(stripped_name(job_name), "name")


def family_of(job_name: str, tags: dict[str, str] | None = None) -> str:
    """The family's name as people read it: the tag, ``pipeline:<name>``, or the stripped job name."""
    family = job_family(job_name, tags)
    return family.key if family.source == "pipeline" else family.name


@dataclass(frozen=True)
class Failure:
    job_name: str
    failed_at: datetime
    reason: str
    cost_usd: float | None


@dataclass(frozen=True)
class Earlier:
    """Failures of one time slot no longer kept one by one: how many, what they cost, when the first was."""

    start: datetime
    end: datetime
    count: int
    cost_usd: float  # of those whose cost is known
    unknown_cost: int  # how many have no known cost
    first_at: datetime
    seen: str = ""  # the fingerprints of their job names, end to end (fewer than count past the cap)

    def has(self, job_name: str) -> bool:
        return has_fingerprint(self.seen, job_name)

    def as_item(self) -> dict[str, Any]:
        return {
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "count": self.count,
            "cost": round(self.cost_usd, 2),
            "unknown": self.unknown_cost,
            "first": self.first_at.isoformat(),
            "seen": self.seen,
        }

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Earlier:
        return cls(
            start=datetime.fromisoformat(item["start"]),
            end=datetime.fromisoformat(item["end"]),
            count=int(item["count"]),
            cost_usd=float(item.get("cost") or 0.0),
            unknown_cost=int(item.get("unknown") or 0),
            first_at=datetime.fromisoformat(item["first"]),
            seen=str(item.get("seen") or ""),
        )


def _slot(at: datetime, window: timedelta) -> tuple[datetime, datetime]:
    size = max(60, int(window.total_seconds()) // SLOTS_PER_WINDOW)
    start = int(at.timestamp()) // size * size
    return datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(start + size, UTC)


@dataclass(frozen=True)
class FailureHistory:
    """One family's failures: the latest one by one, the earlier ones of the window summed per slot."""

    failures: tuple[Failure, ...] = ()  # oldest first, one per job
    earlier: tuple[Earlier, ...] = ()

    def knows(self, job_name: str) -> bool:
        return any(f.job_name == job_name for f in self.failures) or any(
            e.has(job_name) for e in self.earlier
        )

    def pruned(self, horizon: datetime) -> FailureHistory:
        """Without what failed before ``horizon`` (a slot goes once it has ended before it)."""
        return FailureHistory(
            tuple(f for f in self.failures if f.failed_at >= horizon),
            tuple(e for e in self.earlier if e.end > horizon),
        )

    def add(
        self, failure: Failure, now: datetime, window: timedelta, *, keep: int = KEEP_FAILURES
    ) -> tuple[FailureHistory, bool]:
        """The history with this failure (once per job name) and without what left the window; and whether
        the job was new."""
        pruned = self.pruned(max(now, failure.failed_at) - window)
        if self.knows(failure.job_name):
            return pruned, False
        kept = sorted(
            [*pruned.failures, replace(failure, reason=failure.reason[:REASON_CHARS])],
            key=lambda f: f.failed_at,
        )
        earlier = list(pruned.earlier)
        while len(kept) > keep:
            earlier = _summed(earlier, kept.pop(0), window)
        return FailureHistory(tuple(kept), tuple(sorted(earlier, key=lambda e: e.start))), True

    def as_item(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The kept failures by job name (the layout earlier versions wrote) and the summed slots."""
        entries = {
            f.job_name: {
                "job": f.job_name,
                "failed_at": f.failed_at.isoformat(),
                "reason": f.reason,
                "cost": f.cost_usd,
            }
            for f in self.failures
        }
        return entries, [e.as_item() for e in self.earlier]

    @classmethod
    def from_item(cls, entries: dict[str, Any], earlier: Iterable[dict[str, Any]] = ()) -> FailureHistory:
        failures = sorted(
            (
                Failure(
                    v["job"], datetime.fromisoformat(v["failed_at"]), v.get("reason") or "", v.get("cost")
                )
                for v in entries.values()
            ),
            key=lambda f: f.failed_at,
        )
        return cls(tuple(failures), tuple(Earlier.from_item(e) for e in earlier))


def _summed(earlier: list[Earlier], failure: Failure, window: timedelta) -> list[Earlier]:
    """``earlier`` with one more failure summed into its slot."""
    start, end = _slot(failure.failed_at, window)
    room = FINGERPRINTS_MAX * FINGERPRINT_CHARS - sum(len(e.seen) for e in earlier)
    mark = fingerprint(failure.job_name) if room >= FINGERPRINT_CHARS else ""
    known = failure.cost_usd is not None
    for n, slot in enumerate(earlier):
        if slot.start == start:
            earlier[n] = replace(
                slot,
                count=slot.count + 1,
                cost_usd=slot.cost_usd + (failure.cost_usd or 0.0),
                unknown_cost=slot.unknown_cost + (0 if known else 1),
                first_at=min(slot.first_at, failure.failed_at),
                seen=slot.seen + mark,
            )
            return earlier
    return [
        *earlier,
        Earlier(start, end, 1, failure.cost_usd or 0.0, 0 if known else 1, failure.failed_at, mark),
    ]


@dataclass(frozen=True)
class FailureLoop:
    family: Family
    failures: tuple[Failure, ...]  # the latest, one by one
    earlier_count: int = 0  # failures of the window before those, summed
    earlier_cost_usd: float = 0.0
    earlier_unknown_cost: int = 0
    earlier_first_at: datetime | None = None

    @property
    def count(self) -> int:
        return len(self.failures) + self.earlier_count

    @property
    def first_at(self) -> datetime | None:
        times = [f.failed_at for f in self.failures]
        if self.earlier_first_at is not None:
            times.append(self.earlier_first_at)
        return min(times, default=None)

    @property
    def total_cost_usd(self) -> float | None:
        costs = [f.cost_usd for f in self.failures]
        if self.earlier_unknown_cost or any(c is None for c in costs):
            return None
        return round(sum(c for c in costs if c is not None) + self.earlier_cost_usd, 2)

    def reasons(self) -> list[tuple[str, int]]:
        """Failure reasons (of the failures kept one by one) grouped when they repeat, most frequent first."""
        return Counter(_first_line(f.reason) for f in self.failures).most_common()


def failure_loop(
    family: Family | str,
    failures: Sequence[Failure],
    now: datetime,
    *,
    threshold: int,
    window: timedelta,
    earlier: Sequence[Earlier] = (),
) -> FailureLoop | None:
    """The failures of one family inside the window, if there are at least ``threshold`` of them."""
    if isinstance(family, str):
        family = Family(family)
    recent = tuple(
        sorted((f for f in failures if now - window <= f.failed_at <= now), key=lambda f: f.failed_at)
    )
    unique = tuple({f.job_name: f for f in recent}.values())  # one job counted once, however often delivered
    slots = [e for e in earlier if e.end > now - window and e.start <= now]
    loop = FailureLoop(
        family,
        unique,
        earlier_count=sum(e.count for e in slots),
        earlier_cost_usd=round(sum(e.cost_usd for e in slots), 2),
        earlier_unknown_cost=sum(e.unknown_cost for e in slots),
        earlier_first_at=min((e.first_at for e in slots), default=None),
    )
    return loop if loop.count >= threshold else None


def _first_line(reason: str) -> str:
    return (reason.strip().splitlines() or ["no failure reason given"])[0][:200]
