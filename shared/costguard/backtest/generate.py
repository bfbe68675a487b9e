"""A labelled week of a GPU fleet, generated from a seed: what the idle policies are measured on.

``generate(seed, instances=60, days=7, history_days=14)`` builds, on a five-minute grid starting on a Monday at
00:00 UTC, ``history_days`` of history (for a policy to learn from) and then the ``days`` measured, for a fleet
whose instances each play one role:

- trainer: jobs of 4-16 h (GPU 85-99%, CPU 60-85%) with checkpoint dips every 45-120 min (GPU under 2% for 5-20
  min, CPU still busy), now and then an evaluation pass of 45-70 min (GPU idle, CPU busy); between jobs the GPU
  and CPU both drop for 2.5-10 h (one gap in seven is shorter, 1-2.5 h), and in three gaps out of ten its owner
  stops it for part of the gap;
- notebook: weekdays from 08:00-10:00 to 17:00-19:00 bursts of work with think pauses (5-15 min) and short
  meetings (20-40 min); a lunch break at the same time each day (its own hour between 11:30 and 13:00, its own
  length of 55-80 min, a few minutes of jitter); idle nights and weekends (a third of them are stopped by their
  owner instead);
- pipeline: a daily batch of 4-8 jobs at its own hour, with gaps of exactly 40 or 50 minutes (its own) between
  jobs, then idle (or stopped) until the next batch;
- starved: jobs whose GPUs work under-fed (30-55%) with the CPU saturated, long idle gaps between them;
- serving: light inference all the time (GPU 6-30%), with quiet stretches of 10-35 min under the threshold;
- protected (tag ``costguard:protect``) trainers and notebooks, and trainers that publish no GPU metrics.

Every five-minute slot of every instance is labelled: ``work`` (a job, a dip, an evaluation pass, a think pause,
serving), ``idle`` (running, nobody using it: between jobs, lunch, nights, gaps between a pipeline's jobs) or not
running. The result is a backtest ``History`` over the measured days whose subjects carry the whole series
(history included, for learning), their CPU series and their labels (``Subject.cpu``, ``work``, ``idle``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from costguard.backtest.history import GpuTrack, History, Interval, Subject, SubjectKind
from costguard.model import Accelerators, Ec2Instance
from costguard.pricing import PriceBook

STEP = timedelta(minutes=5)
DAY = 288  # five-minute slots a day
WEEK_START = datetime(2026, 11, 16, tzinfo=UTC)  # a Monday
PROJECT_SEED = 17
PROTECT_TAG = "costguard:protect"

# Per 60 instances, in the order roles are dealt out (round robin, so a small fleet still has one of each).
ROLE_COUNTS = {
    "trainer": 12,
    "notebook": 14,
    "pipeline": 10,
    "starved": 6,
    "serving": 8,
    "protected": 5,
    "metricless": 5,
}
TYPES = {
    "trainer": ["g5.2xlarge", "g5.12xlarge", "p3.2xlarge", "g5.xlarge", "p4d.24xlarge"],
    "notebook": ["g5.xlarge", "g4dn.xlarge", "g5.2xlarge", "g6.xlarge"],
    "pipeline": ["g5.xlarge", "g6.xlarge", "g5.2xlarge"],
    "starved": ["g5.2xlarge", "g5.12xlarge"],
    "serving": ["g4dn.xlarge", "g6.xlarge"],
    "protected": ["g5.2xlarge", "g5.xlarge"],
    "metricless": ["g5.xlarge", "g4dn.xlarge"],
}
GPUS = {"g5.12xlarge": (4, "A10G"), "p4d.24xlarge": (8, "A100"), "p3.2xlarge": (1, "V100")}
MODELS = {"g5": "A10G", "g4dn": "T4", "g6": "L4", "p3": "V100", "p4d": "A100"}

# Kinds of slot: (GPU low, high, CPU low, high, is work); None GPU: not running.
KINDS: dict[str, tuple[float, float, float, float, bool]] = {
    "busy": (85, 99, 60, 85, True),
    "dip": (0, 2, 55, 80, True),
    "idle": (0, 1.5, 0.5, 4, False),
    "think": (0, 3, 3, 12, True),
    "notebook": (15, 90, 15, 45, True),
    "job": (70, 95, 50, 80, True),
    "starved": (30, 55, 85, 97, True),
    "serve": (6, 30, 10, 25, True),
    "quiet": (0.5, 4, 8, 15, True),
}


def role_order(counts: dict[str, int] | None = None) -> list[str]:
    counts = counts or ROLE_COUNTS
    left = dict(counts)
    order: list[str] = []
    while any(left.values()):
        for role in counts:
            if left[role]:
                order.append(role)
                left[role] -= 1
    return order


@dataclass
class Slots:
    """One instance's slots: GPU percent (None: not running), CPU percent, work label."""

    total: int
    rng: random.Random
    index: int = 0  # the instance's number in the fleet
    gpu: list[float | None] = field(default_factory=list)
    cpu: list[float | None] = field(default_factory=list)
    work: list[bool] = field(default_factory=list)

    @property
    def at(self) -> int:
        return len(self.gpu)

    def fill(self, kind: str, count: int) -> None:
        count = max(0, min(count, self.total - self.at))
        if kind == "off":
            self.gpu += [None] * count
            self.cpu += [None] * count
            self.work += [False] * count
            return
        g0, g1, c0, c1, work = KINDS[kind]
        uniform = self.rng.uniform
        for _ in range(count):
            self.gpu.append(round(uniform(g0, g1), 1))
            self.cpu.append(round(uniform(c0, c1), 1))
            self.work.append(work)

    def until(self, kind: str, slot: int) -> None:
        self.fill(kind, slot - self.at)

    @property
    def full(self) -> bool:
        return self.at >= self.total


