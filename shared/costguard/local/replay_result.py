"""What one replayed event did (`costguard replay --json`'s shape): shared by the replay and the interactions it
routes, so neither leans on the other for it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ReplayResult:
    """What one event did, in the shape `costguard replay --json` prints."""

    event: str
    function: str | None = None
    route: str | None = None  # how the function was found: "routed by subscription", ...
    findings: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    slack: list[dict[str, Any]] = field(default_factory=list)
    output: dict[str, Any] = field(default_factory=dict)  # what a function returned besides decisions
    notes: list[str] = field(default_factory=list)  # what the replay did differently from a live account
    error: str | None = None
    trace: str | None = None  # the traceback of a handler that raised

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "event": self.event,
            "function": self.function,
            "route": self.route,
            "findings": self.findings,
            "decisions": self.decisions,
            "slack": self.slack,
        }
        if self.notes:
            data["notes"] = self.notes
        if self.error:
            data["error"] = self.error
        return data
