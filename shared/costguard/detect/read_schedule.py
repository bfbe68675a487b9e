"""The read schedule: when the sweep next needs an instance's GPU metrics. Pure.

GetMetricData is billed per metric requested, so reading every GPU series at every 5-minute sweep is most of
costguard's own bill. Yet a verdict with something to say cannot come at any time: all GPUs under the idle
threshold for the whole idle window cannot be true before the last busy datapoint has left the window, a GPU
cannot be silent for a window before its last datapoint has left it, and the working GPUs' mean cannot fall
under the starved threshold faster than the fastest possible fall. ``earliest_finding`` works that moment out
from the points just read; until then the sweep does not read the instance, and its decisions are exactly those
of a sweep that reads it every time (tests/unit/test_read_schedule.py; the backtest checks it over a week).

An instance with something to say is read again as follows:
- marked for a stop (a grace period running), or snoozed (the snooze's end changes the decision): at every
  sweep, since what is decided of it can change at any minute;
- otherwise (notify-only mode, a protected instance, a notify-only reason such as starved or partial metrics):
  a standing idle finding on fixed slots one idle window apart from its first reading (its ``anchor``), each
  read at the first sweep at or after it, whenever the sweeps run; any other at the moment an idle verdict
  could come, which is never more than an idle window on. So what is *decided* (marks, unmarks, stops) is
  exactly what a sweep reading every time decides; what is *said* of a standing finding may be seen to end up to
  one idle window (and a sweep) late: a standing finding flickering off and on between two slots is one episode
  rather than two. The entry holds the next slot due: a read moves it to the slot after, counted from the anchor
  and not from the moment of the read, so a late or early sweep neither skips a slot nor shifts the ones after.

Anything that would change what is decided about an instance without a new datapoint makes it due at once: its
tags (protect, snooze; any other tag too), a new launch (a restart), no entry yet. A mark makes it due at every
sweep while it stands; the mark a read's own decision adds or removes is left out of the tags' digest, so it
forces no read of its own (a read that cancels a mark waits for the next bound).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from costguard.detect.gpu import MIN_COVERAGE, STARVED_MIN_WORKING_SHARE, Series, Thresholds, Verdict
from costguard.model import DRY_RUN_STOPPED_TAG_KEY, MARK_TAG_KEY, Finding, Reason
from costguard.policy import SNOOZE_TAG_KEY, Policy, waits_out_grace


class Kind(StrEnum):
    BOUND = "b"  # nothing to say: read again at ``due``, the earliest moment a finding could come
    STANDING = "s"  # a standing finding, unmarked: at ``due``, an idle one's next slot from ``anchor``
    EVERY = "e"  # something that can change at any minute: read at every sweep


@dataclass(frozen=True)
class Entry:
    """When an instance is next read, and what makes it due sooner. Written only when it changes."""

    kind: Kind
    # BOUND, STANDING: the earliest moment a finding (an idle verdict) could come; a standing idle one's next slot
    due: datetime | None = None
    anchor: datetime | None = None  # STANDING: the first reading of the standing finding, its slots' origin
    launched: datetime | None = None  # the launch it was read under: a restart makes it due
    tags: str = ""  # a digest of its tags when read: a change makes it due

    def encode(self) -> str:
        """A compact text for the state table: ``kind|due|anchor|launched|tags`` (epoch seconds)."""
        return "|".join(
            (self.kind.value, _epoch(self.due), _epoch(self.anchor), _epoch(self.launched), self.tags)
        )

    @classmethod
    def decode(cls, text: str) -> Entry | None:
        """None for a text this version cannot read: the instance is then simply read."""
        try:
            kind, due, anchor, launched, tags = text.split("|")
            return cls(Kind(kind), _moment(due), _moment(anchor), _moment(launched), tags)
        except ValueError:
            return None


def _epoch(moment: datetime | None) -> str:
    return str(int(moment.timestamp())) if moment is not None else ""


def _moment(text: str) -> datetime | None:
    return datetime.fromtimestamp(int(text), tz=UTC) if text else None


def tags_digest(tags: Mapping[str, str]) -> str:
    """A short digest of the tags but costguard's mark: enough to notice that a protect or snooze tag came or
    went. The mark is not in it (``is_due`` reads a marked instance at every sweep): the mark a read's own
    decision adds or removes does not make the instance due again at the next sweep."""
    text = "\n".join(f"{k}={v}" for k, v in sorted(tags.items()) if k != MARK_TAG_KEY)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def pending(tags: Mapping[str, str]) -> bool:
    """Whether a mark waits out its grace period: what is decided of the instance can change at any minute. A
    mark whose stop a dry run has decided (act/shadow.py) does not: a live run has stopped that instance."""
    return MARK_TAG_KEY in tags and DRY_RUN_STOPPED_TAG_KEY not in tags


def is_due(entry: Entry | None, now: datetime, *, tags: Mapping[str, str], launched: datetime | None) -> bool:
    """Whether the sweep at ``now`` reads the instance."""
    if entry is None or entry.kind is Kind.EVERY or pending(tags):
        return True
    if entry.launched != launched or entry.tags != tags_digest(tags):
        return True
    # BOUND, a standing finding that is not idle (no later than an idle window on), and a standing idle finding's
    # next slot: the first sweep at or after it reads, however late or early the sweeps before it ran. An entry
    # with no due moment (a standing one of an earlier version) is simply read.
    return entry.due is None or now >= entry.due


def next_slot(anchor: datetime, now: datetime, window: timedelta) -> datetime:
    """The first of the slots ``anchor + k * window`` after ``now``."""
    return anchor + window * ((now - anchor) // window + 1)


def next_entry(
    previous: Entry | None,
    findings: Iterable[Finding],
    *,
    now: datetime,
    earliest: datetime,
    window: timedelta,
    tags: Mapping[str, str],
    launched: datetime | None,
    slots: bool = True,
) -> Entry:
    """The entry after a read at ``now`` that gave ``findings``. ``earliest`` is, on the sweep's clock,
    ``earliest_finding``'s moment when there is no finding, ``idle_bound``'s when there are findings.
    A standing idle finding is due at its next slot, ``window`` apart from its anchor: a read at a slot (or
    after it, when the sweeps ran late) moves it to the slot after, one that forced earlier leaves it as it was.
    ``slots`` is False when the notifier's repeat window is shorter than the idle window: a standing finding
    is then news again between two slots, and is read at every sweep."""
    # A pending stop cancelled (working again) says nothing of when the next finding can come.
    reasons = {f.reason for f in findings if not f.cancels_mark}
    digest = tags_digest(tags)
    if not reasons:
        return Entry(Kind.BOUND, due=earliest, launched=launched, tags=digest)
    if not slots or pending(tags) or SNOOZE_TAG_KEY in tags:
        return Entry(Kind.EVERY, launched=launched, tags=digest)
    standing = previous is not None and previous.kind is Kind.STANDING and previous.launched == launched
    anchor = previous.anchor if standing and previous is not None and previous.anchor is not None else now
    due = next_slot(anchor, now, window) if Reason.GPU_IDLE in reasons else max(earliest, now)
    return Entry(Kind.STANDING, due=due, anchor=anchor, launched=launched, tags=digest)


def after_read(
    previous: Entry | None,
    findings: Sequence[Finding],
    gpus: Mapping[int, Series],
    *,
    known: datetime,
    now: datetime,
    thresholds: Thresholds,
    expected_gpus: int,
    tags: Mapping[str, str],
    launched: datetime | None,
    slots: bool = True,
) -> Entry:
    """The entry after a read at ``now`` (the sweep's clock) of the points up to ``known``: due again at the
    earliest moment a finding could come (``idle_bound`` while a finding stands, ``earliest_finding`` when none
    does; a cancelled mark alone is no finding), moved onto the sweep's clock."""
    if any(not f.cancels_mark for f in findings):
        bound = idle_bound(gpus, known, thresholds)
    else:
        bound = earliest_finding(gpus, known, thresholds, expected_gpus)
    return next_entry(
        previous,
        findings,
        now=now,
        earliest=bound + (now - known),
        window=thresholds.idle_window,
        tags=tags,
        launched=launched,
        slots=slots,
    )


def is_standing(entry: Entry | None, *, tags: Mapping[str, str], launched: datetime | None) -> bool:
    """Whether the instance's finding has stood unmarked, under the same tags, since its last read: told already,
    so its repeats are not news (a protect or snooze tag come or gone can change the decision, and its message)."""
    return (
        entry is not None
        and entry.kind is Kind.STANDING
        and entry.launched == launched
        and not pending(tags)
        and entry.tags == tags_digest(tags)
    )


def evidence_metrics(
    verdict: Verdict,
    findings: Sequence[Finding],
    *,
    standing: bool,
    tags: Mapping[str, str],
    policy: Policy,
    now: datetime,
) -> int:
    """How many of an instance's CPU and network metrics the sweep reads for a reading: those its message
    states (an idle verdict the CPU, a starved one the CPU and network), and only when it is news: not the
    repeat of a standing finding, not a marked instance waiting out its grace period (nothing is said of it
    until its stop, when it is read again). No decision depends on them."""
    if verdict not in (Verdict.IDLE, Verdict.STARVED) or standing:
        return 0
    if verdict is Verdict.STARVED:
        return 2
    return 0 if MARK_TAG_KEY in tags and waits_out_grace(findings, policy, now) else 1


def idle_bound(gpus: Mapping[int, Series], known: datetime, thresholds: Thresholds) -> datetime:
    """The earliest reading moment at which an idle verdict could come: when the last datapoint at or over the
    idle threshold has left the idle window (at the next reading when there is none)."""
    last_busy = max(
        (t for s in gpus.values() for t, v in s if v >= thresholds.idle_percent and t <= known), default=None
    )
    return known if last_busy is None else last_busy + thresholds.idle_window


def earliest_finding(
    gpus: Mapping[int, Series],
    known: datetime,
    thresholds: Thresholds,
    expected_gpus: int,
) -> datetime:
    """The earliest reading moment (the clock ``read_gpus`` is given) at which a reading of these GPUs could
    give a finding, knowing their points up to ``known`` and that the reading at ``known`` gave none.

    - idle: every GPU under the idle threshold through the idle window, so not before the last datapoint at
      or over it has left the window;
    - partial or missing metrics: a GPU silent through the idle window, so not before the last datapoint of
      the GPU that reported last-but-least recently has left it (a GPU with no point is silent already);
    - starved: every GPU working but under-fed through the starved window (``starved_bound``).

    A moment at or before ``known`` means "at the next reading".
    """
    window, period = thresholds.idle_window, thresholds.period
    if any(not gpus.get(i) for i in range(max(1, expected_gpus))):
        return known  # a GPU silent already: partial or missing can be said at any time
    idle = idle_bound(gpus, known, thresholds)
    if idle <= known:
        return known  # nothing busy in sight: idle can come at the next reading
    last_seen = min(max(t for t, _ in s) for s in gpus.values() if s)
    silent = last_seen + window
    return max(known + period, min(idle, silent, starved_bound(gpus, known, thresholds)))


def starved_bound(gpus: Mapping[int, Series], known: datetime, thresholds: Thresholds) -> datetime:
    """The earliest reading moment at which every GPU could be under-fed through the starved window.

    Each of the verdict's conditions on a GPU is bounded on its own, in the fastest way it could come true:
    its working mean under the starved threshold (each minute after its last point working at the idle
    threshold, the lowest value that still counts as working, as the oldest points leave the window), its
    share of working minutes at STARVED_MIN_WORKING_SHARE (each minute after its last point working), its
    coverage at MIN_COVERAGE (a point each minute after its last). The minutes after a GPU's last point count
    from that point, not from ``known``: a point published late can only make the verdict later. All must hold
    at once on every GPU: the latest of these moments bounds the verdict."""
    bound = known
    for series in gpus.values():
        points = [(t, v) for t, v in series if known - thresholds.starved_window < t <= known]
        origin = points[-1][0] if points else known
        bound = max(
            bound,
            _mean_bound(points, known, origin, thresholds),
            _share_bound(points, known, origin, thresholds),
        )
        needed = math.ceil(MIN_COVERAGE * thresholds.starved_periods) - len(points)
        bound = max(bound, origin + thresholds.period * max(0, needed))
    return bound


def _slide(
    times: list[datetime],
    known: datetime,
    origin: datetime,
    thresholds: Thresholds,
    met: Callable[[int, int], bool],
) -> datetime:
    """The first moment, a period at a time from ``known``, at which ``met(first, added)`` holds: ``first`` the
    index of the oldest of ``times`` still in the starved window then, ``added`` the periods since ``origin``."""
    period, window = thresholds.period, thresholds.starved_window
    first = 0
    for k in range(1, int(window / period) + 2):
        at = known + period * k
        while first < len(times) and times[first] <= at - window:
            first += 1
        if met(first, int((at - origin) / period)):
            return at
    return known + window + period


def _suffix_sums(values: list[float]) -> list[float]:
    """``sums[i]`` is ``sum(values[i:])``."""
    sums = [0.0] * (len(values) + 1)
    for i in range(len(values) - 1, -1, -1):
        sums[i] = sums[i + 1] + values[i]
    return sums


def _mean_bound(points: Series, known: datetime, origin: datetime, thresholds: Thresholds) -> datetime:
    low, limit = thresholds.idle_percent, thresholds.starved_percent
    working = [(t, v) for t, v in points if v >= low]
    if not working or sum(v for _, v in working) / len(working) < limit:
        return known  # under-fed already (or not working: the share decides)
    sums = _suffix_sums([v for _, v in working])

    def met(first: int, added: int) -> bool:
        return (sums[first] + added * low) / (len(working) - first + added) < limit

    return _slide([t for t, _ in working], known, origin, thresholds, met)


def _share_bound(points: Series, known: datetime, origin: datetime, thresholds: Thresholds) -> datetime:
    low = thresholds.idle_percent
    works = _suffix_sums([1.0 if v >= low else 0.0 for _, v in points])

    def met(first: int, added: int) -> bool:
        total = len(points) - first + added
        return total > 0 and (works[first] + added) / total >= STARVED_MIN_WORKING_SHARE

    if met(0, int((known - origin) / thresholds.period)):
        return known
    return _slide([t for t, _ in points], known, origin, thresholds, met)
