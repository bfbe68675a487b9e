"""A second family of labelled weeks, with rhythms the adaptive policy's parameters were not tuned on.

``generate_shifts(seed, instances=60, days=7, history_days=0)`` builds, like ``generate.py`` (the same grid,
labels and ``History``), a fleet whose instances play:

- shift: analysts working an 8-9 h shift in their own time zone (Asia/Tokyo, Europe/Berlin,
  America/Los_Angeles, tagged ``costguard:timezone`` and by team), bursts of work with short pauses, one
  30-45 min break in mid-shift at a time of their own, idle (or stopped) between shifts, six days a week;
- evaluator: long training runs (6-20 h) with evaluation passes of 60-150 min (GPU idle, CPU busy: work) every
  2-4 h, idle for 3-12 h between runs;
- bursty: pipelines in bursts of 2-6 jobs of 10-40 min with irregular gaps of 15-55 min, several bursts a day
  at random hours, idle (sometimes stopped) for 1-6 h between bursts;
- serving, protected and metric-less instances as in ``generate.py``.

Teams are tagged (``team``), with the time zones of their members; the roles are not.
"""

from __future__ import annotations

import random

from costguard.backtest.generate import DAY, ROLES, Family, Generated, Slots, build
from costguard.detect.adaptive import TIMEZONE_TAG
from costguard.pricing import PriceBook

COUNTS = {"shift": 16, "evaluator": 12, "bursty": 14, "serving": 8, "protected": 5, "metricless": 5}
TYPES = {
    "shift": ["g5.xlarge", "g6.xlarge", "g4dn.xlarge", "g5.2xlarge"],
    "evaluator": ["g5.12xlarge", "p4d.24xlarge", "g5.2xlarge", "p3.2xlarge"],
    "bursty": ["g5.xlarge", "g6.xlarge", "g5.2xlarge"],
    "serving": ["g4dn.xlarge", "g6.xlarge"],
    "protected": ["g5.2xlarge", "g5.xlarge"],
    "metricless": ["g5.xlarge", "g4dn.xlarge"],
}
# Where each team works: (team, time zone, the shift's start hour in UTC on that zone's usual day).
ZONES = [
    ("tokyo-analytics", "Asia/Tokyo", 0),
    ("berlin-ml", "Europe/Berlin", 7),
    ("la-vision", "America/Los_Angeles", 16),
]


def _shift(s: Slots) -> None:
    rng = s.rng
    _, _, start_utc = ZONES[s.index % len(ZONES)]  # its team's (``_tags``)
    start = start_utc * 12 + rng.randrange(-6, 7)
    length = rng.randrange(96, 109)  # 8-9 h
    brk_at, brk_len = rng.randrange(42, 60), rng.randrange(6, 10)  # its break: 3.5-5 h in, 30-45 min
    stops = rng.random() < 0.3
    day = 0
    while not s.full:
        begin = day * DAY + start + rng.randrange(-2, 3)
        if day % 7 == 6:  # a day off
            s.until("off" if stops else "idle", (day + 1) * DAY + start - 3)
            day += 1
            continue
        s.until("off" if stops and begin - s.at > 24 else "idle", begin)
        s.until("idle", begin)
        for stop_at in (begin + brk_at + rng.randrange(-1, 2), begin + length):
            while s.at < stop_at - 2 and not s.full:
                s.fill("notebook", min(rng.randrange(3, 12), stop_at - s.at))
                if rng.random() < 0.5:
                    s.fill("think", min(rng.randrange(1, 4), max(0, stop_at - s.at)))
            s.until("notebook", stop_at)
            if stop_at < begin + length:
                s.fill("idle", brk_len + rng.randrange(-1, 2))
        day += 1


def _evaluator(s: Slots) -> None:
    rng = s.rng
    s.fill("idle", rng.randrange(0, DAY))
    while not s.full:
        run_end = s.at + rng.randrange(6 * 12, 20 * 12)
        while s.at < run_end and not s.full:
            s.fill("busy", rng.randrange(24, 48))  # 2-4 h of training
            if s.at < run_end:
                s.fill("dip", rng.randrange(12, 31))  # an evaluation pass: 60-150 min, CPU busy
        gap = rng.randrange(36, 144)
        if rng.random() < 0.25:
            first = rng.randrange(12, gap - 12)
            s.fill("idle", first)
            s.fill("off", gap - first - 2)
            s.fill("idle", 2)
        else:
            s.fill("idle", gap)


def _bursty(s: Slots) -> None:
    rng = s.rng
    stops = rng.random() < 0.3
    s.fill("idle", rng.randrange(0, 72))
    while not s.full:
        for n in range(rng.randrange(2, 7)):
            if n:
                s.fill("idle", rng.randrange(3, 12))  # 15-55 min between jobs
            s.fill("job", rng.randrange(2, 9))
        rest = rng.randrange(12, 72)  # 1-6 h until the next burst
        if stops and rest > 30:
            first = rng.randrange(8, 14)
            s.fill("idle", first)
            s.fill("off", rest - first)
        else:
            s.fill("idle", rest)


def _tags(role: str, n: int, rng: random.Random) -> dict[str, str]:
    team, zone, _ = ZONES[n % len(ZONES)]
    return {"Name": f"{role}-{n:02d}", "team": team, TIMEZONE_TAG: zone}


SHIFTS = Family(
    COUNTS,
    {
        "shift": _shift,
        "evaluator": _evaluator,
        "bursty": _bursty,
        "serving": ROLES["serving"],
        "protected": lambda s: (_evaluator if s.rng.random() < 0.5 else _shift)(s),
        "metricless": _evaluator,
    },
    TYPES,
    _tags,
)


def generate_shifts(
    seed: int, instances: int = 60, days: int = 7, history_days: int = 0, *, prices: PriceBook | None = None
) -> Generated:
    """The labelled fleet of ``seed`` in this family; the same seed gives the same world."""
    return build(SHIFTS, seed, instances, days, history_days, prices=prices)
