"""The adaptive idle policy: when an idle period is worth stopping, learned from each resource's own rhythm. Pure.

Per resource it keeps a compact history (``IdleHistory``): per hour-of-week bucket (when the idle period began,
UTC) and per shape of the moment, a histogram of the lengths of the idle periods it has seen (at least
``RECORDED_FROM`` long: shorter ones never reach a decision) and how each ended (work resumed, or the resource
was stopped). It is learned incrementally, one observation per sweep (``observe``), and serialised in a few
hundred bytes (``to_text``; at most ``MAX_ENTRIES`` histogram cells, the rarest dropped first).

The shape of the moment (``Shape``): CPU still busy while the GPUs rest is a checkpoint or evaluation pass
(``DIP``); the GPUs and CPU both dropping after hours of work is a job that has ended (``AFTER_JOB``); anything
else is ``PLAIN``.

``advise`` weighs, at each sweep of an idle resource, the dollars an earlier stop saves against the chance that
work resumes within the horizon times the cost of an interruption. It answers ``FIXED`` (do what the fixed window
does: always so without history), ``STOP`` (now, never before the floor) or ``WAIT`` (only once the fixed window
would stop, and only when the history says the idle period is about to end), with the reason in words.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from enum import IntEnum, StrEnum
from zoneinfo import ZoneInfo

from costguard.model import Finding, Reason
from costguard.policy import marked_at

# Upper edges (minutes) of the histogram's length bins: five-minute bins up to two hours (a sweep's step), then
# coarser. A length L falls in the first bin whose edge is >= L; past the last edge, in the overflow bin.
EDGES: tuple[int, ...] = (
    *range(5, 121, 5),
    150,
    180,
    240,
    300,
    360,
    480,
    600,
    720,
    960,
    1440,
    2880,
)
OVERFLOW = len(EDGES)
OVERFLOW_MINUTES = 4320  # what an overflow sample stands for (three days)
# Idle periods shorter than this are not recorded: no decision is ever taken on them.
RECORDED_FROM = 20
# The histogram's cells are capped (rarest dropped first) and its counts halved past MAX_COUNT: the state stays
# a few KB whatever the resource's age.
MAX_ENTRIES = 160
MAX_COUNT = 400
# A gap in observations longer than this ends the idle period: the resource was stopped (by its owner or by us).
GAP = timedelta(minutes=15)
# A gap after which a resource is running again counts as work resuming (someone started it to work).
RESTART_WITHIN = timedelta(hours=24)


class Shape(IntEnum):
    PLAIN = 0
    DIP = 1  # CPU still busy: a checkpoint or an evaluation pass
    AFTER_JOB = 2  # a long busy run just ended, CPU dropped too


class Ended(IntEnum):
    RESUMED = 0  # work came back on it
    STOPPED = 1  # it was stopped (by its owner, or costguard) and not started again soon


class Status(StrEnum):
    IDLE = "idle"  # every GPU reported and all stayed under the threshold in the period just ended
    BUSY = "busy"  # some GPU at or over the threshold
    UNKNOWN = "unknown"  # not running, or not every GPU reported


class Action(StrEnum):
    FIXED = "fixed"
    STOP = "stop"
    WAIT = "wait"


@dataclass(frozen=True)
class AdaptiveParams:
    """The adaptive policy's knobs (settings: COSTGUARD_ADAPTIVE_*, COSTGUARD_INTERRUPTION_COST_USD)."""

    idle_window: timedelta = timedelta(minutes=30)  # the fixed policy's: its stop comes at window + grace
    grace: timedelta = timedelta(minutes=15)
    floor: timedelta = timedelta(minutes=30)  # never a stop of an idle period shorter than this
    horizon: timedelta = timedelta(minutes=60)  # work resuming this soon after a stop is an interruption
    interruption_cost_usd: float = 25.0
    min_samples: int = 3  # survivors a histogram needs before it is believed
    max_resume_chance: float = 0.2  # an early stop needs at most this chance of work within the horizon
    # A stop the fixed window would make waits when a stop up to this much later is expected to cost less: the
    # interruptions it avoids (work resuming before it, or no longer within the horizon after it) against the
    # idle dollars of the wait (_better_stop).
    lookahead: timedelta = timedelta(minutes=30)
    cpu_busy_percent: float = 25.0
    long_job: timedelta = timedelta(hours=3)
    # A pause with the CPU busy (an evaluation pass) is held past the fixed window at most this long.
    max_hold: timedelta = timedelta(minutes=120)

    @property
    def fixed_due(self) -> timedelta:
        return self.idle_window + self.grace


