"""The current time, which the local replay and the backtest may set."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

_frozen: datetime | None = None
_played_wall: Callable[[], float] | None = None


def now() -> datetime:
    return _frozen or datetime.now(UTC)


def freeze(at: datetime | None) -> None:
    """Pin the clock (None releases it). Only the local tools call this."""
    global _frozen
    _frozen = at


def wall() -> float:
    """The machine's clock in epoch seconds, never frozen: what Slack delivery's claims, leases and told-times in
    the state table are judged by (one notifier writes ``wall() + ...``, another compares it with ``wall()``). One
    seam, so a test that plays time plays this clock too, and a slow machine cannot make a claim look abandoned,
    or still held, when in the played run it is not."""
    return _played_wall() if _played_wall is not None else time.time()


def play_wall(source: Callable[[], float] | None) -> None:
    """Read the wall clock from ``source`` (None: the machine's again). Only tests that play time call this."""
    global _played_wall
    _played_wall = source