def _trainer(s: Slots, dips: bool = True, busy: str = "busy") -> None:
    rng = s.rng
    s.fill("idle", rng.randrange(0, DAY))
    while not s.full:
        job_end = s.at + rng.randrange(4 * 12, 16 * 12)
        while s.at < job_end and not s.full:
            s.fill(busy, rng.randrange(9, 24))  # 45-120 min of work
            if dips and s.at < job_end:
                if rng.random() < 0.12:
                    s.fill("dip", rng.randrange(9, 15))  # an evaluation pass: 45-70 min, CPU busy
                else:
                    s.fill("dip", rng.randrange(1, 5))  # a checkpoint: 5-20 min
        gap = rng.randrange(12, 30) if rng.random() < 1 / 7 else rng.randrange(30, 120)
        if rng.random() < 0.3 and gap > 36:
            first = rng.randrange(12, gap - 18)
            s.fill("idle", first)
            s.fill("off", gap - first - 2)
            s.fill("idle", 2)
        else:
            s.fill("idle", gap)


def _notebook(s: Slots) -> None:
    rng = s.rng
    start_h, end_h = rng.randrange(96, 120), rng.randrange(204, 228)  # 08:00-10:00, 17:00-19:00
    lunch, lunch_len = rng.choice([138, 144, 150, 156]), rng.randrange(11, 17)  # 11:30-13:00, 55-80 min
    stops_nights = rng.random() < 1 / 3
    day = 0
    while not s.full:
        base = day * DAY
        if day % 7 >= 5:
            s.until("off" if stops_nights else "idle", base + DAY)
            day += 1
            continue
        start = base + start_h + rng.randrange(-2, 3)
        s.until("off" if stops_nights and s.at < start - 2 else "idle", start - 2 if stops_nights else start)
        s.until("idle", start)
        begin = base + lunch + rng.randrange(-2, 3)
        for stop_at in (begin, base + end_h + rng.randrange(-3, 4)):
            while s.at < stop_at - 2 and not s.full:
                s.fill("notebook", min(rng.randrange(2, 9), stop_at - s.at))
                r = rng.random()
                if r < 0.06:
                    s.fill("idle", min(rng.randrange(4, 9), max(0, stop_at - s.at)))  # a meeting
                elif r < 0.6:
                    s.fill("think", min(rng.randrange(1, 4), max(0, stop_at - s.at)))
            s.until("notebook", stop_at)
            if stop_at == begin:
                s.fill("idle", lunch_len + rng.randrange(-1, 2))
        if stops_nights:
            s.fill("idle", rng.randrange(2, 12))
        s.until("off" if stops_nights else "idle", base + DAY)
        day += 1


def _pipeline(s: Slots) -> None:
    rng = s.rng
    hour, gap, job = rng.randrange(0, 24), rng.choice([8, 10]), rng.randrange(5, 13)
    stops = rng.random() < 0.3
    day = 0
    while not s.full:
        start = day * DAY + hour * 12 + rng.randrange(-1, 2)
        if start > s.at:
            idle = start - s.at
            if stops and idle > 60:
                first = rng.randrange(12, 36)
                s.fill("idle", first)
                s.fill("off", idle - first - 3)
            s.until("idle", start)
        for n in range(rng.randrange(4, 9)):
            if n:
                s.fill("idle", gap)
            s.fill("job", job + rng.randrange(-2, 3))
        day += 1


def _serving(s: Slots) -> None:
    rng = s.rng
    while not s.full:
        s.fill("serve", rng.randrange(12, 36))
        s.fill("quiet", rng.randrange(2, 8))


