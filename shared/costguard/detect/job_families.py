"""Training-job families and failure loops. Pure.

A family is what one retrying workload has in common across its runs:
1. the explicit tag ``costguard:family`` when present;
2. else the pipeline that launched it (tag ``sagemaker:pipeline-name``, set by SageMaker Pipelines);
3. else the job name without its timestamp or counter suffix: ``llama-ft-nightly-2026-11-20-06-30-00``,
   ``llama-ft-nightly-1732000000`` and ``llama-ft-nightly-3`` all belong to ``llama-ft-nightly``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

FAMILY_TAG = "costguard:family"
PIPELINE_TAG = "sagemaker:pipeline-name"

# Suffixes stripped repeatedly from the end of a job name, most specific first.
_SUFFIXES = [
    re.compile(r"[-_]\d{4}-\d{2}-\d{2}[-_T]\d{2}-\d{2}-\d{2}(?:-\d{3})?$"),  # SageMaker SDK timestamps
    re.compile(r"[-_]\d{8}[-_T]?\d{4,6}$"),  # 20261120-063000
    re.compile(r"[-_]\d{4}-\d{2}-\d{2}$"),  # a date
    re.compile(r"[-_]\d{9,13}$"),  # epoch seconds or millis
    re.compile(r"[-_](?:retry|attempt|run|try)?[-_]?\d{1,4}$", re.IGNORECASE),  # counters
    re.compile(r"[-_][0-9a-f]{8,}$"),  # a hash or uuid fragment
]


def family_of(job_name: str, tags: dict[str, str] | None = None) -> str:
    tags = tags or {}
    if tags.get(FAMILY_TAG):
        return tags[FAMILY_TAG]
    if tags.get(PIPELINE_TAG):
        return f"pipeline:{tags[PIPELINE_TAG]}"
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


@dataclass(frozen=True)
class Failure:
    job_name: str
    failed_at: datetime
    reason: str
    cost_usd: float | None


@dataclass(frozen=True)
class FailureLoop:
    family: str
    failures: tuple[Failure, ...]

    @property
    def total_cost_usd(self) -> float | None:
        costs = [f.cost_usd for f in self.failures]
        return None if any(c is None for c in costs) else round(sum(c for c in costs if c is not None), 2)

    def reasons(self) -> list[tuple[str, int]]:
        """Failure reasons grouped when they repeat, most frequent first."""
        return Counter(_first_line(f.reason) for f in self.failures).most_common()


def failure_loop(
    family: str, failures: Sequence[Failure], now: datetime, *, threshold: int, window: timedelta
) -> FailureLoop | None:
    """The failures of one family inside the window, if there are at least ``threshold`` of them."""
    recent = tuple(
        sorted((f for f in failures if now - window <= f.failed_at <= now), key=lambda f: f.failed_at)
    )
    unique = tuple({f.job_name: f for f in recent}.values())  # one job counted once, however often delivered
    return FailureLoop(family, unique) if len(unique) >= threshold else None


def _first_line(reason: str) -> str:
    return (reason.strip().splitlines() or ["no failure reason given"])[0][:200]
