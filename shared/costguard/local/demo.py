"""The demo's replay: every file in events/, in the order it would arrive, through a local Slack app with the
notifier's batching window, as `costguard demo` shows it and its tests read it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from costguard.local.interactions import arrival_time
from costguard.local.replay import (
    EventFileError,
    ReplayResult,
    event_time,
    latest_event_time,
    read_event,
    replay_each,
)
from costguard.local.sink import SlackSink
from costguard.local.stack import DEFAULT_TEMPLATE, PROJECT_ROOT, LocalStack
from costguard.local.template import Template
from costguard.local.world import World

EVENTS_DIR = PROJECT_ROOT / "events"
_LAST = datetime.max.replace(tzinfo=UTC)


def demo_order(paths: list[Path]) -> list[Path]:
    """The events as they would arrive: by their own time (a Slack click by its arrival), then by name."""

    def when(path: Path) -> tuple[datetime, str]:
        try:
            event = read_event(path)
        except EventFileError:
            return _LAST, path.name
        return (event_time(event) or arrival_time(event) or _LAST), path.name

    return sorted(paths, key=when)


def demo_events() -> list[Path]:
    return demo_order(sorted(EVENTS_DIR.glob("*.json")))


@dataclass
class DemoRun:
    results: list[ReplayResult] = field(default_factory=list)
    posted: list[dict[str, Any]] = field(default_factory=list)  # every message, replies too, in order
    updates: list[dict[str, Any]] = field(default_factory=list)  # first messages updated (chat.update)
    last: list[dict[str, Any]] = field(default_factory=list)  # what the notifier's last batch told

    @property
    def channel_messages(self) -> list[dict[str, Any]]:
        """What the channel shows: the messages that are not replies in a thread."""
        return [m for m in self.posted if not m.get("thread_ts")]


def run_demo(
    world: World,
    mode: str,
    *,
    overrides: dict[str, str] | None = None,
    sink: SlackSink | None = None,
    on_result: Callable[[int, int, ReplayResult], None] | None = None,
    then: Callable[[LocalStack], None] | None = None,
) -> DemoRun:
    """Every event through the stack; ``then`` is given the stack once they have all run, before it stops."""
    events = demo_events()
    template = Template.load(DEFAULT_TEMPLATE)
    window = timedelta(seconds=template.batch_window("NotifierFunction", "DecisionsQueue"))
    run = DemoRun()
    with LocalStack(
        world,
        mode=mode,
        overrides=overrides,
        until=latest_event_time(list(events)),
        slack_app=True,
        batch_window=window,
        template=template,
        sink=sink,
    ) as stack:
        # The notifier tells what its batching window gathered (a few minutes of events) together, under the
        # event that arrived after the window closed.
        for n, result in enumerate(replay_each(stack, list(events)), 1):
            run.results.append(result)
            if on_result is not None:
                on_result(n, len(events), result)
        run.last = stack.flush()
        run.posted = list(stack.sink.messages)
        run.updates = list(stack.sink.updates)
        if then is not None:
            then(stack)
    return run


def count_line(run: DemoRun) -> str:
    top = run.channel_messages
    return (
        f"{sum(len(r.findings) for r in run.results)} findings, {len(top)} Slack messages in the channel "
        f"({len(run.posted) - len(top)} replies in their threads, {len(run.updates)} first messages updated)"
    )


__all__ = ["DemoRun", "Path", "count_line", "demo_events", "demo_order", "run_demo"]
