"""Findings someone muted from Slack ("Mute this finding"): told to nobody until the mute ends."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from costguard.permissions import needs

PERMISSIONS = needs("dynamodb:BatchGetItem")  # DynamoMutes: one read per 100 findings about to be told


class MuteReader(Protocol):
    def muted(self, pairs: Iterable[tuple[str, str]], now: datetime) -> set[tuple[str, str]]:
        """The (resource key, reason) pairs muted at ``now``."""
        ...


class DynamoMutes:
    """The mutes the interactions worker writes in the state table (interact/state.py)."""

    def __init__(self, table: str) -> None:
        self.table = table

    def muted(self, pairs: Iterable[tuple[str, str]], now: datetime) -> set[tuple[str, str]]:
        from costguard.interact.state import muted

        wanted = list(dict.fromkeys(pairs))
        return muted(self.table, wanted, now) if wanted and self.table else set()


class MemoryMutes:
    def __init__(self) -> None:
        self.until: dict[tuple[str, str], datetime] = {}

    def muted(self, pairs: Iterable[tuple[str, str]], now: datetime) -> set[tuple[str, str]]:
        return {p for p in pairs if p in self.until and self.until[p] > now}