@dataclass(frozen=True)
class Advice:
    action: Action
    why: str = ""
    resume_chance: float | None = None
    samples: int = 0


NO_HISTORY = Advice(Action.FIXED, "no idle history yet: the fixed window decides")


# The owner's time zone (an IANA name such as ``Asia/Tokyo``) as a tag of the resource (a team tags its own):
# hour-of-week buckets then follow the owner's day, not UTC.
TIMEZONE_TAG = "costguard:timezone"


def zone_of(tags: Mapping[str, str]) -> tzinfo:
    """The zone the resource's ``TIMEZONE_TAG`` names; UTC when absent or not a zone this runtime knows."""
    name = tags.get(TIMEZONE_TAG, "").strip()
    if not name:
        return UTC
    try:
        return ZoneInfo(name)
    except (ValueError, OSError, KeyError):  # unknown or malformed name (ZoneInfoNotFoundError is a KeyError)
        return UTC


def hour_of_week(at: datetime, zone: tzinfo = UTC) -> int:
    at = at.astimezone(zone)
    return at.weekday() * 24 + at.hour


def bin_of(minutes: float) -> int:
    for n, edge in enumerate(EDGES):
        if minutes <= edge:
            return n
    return OVERFLOW


def _bin_range(n: int) -> tuple[int, int]:
    """(lower, upper] minutes of bin ``n``."""
    lower = EDGES[n - 1] if n > 0 else 0
    return lower, EDGES[n] if n < OVERFLOW else OVERFLOW_MINUTES


def _bin_minutes(n: int) -> float:
    """The length a sample of bin ``n`` stands for: its upper edge."""
    return float(_bin_range(n)[1])


Cell = tuple[int, int, int, int]  # hour of week, shape, length bin, how it ended


