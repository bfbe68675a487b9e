"""Whether a training job's metric series holds datapoints the job did not write, judged from its cadence: the
number of samples CloudWatch holds in each period of the series (its ``SampleCount``). Pure.

SageMaker writes one sample of a defined metric for each log line its regex matches, so a job writes its metrics
at a cadence of its own: every few minutes, or several times a period. Anyone allowed ``cloudwatch:PutMetricData``
(a SageMaker job role usually is) can add samples to the same series, and CloudWatch keeps no trace of who wrote
which. Added samples do leave a trace in the counts: a period with more samples than the job's cadence puts there,
or samples where the job writes none. A rule that may stop a job is only acted on when its series shows neither.

The cadence is learned from the series itself, over the whole run read, with medians: an attacker must out-write
the job over most of its run for added samples to pass as its cadence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import pairwise

Counts = Sequence[tuple[datetime, float]]  # each period's SampleCount, oldest first; empty periods absent


@dataclass(frozen=True)
class AddedDatapoints:
    """Where a series holds more samples than its job writes."""

    at: datetime  # the start of the first period that shows it
    why: str  # a sentence fragment, e.g. "2 samples in the period from 2026-11-20 11:00 UTC, where the job writes 1"


@dataclass(frozen=True)
class Write:
    """Samples the job wrote at one time: one period, or adjacent periods a write straddles."""

    at: datetime
    period: int  # the number of its first period, counted from the series' first
    samples: int


def _spacing(gaps: Sequence[int]) -> int:
    """The typical number of periods from one write to the next, weighted by time: the gap that covers the
    middle of the span. Many added samples packed into a short stretch leave it where the job's own gaps put it."""
    half, covered = sum(gaps) / 2, 0
    for gap in sorted(gaps):
        covered += gap
        if covered >= half:
            return gap
    return 1


def _writes(held: Sequence[tuple[datetime, int]], gaps: Sequence[int], merge: bool) -> list[Write]:
    """The periods that hold samples as writes; with ``merge``, adjacent periods are one write (a job's samples
    of one step, from several hosts or written across a period boundary, fall in two periods)."""
    writes: list[Write] = []
    number = 0
    for n, (at, samples) in enumerate(held):
        gap = gaps[n - 1] if n else 0
        number += gap
        if writes and merge and gap == 1:
            last = writes[-1]
            writes[-1] = Write(last.at, last.period, last.samples + samples)
        else:
            writes.append(Write(at, number, samples))
    return writes


def added_datapoints(counts: Counts, period: timedelta) -> AddedDatapoints | None:
    """Where the series (read at ``period``) holds samples its job did not write; None when nothing shows.

    - ``spacing``: the periods from one period holding samples to the next, their time-weighted median (1 for a
      job that writes every period).
    - A write is a period holding samples; for a job that writes less often than every other period (spacing 3
      or more), adjacent periods are one write.
    - ``typical``: the median of the samples per write. A write holding more than ``typical`` is added to; for a
      job that writes every period, where its writes fall against the period boundaries varies, and one more
      than ``typical`` is allowed (two more are not).
    - For a job writing every 3 periods or less often, a write no more than half its spacing after the previous
      one is added: the job's own jitter moves a write by a period, never by half its cadence.

    What this cannot see: one sample added to a period of a job that writes several every period, and a series
    added to over most of the run (it then reads as the job's cadence). A job whose own writes come irregularly
    may read as added to: its divergence is then told, never acted on.
    """
    held = [(at, round(n)) for at, n in counts if math.isfinite(n) and n >= 1]
    if len(held) < 2:
        return None
    seconds = period.total_seconds()
    gaps = [max(1, round((b - a).total_seconds() / seconds)) for (a, _), (b, _) in pairwise(held)]
    spacing = _spacing(gaps)
    writes = _writes(held, gaps, merge=spacing >= 3)
    typical = sorted(w.samples for w in writes)[len(writes) // 2]
    allowed = typical + 1 if spacing == 1 else typical
    minutes = round(seconds / 60)
    for write in writes:
        if write.samples > allowed:
            return AddedDatapoints(
                write.at,
                f"{write.samples} samples in the {minutes}-minute period from {write.at:%Y-%m-%d %H:%M} UTC, "
                f"where the job writes {typical}",
            )
    if spacing >= 3:
        for before, after in pairwise(writes):
            apart = after.period - before.period
            if 2 * apart <= spacing:
                return AddedDatapoints(
                    after.at,
                    f"samples at {after.at:%Y-%m-%d %H:%M} UTC, {apart * minutes} min after the previous ones, "
                    f"where the job writes every {spacing * minutes} min",
                )
    return None