def _protected(s: Slots) -> None:
    (_trainer if s.rng.random() < 0.5 else _notebook)(s)


ROLES: dict[str, Callable[[Slots], None]] = {
    "trainer": _trainer,
    "notebook": _notebook,
    "pipeline": _pipeline,
    "starved": lambda s: _trainer(s, dips=False, busy="starved"),
    "serving": _serving,
    "protected": _protected,
    "metricless": _trainer,
}


def accelerators(instance_type: str) -> Accelerators:
    count, model = GPUS.get(instance_type, (1, MODELS[instance_type.split(".")[0]]))
    return Accelerators(kind="nvidia_gpu", count=count, model=model)


def _spans(flags: list[bool], times: list[datetime], lo: int) -> list[Interval]:
    out: list[Interval] = []
    start: int | None = None
    for n in range(lo, len(flags) + 1):
        on = n < len(flags) and flags[n]
        if on and start is None:
            start = n
        elif not on and start is not None:
            out.append((times[start], times[n - 1] + STEP))
            start = None
    return out


@dataclass(frozen=True)
class Generated:
    history: History
    roles: dict[str, str]  # instance id -> role
    seed: int


def generate(
    seed: int = PROJECT_SEED,
    instances: int = 60,
    days: int = 7,
    history_days: int = 14,
    *,
    prices: PriceBook | None = None,
    region: str = "us-east-1",
    account: str = "123456789012",
) -> Generated:
    """The labelled fleet of ``seed``; the same seed gives the same world."""
    return build(
        Family(ROLE_COUNTS, ROLES, TYPES, lambda role, n, rng: {"Name": f"{role}-{n:02d}", "team": "ml"}),
        seed,
        instances,
        days,
        history_days,
        prices=prices,
        region=region,
        account=account,
    )


@dataclass(frozen=True)
class Family:
    """A generator family: its roles (how many per 60 instances, how each fills its slots, its instance types)
    and the tags of an instance of a role (``costguard:protect`` is added to the ``protected`` role's)."""

    counts: dict[str, int]
    roles: dict[str, Callable[[Slots], None]]
    types: dict[str, list[str]]
    tags: Callable[[str, int, random.Random], dict[str, str]]


def build(
    family: Family,
    seed: int,
    instances: int,
    days: int,
    history_days: int,
    *,
    prices: PriceBook | None = None,
    region: str = "us-east-1",
    account: str = "123456789012",
) -> Generated:
    """The labelled fleet of ``family`` and ``seed``."""
    prices = prices or PriceBook()
    origin = WEEK_START - timedelta(days=history_days)
    total = (history_days + days) * DAY
    times = [origin + STEP * n for n in range(total)]
    week = history_days * DAY
    order = role_order(family.counts)
    subjects: list[Subject] = []
    roles: dict[str, str] = {}
    for n in range(instances):
        role = order[n % len(order)]
        rng = random.Random(f"{seed}/{n}")  # noqa: S311 (a simulation, not a secret)
        instance_type = rng.choice(family.types[role])
        slots = Slots(total, rng, n)
        family.roles[role](slots)
        accel = accelerators(instance_type)
        instance_id = f"i-0{seed % 4096:03x}{n:013x}"
        tags = family.tags(role, n, rng)
        if role == "protected":
            tags[PROTECT_TAG] = "true"
        running = [g is not None for g in slots.gpu]
        tracks: dict[int, GpuTrack] = {}
        if role != "metricless":
            for gpu in range(accel.count):
                tracks[gpu] = GpuTrack(
                    [
                        (t, min(100.0, v + 0.1 * gpu))
                        for t, v in zip(times, slots.gpu, strict=True)
                        if v is not None
                    ]
                )
        runs = _spans(running, times, week)
        subjects.append(
            Subject(
                SubjectKind.EC2_INSTANCE,
                Ec2Instance(
                    id=instance_id,
                    type=instance_type,
                    state="running",
                    account=account,
                    region=region,
                    launch_time=origin,
                    tags=tags,
                    accelerators=accel,
                ),
                tracks,
                runs,
                prices.hourly(instance_type, region),
                accel.count,
                cpu={t: c for t, c in zip(times, slots.cpu, strict=True) if c is not None},
                work=_spans(slots.work, times, week),
                idle=_spans([r and not w for r, w in zip(running, slots.work, strict=True)], times, week),
                labelled=True,
            )
        )
        roles[instance_id] = role
    history = History(
        WEEK_START, WEEK_START + timedelta(days=days), STEP, subjects, source=f"generated seed {seed}"
    )
    history.labelled = True
    return Generated(history, roles, seed)
