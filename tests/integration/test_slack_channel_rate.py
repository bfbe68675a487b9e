"""Slack at organization scale: an organization's sweeps report from many account-regions at once, and Slack's
limit on ``chat.postMessage`` per channel (about one a second, thread replies included) must never drop a stop
notice nor hold it back more than a minute.

On the embedded stack (moto, the local Slack sink, the real slack_sdk client) with the template's settings: the
notifier's batches of 25, two invocations at once, its timeout, the decisions queue's visibility timeout and
dead-letter queue. The sink answers a post sooner than a second after its channel's last one with 429 and
Retry-After (whole seconds, as Slack does), and the notifier's client honours it.

Two sweeps of an organization in remediate mode:

1. an hour earlier, each account-region marked the instances it stops now: told (grouped), not measured;
2. now, each account-region reports at once: the instances it stopped (news in their open conversations) and
   newly idle instances it marked. This burst is measured.

Time is played, never slept. Each poller (one of the event source's invocations at once) has its own played
clock, and the pollers are kept in step: a Slack call is made only once no other poller is behind it, and the
sink reads the caller's played time. A Web API call takes SLACK_CALL_SECONDS, any AWS call AWS_CALL_SECONDS, and
every wait (Retry-After, back-off) is added, not slept. A message an invocation hands back to the queue is received
again once the queue's visibility timeout has passed, in played time.

A notice's delay runs from when a notifier first received it to when Slack took the post that tells it: its own
message, a row of a group, a reply in its thread. The batching window (SlackBatchWindowSeconds, the event
source's MaximumBatchingWindowInSeconds) is a gathering delay configured apart from Slack's limit and is not in it;
neither is the time a notice waited in the queue behind earlier batches (``*_from_queued_*`` says it).

With COSTGUARD_CHANNEL_RATE_RESULTS=1 the figures are written into bench/results.json (``slack_channel_rate``).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.act.executor import Outcome
from costguard.aws import clients
from costguard.local.sink import SlackSink
from costguard.local.stack import TABLE, LocalStack
from costguard.local.world import World
from costguard.model import Action, Decision, Finding, Reason, Resource, ResourceKind
from costguard.notify import posts
from costguard.notify.conversation import DynamoConversationStore, destination_id, group_post_id
from costguard.notify.notice import Notice
from costguard.notify.run import Run
from tests.conftest import ROOT
from tests.integration.played_source import (
    AWS_CALL_SECONDS,
    IDLE_POLL_SECONDS,
    SEED,
    SLACK_CALL_SECONDS,
    Played,
    invoke,
    playing,
)
from tests.integration.slack_app import atomic_dynamodb

REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
SWEEP = datetime(2026, 12, 15, 14, 0, tzinfo=UTC)
GRACE = timedelta(hours=1)  # the marks were told at the sweep before
STOP_DELAY_LIMIT = 60.0  # played seconds from receipt to Slack
RESULTS = ROOT / "bench" / "results.json"
# Read as the module loads (each test starts with no COSTGUARD_ variable).
WRITE_RESULTS = os.environ.get("COSTGUARD_CHANNEL_RATE_RESULTS") == "1"


@dataclass(frozen=True)
class Burst:
    """An organization's burst: its accounts (each in REGIONS), the share of accounts routed to each channel (by
    the ``team`` tag), and how many instances each account-region stops and newly marks (inclusive ranges)."""

    name: str
    accounts: int
    shares: dict[str, int]
    stops: tuple[int, int]
    marks: tuple[int, int]


CHANNELS = {"ml": "C0ORGML0001", "research": "C0ORGRES001", "platform": "C0ORGPLAT01"}
BURSTS = [
    # 300 account-regions, half of them routed to one channel: a few stops and a few new idle instances each.
    Burst("mixed", 100, {"ml": 50, "research": 30, "platform": 20}, (1, 2), (1, 3)),
    # 150 account-regions into one channel, mostly stops: each reply its own post would queue for minutes.
    Burst("stops", 50, {"ml": 100}, (2, 3), (0, 1)),
]


@pytest.fixture
def played(monkeypatch: pytest.MonkeyPatch) -> Played:
    return playing(monkeypatch)


@pytest.fixture
def handed_back(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    return counting_hand_backs(monkeypatch)


def counting_hand_backs(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Why the notifier handed notices back to the queue: the error's kind and Slack's error code, per notice."""
    causes: Counter[str] = Counter()
    fail = Run.fail

    def recorded(run: Run, members: Any, error: Exception) -> None:
        members = list(members)
        code = getattr(error, "error", None)
        causes[f"{type(error).__name__}:{code}" if code else type(error).__name__] += len(members)
        fail(run, members, error)

    monkeypatch.setattr(Run, "fail", recorded)
    return causes


