"""The demo's replay: every file in events/ but the ledger's Monday report (NOT_IN_DEMO), in the order it would
arrive, through a local Slack app with the notifier's batching window, as `costguard demo` shows it and its tests
read it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from costguard.act.ledger_book import DynamoLedger
from costguard.ledger import Entry
from costguard.local.interactions import arrival_time
from costguard.local.replay import (
    EventFileError,
    ReplayResult,
    event_time,
    latest_event_time,
    read_event,
    replay_event,
)
from costguard.local.sink import SlackSink
from costguard.local.stack import DEFAULT_TEMPLATE, PROJECT_ROOT, TABLE, LocalStack
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


# The ledger's Monday report comes two days after the demo's day, whose actions it would then price over days the
# demo does not play: the demo shows the day's line (schedule-ledger-report-0000.json) and ends with its ledger,
# and `costguard replay` plays the Monday.
NOT_IN_DEMO = frozenset({"schedule-ledger-report-monday.json"})


def demo_events() -> list[Path]:
    return demo_order(sorted(p for p in EVENTS_DIR.glob("*.json") if p.name not in NOT_IN_DEMO))


# The demo's events span a day: its ledger reads the week before the world's now onwards.
LEDGER_LOOKBACK = timedelta(days=7)


@dataclass
class Batch:
    """What the notifier told at once when its batching window closed, and the events whose notices it carried
    (``[n/total] file``, in the order they arrived)."""

    events: list[str]
    messages: list[dict[str, Any]]  # the messages it posted, replies too
    closed_by: str | None = None  # the event that arrived after the window closed; None: the replay's end


@dataclass
class DemoRun:
    results: list[ReplayResult] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)
    posted: list[dict[str, Any]] = field(default_factory=list)  # every message, replies too, in order
    updates: list[dict[str, Any]] = field(default_factory=list)  # first messages updated (chat.update)
    last: list[dict[str, Any]] = field(default_factory=list)  # what the notifier's last batch told
    ledger: list[Entry] = field(default_factory=list)  # the savings ledger the run's actions wrote
    ended: datetime | None = None  # the time of the last event: the ledger's "now"

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
    on_batch: Callable[[Batch], None] | None = None,
    then: Callable[[LocalStack], None] | None = None,
) -> DemoRun:
    """Every event through the stack; ``then`` is given the stack once they have all run, before it stops.
    ``on_batch`` is given each batch the notifier tells when its window closes, before the result of the event
    that closed it: a batch's messages are also in that event's ``slack``, where they were posted."""
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
        # The notifier tells what its batching window gathered (a few minutes of events) together, when the
        # first event after the window closed arrives: each batch is kept with the events whose notices it
        # carries (those that added to the decisions queue while the window was open).
        tracker = _BatchTracker(stack, run, on_batch)
        for n, path in enumerate(events, 1):
            tracker.current = f"[{n}/{len(events)}] {path.name}"
            result = replay_event(stack, path)
            run.results.append(result)
            if on_result is not None:
                on_result(n, len(events), result)
        tracker.current = None
        run.last = stack.flush()
        tracker.told(run.last)
        run.posted = list(stack.sink.messages)
        run.updates = list(stack.sink.updates)
        run.ended = latest_event_time(list(events)) or world.now
        # What the run's actions wrote (read as `costguard ledger` reads a stack's: a query per team).
        run.ledger = DynamoLedger(TABLE).entries(world.now - LEDGER_LOOKBACK, run.ended)
        if then is not None:
            then(stack)
    return run


class _BatchTracker:
    """Watches the stack's batching window (its ``window_passes`` and ``queued``) for the demo's printing:
    which events queued notices, and which messages each closing of the window posted. It changes nothing the
    stack does."""

    def __init__(self, stack: LocalStack, run: DemoRun, on_batch: Callable[[Batch], None] | None) -> None:
        self.stack, self.run, self.on_batch = stack, run, on_batch
        self.current: str | None = None
        self.pending: list[str] = []
        self.depth = 0
        window_passes, queued = stack.window_passes, stack.queued

        def passes(at: datetime | None = None) -> None:
            before = len(stack.sink.messages)
            window_passes(at)
            if len(stack.sink.messages) > before or (self.pending and stack._pending_since is None):
                self.told(stack.sink.messages[before:])

        def queued_(at: datetime | None = None) -> None:
            queued(at)
            depth = stack.queue_depth("DecisionsQueue")
            if depth > self.depth and self.current is not None and self.current not in self.pending:
                self.pending.append(self.current)
            self.depth = depth

        stack.window_passes = passes  # type: ignore[method-assign]
        stack.queued = queued_  # type: ignore[method-assign]

    def told(self, messages: list[dict[str, Any]]) -> None:
        """The window closed (or the replay ended) and the notifier posted ``messages``."""
        if messages or self.pending:
            batch = Batch(events=self.pending, messages=list(messages), closed_by=self.current)
            self.run.batches.append(batch)
            if self.on_batch is not None:
                self.on_batch(batch)
        self.pending = []
        self.depth = self.stack.queue_depth("DecisionsQueue")


def batch_heading(batch: Batch) -> str:
    """The line a batch's messages are printed under: the events whose notices they carry."""
    when = (
        f"its window closed when {batch.closed_by} arrived" if batch.closed_by else "at the end of the replay"
    )
    told = f"{len(batch.messages)} message(s)" if batch.messages else "nothing new"
    source = ", ".join(batch.events) if batch.events else "no event of this replay"
    return f"\n=== Slack: the notifier's batch ({when}) told {told} from {source}"


def count_line(run: DemoRun) -> str:
    top = run.channel_messages
    return (
        f"{sum(len(r.findings) for r in run.results)} findings, {len(top)} Slack messages in the channel "
        f"({len(run.posted) - len(top)} replies in their threads, {len(run.updates)} first messages updated)"
    )


__all__ = ["Batch", "DemoRun", "Path", "batch_heading", "count_line", "demo_events", "demo_order", "run_demo"]
