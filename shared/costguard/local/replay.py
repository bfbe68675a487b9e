"""Replay event files through the stack's own routing, handlers and notifier, on the embedded AWS."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from costguard import clock
from costguard.events.common import to_datetime
from costguard.local.stack import LocalStack
from costguard.local.template import sns_topic_name


@dataclass
class ReplayResult:
    """What one event did, in the shape `costguard replay --json` prints."""

    event: str
    function: str | None = None
    findings: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    slack: list[dict[str, Any]] = field(default_factory=list)
    output: dict[str, Any] = field(default_factory=dict)  # what a function returned besides decisions
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "event": self.event,
            "function": self.function,
            "findings": self.findings,
            "decisions": self.decisions,
            "slack": self.slack,
        }
        if self.error:
            data["error"] = self.error
        return data


class EventFileError(ValueError):
    """An event file that is not a JSON object."""


def read_event(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        event = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise EventFileError(f"{path}: cannot read: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise EventFileError(
            f"{path}: bad JSON at line {error.lineno} column {error.colno}: {error.msg}"
        ) from None
    if not isinstance(event, dict):
        raise EventFileError(f"{path}: an event must be a JSON object, not {type(event).__name__}")
    return event


def replay_event(stack: LocalStack, path: str | Path) -> ReplayResult:
    result = ReplayResult(event=str(path))
    try:
        event = read_event(path)
    except EventFileError as error:
        result.error = str(error)
        return result
    advance_clock(event)
    routes = stack.template.route(event)
    if not routes:
        result.error = (
            f"{path}: no rule in template.yaml matches this event "
            f"(source={event.get('source')!r}, detail-type={event.get('detail-type')!r}, "
            f"topic={sns_topic_name(event)!r})"
        )
        return result
    before = len(stack.sink.messages)
    for route in routes:
        result.function = route.function
        outcome = stack.invoke(route.function, event).result or {}
        if outcome.get("rejected"):
            result.error = f"{path}: rejected by {route.function}: {outcome.get('problem')}"
        result.findings.extend(outcome.get("findings", []))
        result.decisions.extend(outcome.get("decisions", []))
        result.output.update({k: v for k, v in outcome.items() if k not in ("findings", "decisions")})
    stack.drain()
    result.slack = stack.sink.messages[before:]
    return result


def event_time(event: dict[str, Any]) -> datetime | None:
    try:
        if "time" not in event and isinstance(event.get("Records"), list):
            return to_datetime(event["Records"][0]["Sns"]["Timestamp"])  # an SNS delivery
        return to_datetime(event["time"])
    except (KeyError, IndexError, ValueError, TypeError):
        return None


def advance_clock(event: dict[str, Any]) -> None:
    """The clock moves forward to an event's own time when that is later, as it would in a live account."""
    at = event_time(event)
    if at is not None and at > clock.now():
        clock.freeze(at)


def latest_event_time(paths: list[str | Path]) -> datetime | None:
    """How far the world's metric series must run for these events."""
    times = []
    for path in paths:
        try:
            at = event_time(read_event(path))
        except EventFileError:
            continue
        if at is not None:
            times.append(at)
    return max(times, default=None)


def replay(stack: LocalStack, paths: list[str | Path]) -> list[ReplayResult]:
    return [replay_event(stack, path) for path in paths]