@pytest.fixture
def stack(world: World, sink: SlackSink, played: Played) -> Iterator[LocalStack]:
    with organization_stack(world, sink, played) as running:
        yield running


@contextlib.contextmanager
def organization_stack(world: World, sink: SlackSink, played: Played) -> Iterator[LocalStack]:
    """The stack in remediate mode with the Slack app, routed to CHANNELS, its sink limiting each channel to a
    post a second in played time."""
    sink.post_interval = 1.0
    sink.clock = lambda: played.current
    with (
        atomic_dynamodb(),
        LocalStack(world, sink=sink, slack_app=True, mode="remediate", routes=dict(CHANNELS)) as running,
    ):
        yield running


@dataclass
class Queue:
    """What the event source knows of the decisions queue besides SQS: the messages an invocation handed back
    (received again once the visibility timeout has passed, in played time) and the invocations running."""

    visibility: float
    returned: list[tuple[float, str]] = field(default_factory=list)  # (visible again at, receipt handle)
    running: int = 0
    first_received: dict[str, float] = field(default_factory=dict)  # notice id -> played time
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class Poller:
    """One of the event source's invocations at once: batches of the template's size, each invocation with the
    template's timeout, on its played clock."""

    index: int
    stack: LocalStack
    clock: Played
    queue: Queue
    batch_size: int
    timeout: float
    invocations: list[dict[str, Any]] = field(default_factory=list)

    def run(self, start: float) -> None:
        self.clock.enter(self.index, start)
        try:
            self._run()
        finally:
            self.clock.leave()

    def _run(self) -> None:
        function = self.stack.template.functions()["NotifierFunction"]
        handler = self.stack.module(function).lambda_handler
        while True:
            with self.clock.turn() as now, self.queue.lock:
                received = self._receive(now)
                later = min((r[0] for r in self.queue.returned), default=None)
                idle = not received and later is None and self.queue.running == 0
            if idle:
                return
            if not received:
                self.clock.advance(max(IDLE_POLL_SECONDS, (later or now) - now))
                continue
            failed, took, _ = invoke(
                handler, self.clock, self.timeout, received, self.stack.urls["DecisionsQueue"]
            )
            self._settle(received, failed, now)
            self.invocations.append(
                {"started": now, "records": len(received), "returned": len(failed), "seconds": took}
            )

    def _receive(self, now: float) -> list[dict[str, Any]]:
        """A batch of the messages visible at ``now`` (the queue's lock is held)."""
        sqs, url = clients.sqs(), self.stack.urls["DecisionsQueue"]
        for visible_at, handle in [r for r in self.queue.returned if r[0] <= now]:
            self.queue.returned.remove((visible_at, handle))
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=handle, VisibilityTimeout=0)
        received: list[dict[str, Any]] = []
        while len(received) < self.batch_size:
            got = sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=min(10, self.batch_size - len(received)),
                AttributeNames=["All"],
                VisibilityTimeout=43_200,  # not visible again by itself: handed back in played time
            ).get("Messages", [])
            if not got:
                break
            received.extend(dict(m) for m in got)
        if received:
            self.queue.running += 1
            for message in received:
                self.queue.first_received.setdefault(json.loads(message["Body"])["id"], now)
        return received

    def _settle(self, received: list[dict[str, Any]], failed: set[str], now: float) -> None:
        """Told: deleted. Handed back: visible again a visibility timeout after it was received."""
        sqs, url = clients.sqs(), self.stack.urls["DecisionsQueue"]
        with self.queue.lock:
            for message in received:
                if message["MessageId"] in failed:
                    self.queue.returned.append((now + self.queue.visibility, message["ReceiptHandle"]))
                else:
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            self.queue.running -= 1


