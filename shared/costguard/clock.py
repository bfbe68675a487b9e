"""The current time, which the local replay and the backtest may set."""

from __future__ import annotations

from datetime import UTC, datetime

_frozen: datetime | None = None


def now() -> datetime:
    return _frozen or datetime.now(UTC)


def freeze(at: datetime | None) -> None:
    """Pin the clock (None releases it). Only the local tools call this."""
    global _frozen
    _frozen = at