@dataclass
class IdleHistory:
    """One resource's learned idle periods and where it stands now. ``to_text``/``from_text`` round-trip it."""

    counts: dict[Cell, int] = field(default_factory=dict)
    idle_since: datetime | None = None  # start of the current idle period
    work_since: datetime | None = None  # end of the last idle period of at least RECORDED_FROM minutes
    last_seen: datetime | None = None  # the last period observed running (idle or busy)
    last_status: Status = Status.UNKNOWN
    cpu_sum: float = 0.0  # CPU over the current idle period, for its shape
    cpu_n: int = 0
    busy_minutes: int = 0  # the busy run before the current idle period
    first_seen: datetime | None = None
    frozen: int | None = None  # the current idle period's shape, settled once it reaches the idle window
    recent: list[float] = field(default_factory=list)  # the CPU of its last three periods
    # Not stored: the owner's zone (from the resource's tags at each sweep), and the cells recorded since the
    # caller last took them (``take_recorded``: what the fleet's priors learn, detect/idle_priors.py).
    zone: tzinfo = field(default=UTC, compare=False)
    recorded: list[Cell] = field(default_factory=list, compare=False)
    # Not stored either: the CPU of the period just observed (each sweep observes, then advises).
    cpu_last: float | None = field(default=None, compare=False)

    # -- learning ------------------------------------------------------------------------------------------

    @property
    def samples(self) -> int:
        return sum(self.counts.values())

    def observe(
        self, period_end: datetime, status: Status, cpu: float | None, params: AdaptiveParams
    ) -> bool:
        """One sweep's observation of the period ending ``period_end``. Returns whether the state changed."""
        before = self._key()
        self.cpu_last = cpu
        if self.first_seen is None:
            self.first_seen = period_end
        gap = self.last_seen is not None and period_end - self.last_seen > GAP
        if status is Status.UNKNOWN:
            if (
                self.idle_since is not None
                and self.last_seen is not None
                and period_end - self.last_seen > GAP
            ):
                # Not seen running for a while: it was stopped. How long it stays stopped is learned when it
                # is seen again (a restart soon after is work resuming).
                pass
            return self._key() != before
        if gap and self.idle_since is not None and self.last_seen is not None:
            stopped_for = period_end - self.last_seen
            ended = Ended.RESUMED if stopped_for <= RESTART_WITHIN else Ended.STOPPED
            end = period_end - timedelta(minutes=5) if ended is Ended.RESUMED else self.last_seen
            self._record(end, ended, params)
        if status is Status.IDLE:
            if self.idle_since is None:
                self.idle_since = period_end - timedelta(minutes=5)
                started = self.work_since or self.first_seen
                self.busy_minutes = int((self.idle_since - started).total_seconds() // 60) if started else 0
                self.cpu_sum, self.cpu_n, self.frozen, self.recent = 0.0, 0, None, []
            if cpu is not None and self.frozen is None:
                # The shape is read from the CPU of the last 15 minutes, and settled at the idle window: a
                # checkpoint that runs into the end of a job is then read by where it stands, not its start.
                self.recent = [*self.recent[-2:], cpu]
                self.cpu_sum, self.cpu_n = sum(self.recent), len(self.recent)
            if self.frozen is None and period_end - self.idle_since >= params.idle_window:
                self.frozen = int(self.shape(params))
            elif self.frozen == Shape.DIP and cpu is not None and cpu < params.cpu_busy_percent:
                # Settled as a pass, but the CPU has dropped since: the pass is over, and the idle period after
                # it is what the instance did before it (a job that ended, or a plain pause), judged and learned
                # as such.
                long_job = self.busy_minutes >= params.long_job.total_seconds() / 60
                self.frozen = int(Shape.AFTER_JOB if long_job else Shape.PLAIN)
        elif self.idle_since is not None:
            self._record(period_end - timedelta(minutes=5), Ended.RESUMED, params)
        elif self.work_since is None:
            self.work_since = period_end - timedelta(minutes=5)
        self.last_seen = period_end
        self.last_status = status
        return self._key() != before

    def _key(self) -> tuple[object, ...]:
        # What a deployed sweep must write back when it changes (the CPU sums change every idle sweep, which
        # is kept in memory there only when the shape is already settled: see ``persisted``).
        return (self.idle_since, self.work_since, self.samples, self.busy_minutes, self.frozen)

    def _record(self, end: datetime, ended: Ended, params: AdaptiveParams) -> None:
        start = self.idle_since
        assert start is not None
        minutes = (end - start).total_seconds() / 60
        if minutes >= RECORDED_FROM:
            cell = (hour_of_week(start, self.zone), int(self.shape(params)), bin_of(minutes), int(ended))
            self.counts[cell] = self.counts.get(cell, 0) + 1
            self.recorded.append(cell)
            self._bound()
            # The work before it goes on: an evaluation or checkpoint pass (the CPU busy through it) that work
            # resumed after does not end the job, so a long run with passes is still one long run.
            if not (cell[1] == Shape.DIP and ended is Ended.RESUMED):
                self.work_since = end
        self.idle_since = None
        self.cpu_sum, self.cpu_n = 0.0, 0
        self.frozen, self.recent = None, []

    def _bound(self) -> None:
        if self.samples > MAX_COUNT:
            self.counts = {c: n // 2 for c, n in self.counts.items() if n // 2}
        if len(self.counts) > MAX_ENTRIES:
            keep = sorted(self.counts.items(), key=lambda kv: kv[1], reverse=True)[:MAX_ENTRIES]
            self.counts = dict(keep)

    def shape(self, params: AdaptiveParams) -> Shape:
        if self.frozen is not None:
            return Shape(self.frozen)
        cpu = min(self.recent) if self.recent else None  # busy all along its last 15 minutes
        if cpu is not None and cpu >= params.cpu_busy_percent:
            return Shape.DIP
        if self.busy_minutes >= params.long_job.total_seconds() / 60 and (cpu is not None):
            return Shape.AFTER_JOB
        return Shape.PLAIN

    def take_recorded(self) -> list[Cell]:
        """The idle periods recorded since the last call (for the fleet's priors), forgotten here."""
        taken, self.recorded = self.recorded, []
        return taken

    @property
    def cpu_now(self) -> float | None:
        return round(self.cpu_sum / self.cpu_n, 1) if self.cpu_n else None

    # -- storage -------------------------------------------------------------------------------------------

    def to_text(self) -> str:
        """A compact text form (what the state table stores): ``v1|since|work|seen|status|cpu|busy|first|cells``."""

        def t(at: datetime | None) -> str:
            return str(int(at.timestamp())) if at is not None else ""

        cells = ",".join(f"{h}.{s}.{b}.{e}:{n}" for (h, s, b, e), n in sorted(self.counts.items()))
        cpu = "/".join(f"{c:.0f}" for c in self.recent)
        return "|".join(
            [
                "v1" if self.frozen is None else f"v1.{self.frozen}",
                t(self.idle_since),
                t(self.work_since),
                t(self.last_seen),
                self.last_status.value[0],
                cpu,
                str(self.busy_minutes),
                t(self.first_seen),
                cells,
            ]
        )

    @classmethod
    def from_text(cls, text: str) -> IdleHistory:
        """The state ``to_text`` wrote; anything unreadable (another version, a hand edit) starts afresh."""
        try:
            v, since, work, seen, status, cpu, busy, first, cells = text.split("|")
            version, _, frozen = v.partition(".")
            if version != "v1":
                return cls()

            def t(raw: str) -> datetime | None:
                return datetime.fromtimestamp(int(raw), tz=UTC) if raw else None

            counts: dict[Cell, int] = {}
            for cell in filter(None, cells.split(",")):
                key, _, n = cell.partition(":")
                h, s, b, e = (int(x) for x in key.split("."))
                counts[(h, s, b, e)] = int(n)
            recent = [float(c) for c in cpu.split("/") if c]
            statuses = {s.value[0]: s for s in Status}
            return cls(
                counts=counts,
                idle_since=t(since),
                work_since=t(work),
                last_seen=t(seen),
                last_status=statuses.get(status, Status.UNKNOWN),
                cpu_sum=sum(recent),
                cpu_n=len(recent),
                recent=recent,
                busy_minutes=int(busy or 0),
                first_seen=t(first),
                frozen=int(frozen) if frozen else None,
            )
        except ValueError:
            return cls()


def period_status(
    gpus: Mapping[int, Sequence[tuple[datetime, float]]],
    gpu_count: int,
    start: datetime,
    end: datetime,
    percent: float,
) -> Status:
    """What a sweep observes of [start, end): idle when every GPU reported in it and all stayed under
    ``percent``, busy when any reached it, else unknown (the backtest's ``statuses``, for live series)."""
    reported, busy = 0, False
    for series in gpus.values():
        values = [v for t, v in series if start <= t < end]
        if values:
            reported += 1
            busy = busy or max(values) >= percent
    if busy:
        return Status.BUSY
    return Status.IDLE if reported >= max(1, gpu_count) else Status.UNKNOWN


# -- the decision ----------------------------------------------------------------------------------------


def _hours_apart(a: int, b: int) -> int:
    """Distance between two hours of the day, around midnight."""
    d = abs(a - b) % 24
    return min(d, 24 - d)


Sample = tuple[int, int, float]  # length bin, how it ended, count (a prior's counts are weighted)
# A prior's cells: hour of the owner's day, shape, length bin, how it ended (detect/idle_priors.py).
PriorCell = tuple[int, int, int, int]
# The fleet's prior weighs as this many idle periods of the resource's own, and shrinks as its own grow:
# PRIOR_STRENGTH / (PRIOR_STRENGTH + own) of that at each level.
PRIOR_STRENGTH = 8.0


def _own_levels(history: IdleHistory, shape: Shape, bucket: int) -> Iterable[tuple[str, list[Sample]]]:
    """The samples (bin, ended, count) to believe, most specific first: this shape around this hour of the
    week, then around this hour of any day (this shape, then both shapes of a pause with the CPU idle), then
    at any hour (likewise). A pause with the CPU busy is judged by such pauses only."""
    day_hour = bucket % 24
    dip = shape is Shape.DIP
    same = [(c, n) for c, n in history.counts.items() if c[1] == shape]
    alike = [(c, n) for c, n in history.counts.items() if (c[1] == Shape.DIP) == dip]
    if dip:  # checkpoints and evaluation passes keep no hours: all of this instance's together
        yield "any_hour", [(c[2], c[3], n) for c, n in same]
        return
    yield "week_hour", [(c[2], c[3], n) for c, n in same if abs(c[0] - bucket) <= 1]
    yield "day_hour", [(c[2], c[3], n) for c, n in same if _hours_apart(c[0] % 24, day_hour) <= 1]
    yield "day_hour", [(c[2], c[3], n) for c, n in alike if _hours_apart(c[0] % 24, day_hour) <= 1]
    yield "any_hour", [(c[2], c[3], n) for c, n in same]
    yield "any_hour", [(c[2], c[3], n) for c, n in alike]


def _prior_samples(
    prior: Mapping[PriorCell, float] | None, shape: Shape, day_hour: int, level: str, alike: bool
) -> list[Sample]:
    """The fleet's samples at a level (a prior keeps the hour of the day, not of the week). A plain pause is
    judged by its peers at this hour of the day only: at any hour, a fleet's plain pauses are mostly its nights,
    which say little about this afternoon's."""
    if not prior or level == "week_hour" or (level == "any_hour" and shape is Shape.PLAIN):
        return []
    dip = shape is Shape.DIP
    out = []
    for (hour, s, b, e), n in prior.items():
        same = s == shape if not alike else (s == Shape.DIP) == dip
        if same and (level == "any_hour" or dip or _hours_apart(hour, day_hour) <= 1):
            out.append((b, e, n))
    return out


def _levels(
    history: IdleHistory, shape: Shape, bucket: int, prior: Mapping[PriorCell, float] | None
) -> Iterable[tuple[str, list[Sample], float]]:
    """Each level's samples, the resource's own with the fleet's prior blended in, and the prior's share."""
    levels = list(_own_levels(history, shape, bucket))
    seen_day_hour = seen_any = False
    for level, own in levels:
        alike = (level == "day_hour" and seen_day_hour) or (level == "any_hour" and seen_any)
        seen_day_hour |= level == "day_hour"
        seen_any |= level == "any_hour"
        fleet = _prior_samples(prior, shape, bucket % 24, level, alike)
        fleet_total = sum(n for _, _, n in fleet)
        if not fleet_total:
            yield level, own, 0.0
            continue
        own_total = sum(n for _, _, n in own)
        weight = min(1.0, PRIOR_STRENGTH / fleet_total) * PRIOR_STRENGTH / (PRIOR_STRENGTH + own_total)
        blended = [*own, *((b, e, n * weight) for b, e, n in fleet)]
        yield level, blended, fleet_total * weight / (own_total + fleet_total * weight)


def _survivors(samples: list[Sample], idle_minutes: float) -> list[Sample]:
    """The samples at least as long as the idle period so far (one that lasted exactly as long ends now)."""
    out = []
    for b, ended, n in samples:
        lower, upper = _bin_range(b)
        longer = upper >= idle_minutes if upper - lower <= 5 else (lower + upper) / 2 >= idle_minutes
        if longer:
            out.append((b, ended, n))
    return out


def duration_text(minutes: float) -> str:
    if minutes < 120:
        return f"{round(minutes)} min"
    hours = minutes / 60
    return f"{hours:.0f} h" if hours >= 10 or hours == int(hours) else f"{hours:.1f} h"


def _chosen(
    history: IdleHistory,
    shape: Shape,
    bucket: int,
    idle: float,
    params: AdaptiveParams,
    prior: Mapping[PriorCell, float] | None = None,
) -> tuple[str, list[Sample], float]:
    """The level believed, its samples at least as long as the idle period so far (none: no level is) and the
    fleet's share of them."""
    for level, samples, pooled in _levels(history, shape, bucket, prior):
        survivors = _survivors(samples, idle)
        # The hour of the week needs enough survivors; the others enough samples and one survivor at least:
        # ten lunches of which one lasted this long say more about this one than the nights do.
        enough = survivors if level == "week_hour" else samples
        if sum(n for _, _, n in enough) >= params.min_samples and survivors:
            return level, survivors, pooled
    return "", [], 0.0


def _moment_and_where(
    history: IdleHistory, shape: Shape, level: str, bucket: int, idle: float, cpu: float | None
) -> tuple[str, str]:
    """The advice's words: the moment (how long idle, and in what shape) and the idle periods it is judged by."""
    where = {
        "week_hour": f"idle periods starting around {bucket % 24:02d}:00 on this weekday",
        "day_hour": f"idle periods starting around {bucket % 24:02d}:00",
        "any_hour": "such idle periods",
    }[level]
    if shape is Shape.AFTER_JOB:
        moment = f"idle {duration_text(idle)} after a {duration_text(history.busy_minutes)} job ended"
    elif shape is Shape.DIP:
        moment = f"GPUs idle {duration_text(idle)} with the CPU still busy ({cpu:.0f}%)"
        where = "such pauses"
    else:
        moment = f"idle {duration_text(idle)}"
    return moment, where


def _own_chance(
    history: IdleHistory, shape: Shape, bucket: int, idle: float, params: AdaptiveParams, horizon: float
) -> float:
    """The chance that work resumes within the horizon by the resource's own history alone (0: it has none)."""
    _, own, _ = _chosen(history, shape, bucket, idle, params)
    total = sum(n for _, _, n in own)
    soon = sum(n for b, ended, n in own if ended == Ended.RESUMED and _bin_minutes(b) <= idle + horizon)
    return soon / total if total else 0.0


def _weighted_median(values: list[tuple[float, float]]) -> float:
    """The median of (value, weight) pairs."""
    ordered = sorted(values)
    half = sum(w for _, w in ordered) / 2
    running = 0.0
    for value, weight in ordered:
        running += weight
        if running >= half:
            return value
    return ordered[-1][0]


def _count_text(n: float) -> str:
    return f"{n:.0f}" if abs(n - round(n)) < 0.05 else f"{n:.1f}"


def advise(
    history: IdleHistory | None,
    now: datetime,
    hourly_usd: float | None,
    params: AdaptiveParams,
    prior: Mapping[PriorCell, float] | None = None,
) -> Advice:
    """Stop now, wait, or do what the fixed window does, for a resource whose GPUs are idle at ``now``.

    ``prior``: what resources like it have learned (detect/idle_priors.py), blended with its own history and
    weighing less as that grows. Without either, always the fixed window."""
    pooled_samples = sum(prior.values()) if prior else 0.0
    if history is None or history.idle_since is None:
        return NO_HISTORY
    if history.samples + pooled_samples < params.min_samples:
        return NO_HISTORY
    idle = (now - history.idle_since).total_seconds() / 60
    shape = history.shape(params)
    bucket = hour_of_week(history.idle_since, history.zone)
    horizon = params.horizon.total_seconds() / 60
    fixed_due = params.fixed_due.total_seconds() / 60
    floor = params.floor.total_seconds() / 60
    cpu = history.cpu_now
    busy_now = history.cpu_last is not None and history.cpu_last >= params.cpu_busy_percent
    if shape is Shape.DIP and busy_now and idle < fixed_due + params.max_hold.total_seconds() / 60:
        # The CPU still busy now while the GPUs rest is work (a checkpoint, an evaluation pass): never stopped
        # early on history (a pass cut short by a stop is learned as a pause that never resumed, so the history
        # would learn to stop passes), and held past the fixed window for up to max_hold. Once the CPU drops,
        # the pass is over: judged as any idle period of its shape.
        if idle < fixed_due:
            return Advice(Action.FIXED, "the CPU is still busy: not due before the fixed window")
        return Advice(
            Action.WAIT,
            f"GPUs idle {duration_text(idle)} but the CPU is still busy ({cpu:.0f}%): a checkpoint or "
            "evaluation pass, not an idle instance",
        )
    level, chosen, pooled = _chosen(history, shape, bucket, idle, params, prior)
    if not chosen:
        return Advice(
            Action.FIXED, "too little history for an idle period this long: the fixed window decides"
        )
    total = sum(n for _, _, n in chosen)
    soon = sum(n for b, ended, n in chosen if ended == Ended.RESUMED and _bin_minutes(b) <= idle + horizon)
    chance = soon / total
    typical = _weighted_median([(_bin_minutes(b), n) for b, _, n in chosen])
    remaining_hours = sum(max(0.0, _bin_minutes(b) - idle) * n for b, _, n in chosen) / total / 60
    saves = (hourly_usd or 0.0) * remaining_hours
    risk = chance * params.interruption_cost_usd
    days = min(14, max(1, round((now - (history.first_seen or now)).total_seconds() / 86400)))
    moment, where = _moment_and_where(history, shape, level, bucket, idle, cpu)
    if pooled == 0:
        whose, when = "on this instance", f"in the last {days} days"
    else:
        whose = "on instances like this one" if pooled >= 0.5 else "on this instance and those like it"
        when = "lately"
    believed = total >= params.min_samples  # an early stop needs enough idle periods this long
    if pooled and believed:  # the fleet stops it early only when its own record does not say otherwise
        believed = _own_chance(history, shape, bucket, idle, params, horizon) <= params.max_resume_chance
    if believed and idle >= floor and chance <= params.max_resume_chance and saves > risk:
        return Advice(
            Action.STOP,
            f"{moment}; {whose} {where} lasted {duration_text(typical)} (median) {when}, and "
            f"{_count_text(soon)} of {_count_text(total)} ended within the next {duration_text(horizon)}",
            chance,
            round(total),
        )
    later = _better_stop(chosen, idle, horizon, hourly_usd, params) if idle >= fixed_due else None
    if later is not None:
        return Advice(
            Action.WAIT,
            f"{moment}; {where} {whose} {when}: {_count_text(soon)} of {_count_text(total)} ended within the next "
            f"{duration_text(horizon)}, so a stop at {duration_text(later)} idle is expected to cost less than one "
            "now: waiting",
            chance,
            round(total),
        )
    return Advice(Action.FIXED, f"{moment}: the history does not say otherwise", chance, round(total))


def _better_stop(
    chosen: list[Sample], idle: float, horizon: float, hourly_usd: float | None, params: AdaptiveParams
) -> float | None:
    """The idle time (minutes, within ``params.lookahead`` of now) at which a stop is expected to cost least, if
    that is later than now; None: stop now (the fixed window's stop). A stop at ``t`` costs the interruption's
    price x the share of such periods that resume within the horizon after ``t`` (those resuming before it are
    never stopped), plus the instance's price over the wait (until the period resumed, or ``t``). Without a
    price, never later."""
    total = sum(n for _, _, n in chosen)
    if not hourly_usd or not total:
        return None
    resumed = [(_bin_minutes(b), n) for b, ended, n in chosen if ended == Ended.RESUMED]

    def cost(t: float) -> float:
        risk = sum(n for m, n in resumed if t <= m <= t + horizon) / total
        waited = sum(n * max(0.0, min(_bin_minutes(b), t) - idle) for b, _, n in chosen) / total
        return params.interruption_cost_usd * risk + hourly_usd / 60 * waited

    steps = range(5, int(params.lookahead.total_seconds() // 60) + 1, 5)
    best, at = cost(idle), None
    for t in (idle + w for w in steps):
        if (then := cost(t)) < best:
            best, at = then, t
    return at


# The idle findings the policy adapts: EC2 GPU instances and SageMaker notebooks.
ADAPTED = (Reason.GPU_IDLE, Reason.NOTEBOOK_IDLE)


def adapt(finding: Finding, advice: Advice, now: datetime, params: AdaptiveParams) -> Finding:
    """The idle finding as the policy (``policy.decide_all``, unchanged) must see it for the advice to hold.

    - ``STOP`` of a marked resource in its grace period: its mark is read as made a grace period ago, so the
      policy stops it now (every other rule kept: protect tag, snooze, stop blockers, the caps). An unmarked
      one is marked now, as the fixed window does (costguard stops only what carries its mark).
    - ``WAIT`` once the fixed window would stop: reported, not acted on, with the reason (the mark stays).
    - ``FIXED``: unchanged. The reason goes in the summary (what the message shows) and the evidence.
    """
    if advice.action is Action.FIXED or finding.reason not in ADAPTED or not finding.remediable:
        return finding
    mark = marked_at(finding.resource.tags)
    evidence = finding.evidence | {
        "idle_policy": f"adaptive: {advice.action.value}",
        "idle_policy_reason": advice.why,
        "resume_chance": round(advice.resume_chance, 2) if advice.resume_chance is not None else None,
    }
    due = mark + params.grace if mark is not None else None
    if advice.action is Action.STOP:
        if mark is None:  # marked now, as the fixed window does; the mark message says why it will not wait
            return finding.model_copy(
                update={
                    "summary": f"{finding.summary} It will be stopped at the next sweep, before the end of its "
                    f"grace period: {advice.why}.",
                    "evidence": evidence,
                }
            )
        if due is None or due <= now:
            return finding.model_copy(update={"evidence": evidence})
        # Its grace period ends now; the mark itself stays as costguard wrote it (act/marks.py vouches for it).
        return finding.model_copy(
            update={
                "resource": finding.resource.model_copy(update={"grace_ends": now}),
                "summary": f"{finding.summary} Stopped before the end of its grace period: {advice.why}.",
                "evidence": evidence,
            }
        )
    if due is None or due > now:
        return finding.model_copy(update={"evidence": evidence})
    return finding.model_copy(
        update={
            "remediable": False,
            "report_note": f"not stopped yet: {advice.why}",
            "summary": f"{finding.summary} Not stopped yet: {advice.why}.",
            "evidence": evidence,
        }
    )