def _team(burst: Burst, account: int) -> str:
    bound = 0
    for team, share in burst.shares.items():
        bound += share * burst.accounts // 100
        if account < bound:
            return team
    return next(iter(burst.shares))


def _notice(burst: Burst, account: int, region: str, n: int, action: Action, at: datetime) -> Notice:
    """The decision of one sweep (``at``) about instance ``n`` of an account-region."""
    team = _team(burst, account)
    account_id = f"{200000000000 + account:012d}"
    name = f"{team}-trainer-{account:03d}-{region}-{n}"
    subject = Resource(
        kind=ResourceKind.EC2_INSTANCE,
        id=f"i-{hashlib.sha256(f'{account_id}/{region}/{n}'.encode()).hexdigest()[:17]}",
        account=account_id,
        region=region,
        name=name,
        instance_type="p4d.24xlarge",
        tags={"team": team},
    )
    finding = Finding(
        reason=Reason.GPU_IDLE,
        resource=subject,
        summary=f"{name}: GPUs idle for 2 h",
        observed_at=at,
        hourly_usd=32.77,
        remediable=True,
        event_id=f"sweep-{at:%H%M}-{account_id}-{region}",
    )
    decision = Decision(
        action=action,
        reason=Reason.GPU_IDLE,
        finding=finding,
        dry_run=False,
        decided_at=at,
        stop_after=at + GRACE if action is Action.MARK else None,
    )
    done = "stopped" if action is Action.STOP else "marked"
    return Notice(decision=decision, outcome=Outcome(done=True, detail=f"{done} {name}"))


def _organization(burst: Burst, rng: random.Random) -> tuple[list[Notice], list[Notice], list[Notice]]:
    """The marks told an hour earlier; then the burst: each account-region's stops and new marks."""
    marks, stops, idle = [], [], []
    for account in range(burst.accounts):
        for region in REGIONS:
            stopping = rng.randint(*burst.stops)
            for n in range(stopping):
                marks.append(_notice(burst, account, region, n, Action.MARK, SWEEP - GRACE))
                stops.append(_notice(burst, account, region, n, Action.STOP, SWEEP))
            for n in range(stopping, stopping + rng.randint(*burst.marks)):
                idle.append(_notice(burst, account, region, n, Action.MARK, SWEEP))
    return marks, stops, idle


