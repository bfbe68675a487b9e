"""Windowed counts of distinct things (failed jobs per Batch queue, interruptions per workload): the model, the
rule in memory, and the Protocol the DynamoDB store (aws/windows.py) keeps, so every invocation shares them.

An item never outgrows DynamoDB's 400 KB: it lists at most ``LISTED_MEMBERS`` members by name, remembers up to
``FINGERPRINTS_MAX`` more by an 8-character fingerprint (so each is still counted once), and past that only
counts (a member seen again then counts again; the threshold settings stay far below that point).
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

LISTED_MEMBERS = 50  # members kept by name (shown in alerts)
FINGERPRINTS_MAX = 4000  # members beyond those kept by fingerprint: 8 bytes each, 32 KB at most
MEMBER_CHARS = 300  # a member's name is cut to this length
FINGERPRINT_CHARS = 8


def fingerprint(value: str) -> str:
    """A short fixed-width stand-in for a name: 48 bits of BLAKE2b, 8 URL-safe characters."""
    return base64.urlsafe_b64encode(hashlib.blake2b(value.encode(), digest_size=6).digest()).decode()


def has_fingerprint(blob: str, value: str) -> bool:
    """Whether a string of fingerprints end to end holds ``value``'s (found at a fingerprint boundary)."""
    mark = fingerprint(value)
    at = blob.find(mark)
    while at != -1:
        if at % FINGERPRINT_CHARS == 0:
            return True
        at = blob.find(mark, at + 1)
    return False


@dataclass(frozen=True)
class WindowCount:
    """The members counted under one key in its current window."""

    key: str
    members: frozenset[str]  # the members listed by name (at most LISTED_MEMBERS)
    started_at: datetime
    expires_at: datetime
    added: bool  # this call counted a member not seen before in the window
    unlisted: int = 0  # members counted beyond those listed

    @property
    def count(self) -> int:
        return len(self.members) + self.unlisted

    def reached(self, threshold: int) -> bool:
        """True for exactly one new member per window: the one that brings the count to ``threshold``."""
        return self.added and self.count == threshold


class WindowCounter(Protocol):
    def add(self, key: str, member: str, now: datetime, window: timedelta) -> WindowCount: ...


@dataclass
class _Window:
    started_at: datetime
    expires_at: datetime
    members: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)
    overflow: int = 0


class MemoryWindowCounter:
    """The same rule in memory, for tests."""

    def __init__(self) -> None:
        self.windows: dict[str, _Window] = {}

    def add(self, key: str, member: str, now: datetime, window: timedelta) -> WindowCount:
        member = member[:MEMBER_CHARS]
        current = self.windows.get(key)
        if current is None or current.expires_at <= now:
            current = self.windows[key] = _Window(now, now + window)
        mark = fingerprint(member)
        if member in current.members or mark in current.seen:
            added = False
        elif len(current.members) < LISTED_MEMBERS:
            current.members.add(member)
            added = True
        elif len(current.seen) < FINGERPRINTS_MAX:
            current.seen.add(mark)
            added = True
        else:
            current.overflow += 1
            added = True
        return WindowCount(
            key,
            frozenset(current.members),
            current.started_at,
            current.expires_at,
            added,
            unlisted=len(current.seen) + current.overflow,
        )