def _queue(stack: LocalStack, notices: list[Notice], rng: random.Random) -> None:
    bodies = [n.model_dump_json() for n in notices]
    rng.shuffle(bodies)  # the runs of every account-region, interleaved
    for start in range(0, len(bodies), 10):
        clients.sqs().send_message_batch(
            QueueUrl=stack.urls["DecisionsQueue"],
            Entries=[{"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies[start : start + 10])],
        )


def _deliver(stack: LocalStack, clock: Played, start: float) -> tuple[Queue, list[Poller]]:
    """Lambda's event source with the template's settings, from played time ``start`` until the queue is empty."""
    template = stack.template
    props = template.resources["NotifierFunction"]["Properties"]
    timeout = float(props.get("Timeout", template.body["Globals"]["Function"]["Timeout"]))
    concurrency = int(props["Events"]["Decisions"]["Properties"]["ScalingConfig"]["MaximumConcurrency"])
    queue = Queue(float(template.resources["DecisionsQueue"]["Properties"]["VisibilityTimeout"]))
    batch_size = template.batch_size("NotifierFunction", "DecisionsQueue")
    pollers = [Poller(i, stack, clock, queue, batch_size, timeout) for i in range(concurrency)]
    threads = [threading.Thread(target=p.run, args=(start,), name=f"poller-{p.index}") for p in pollers]
    with contextlib.redirect_stdout(io.StringIO()):  # the invocations' metrics
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
    assert not any(t.is_alive() for t in threads), "a poller is still running"
    return queue, pollers


@dataclass
class Posted:
    """Each post Slack took: the played time it took it, and which poller made it."""

    at: dict[tuple[str, str], tuple[float, int]] = field(
        default_factory=dict
    )  # (channel, ts) -> (time, poller)

    def watch(self, sink: SlackSink, clock: Played) -> None:
        api_ok = sink._api_ok

        def recorded(method: str, params: dict[str, Any]) -> dict[str, Any]:
            answer = api_ok(method, params)
            if method == "chat.postMessage" and answer.get("ok"):
                self.at[(answer["channel"], answer["ts"])] = (clock.current, clock.caller)
            return answer

        sink._api_ok = recorded  # type: ignore[method-assign]


def _told(sink: SlackSink, posted: Posted, notices: list[Notice], since: float) -> dict[str, list[float]]:
    """Each notice's tellings since ``since``, in played time: the posts that carry it (its own message, its
    reply, a group with its row)."""
    store = DynamoConversationStore(TABLE)
    ids = {n.id for n in notices}
    found: dict[str, list[float]] = {i: [] for i in ids}
    for message in sink.messages:
        at = posted.at.get((message["channel"], message["ts"]), (-1.0, -1))[0]
        if message.get("method") != "chat.postMessage" or at < since:
            continue
        key = (message.get("metadata") or {}).get("event_payload", {}).get("post")
        if key in ids:
            found[key].append(at)
            continue
        state = store.group(group_post_id(destination_id(message["channel"]), key or ""))
        for row in state.posted if state is not None else []:
            if row in ids:
                found[row].append(at)
    return found


def _per_channel(
    sink: SlackSink, posted: Posted, since: float, updates: list[dict[str, Any]]
) -> dict[str, Any]:
    """Per channel: the posts Slack took (replies, top-level, groups of news), its chat.update calls, and the most
    posts one invocation made there."""
    names = {channel: team for team, channel in CHANNELS.items()}
    figures: dict[str, Counter[str]] = {}
    for message in sink.messages:
        at, _ = posted.at.get((message["channel"], message["ts"]), (-1.0, -1))
        if message.get("method") != "chat.postMessage" or at < since:
            continue
        row = figures.setdefault(names[message["channel"]], Counter())
        key = str((message.get("metadata") or {}).get("event_payload", {}).get("post", ""))
        row["posts"] += 1
        row["replies" if message.get("thread_ts") else "top_level"] += 1
        row["groups_of_news"] += key.startswith(posts.NEWS_PREFIX)
    for update in updates:
        figures.setdefault(names[update["channel"]], Counter())["updates"] += 1
    return {team: dict(sorted(figures[team].items())) for team in CHANNELS if team in figures}


def _most_in_one_invocation(posted: Posted, pollers: list[Poller], since: float) -> int:
    """The most posts one invocation made to one channel."""
    most = 0
    for poller in pollers:
        for invocation in poller.invocations:
            begin, end = invocation["started"], invocation["started"] + invocation["seconds"]
            made = Counter(
                channel
                for (channel, _), (at, by) in posted.at.items()
                if by == poller.index and begin <= at <= end and at >= since
            )
            most = max([most, *made.values()])
    return most


@pytest.mark.parametrize("burst", BURSTS, ids=[b.name for b in BURSTS])
def test_an_organizations_burst_tells_every_stop_within_a_minute_despite_slacks_channel_limit(
    stack: LocalStack, played: Played, handed_back: Counter[str], burst: Burst
) -> None:
    rng = random.Random(f"{SEED}-{burst.name}")
    sink = stack.sink
    posted = Posted()
    posted.watch(sink, played)
    marks, stops, idle = _organization(burst, rng)

    _queue(stack, marks, rng)  # the sweep an hour before: its marks told, grouped
    _, earlier = _deliver(stack, played, 0.0)
    start = max(i["started"] + i["seconds"] for p in earlier for i in p.invocations) + GRACE.total_seconds()
    limited_before, updates_before = sum(sink.limited.values()), len(sink.updates)
    handed_back.clear()

    burst_notices = [*stops, *idle]
    _queue(stack, burst_notices, rng)
    queue, pollers = _deliver(stack, played, start)

    told = _told(sink, posted, burst_notices, start)
    first = queue.first_received
    delays = {n.id: min(told[n.id]) - first[n.id] for n in burst_notices if told[n.id]}
    stop_delays = sorted(delays[n.id] for n in stops if n.id in delays)
    stops_from_queued = sorted(min(told[n.id]) - start for n in stops if told[n.id])
    invocations = [i for p in pollers for i in p.invocations]
    figures: dict[str, Any] = {
        "burst": burst.name,
        "notices": len(burst_notices),
        "stop_notices": len(stops),
        "idle_notices": len(idle),
        "account_regions": burst.accounts * len(REGIONS),
        "channels": len(burst.shares),
        "notices_per_channel": dict(Counter(n.decision.resource.tags["team"] for n in burst_notices)),
        "batch_size": pollers[0].batch_size,
        "notifiers_at_once": len(pollers),
        "timeout_seconds": pollers[0].timeout,
        "post_interval_seconds": sink.post_interval,
        "slack_call_seconds": SLACK_CALL_SECONDS,
        "aws_call_seconds": AWS_CALL_SECONDS,
        "invocations": len(invocations),
        "slack_per_channel": _per_channel(sink, posted, start, sink.updates[updates_before:]),
        "most_posts_to_one_channel_in_one_invocation": _most_in_one_invocation(posted, pollers, start),
        "rate_limited_429s": sum(sink.limited.values()) - limited_before,
        "handed_back_to_the_queue": dict(handed_back),
        "told_exactly_once": sum(len(told[n.id]) == 1 for n in burst_notices),
        "never_told": sum(not told[n.id] for n in burst_notices),
        "stop_delay_seconds_max": round(stop_delays[-1], 1),
        "stop_delay_seconds_p50": round(stop_delays[len(stop_delays) // 2], 1),
        "notice_delay_seconds_max": round(max(delays.values()), 1),
        "stop_from_queued_seconds_max": round(stops_from_queued[-1], 1),
        "dead_lettered": stack.queue_depth("DecisionsDeadLetterQueue"),
        "parked": stack.queue_depth("FailedEventsQueue"),
        "earlier_sweep_marks": len(marks),
        "seed": SEED,
    }
    assert figures["dead_lettered"] == 0 and figures["parked"] == 0, figures
    assert figures["told_exactly_once"] == len(burst_notices), figures
    # No notice goes back to the queue for Slack's limit (its visibility timeout would hold it for 24 minutes);
    # only a parent render another notifier's render kept overtaking is handed back, its notice told already.
    assert set(handed_back) <= {"ParentChangedError"}, figures
    assert figures["stop_delay_seconds_max"] <= STOP_DELAY_LIMIT, figures
    # Grouped, then queued: one invocation never makes a channel more than a few posts (at most SlackGroupAbove
    # replies or a group of news per kind, and SlackGroupAbove openers or a group per kind).
    assert figures["most_posts_to_one_channel_in_one_invocation"] <= 2 * 3, figures
    # Figures are written only once the checks that judge them have passed.
    if WRITE_RESULTS:
        results = json.loads(RESULTS.read_text())
        results["slack_channel_rate"] = results.get("slack_channel_rate", {}) | {burst.name: figures}
        RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
