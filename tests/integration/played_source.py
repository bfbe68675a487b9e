"""Lambda's SQS event sources for the notifier, played: both of its queues (urgent, decisions) with the template's
batch size, batching window, concurrency and visibility timeout, each invocation with the notifier's timeout, on
the pollers' played clocks (tests/integration/test_slack_channel_rate.py's ``Played``). A notice an invocation
hands back is received again when its visibility says: the one the notifier gives it (notify/handback.py), else
the queue's timeout. An invocation that runs past its timeout is killed: its whole batch comes back. Nothing waits
on the machine's clock.
"""

from __future__ import annotations

import contextlib
import io
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.client import BaseClient
from slack_sdk.web.base_client import BaseClient as SlackClient

from costguard import clock as costguard_clock
from costguard.aws import clients
from costguard.local.stack import LambdaContext, LocalStack
from costguard.notify import run as delivery_run
from costguard.notify import slack_retry
from costguard.notify.notice import Notice
from costguard.notify.queue import SqsNoticeQueue

SEED = 20261215
SLACK_CALL_SECONDS = 0.2  # one Web API call, Slack's answer included
AWS_CALL_SECONDS = 0.01  # one DynamoDB, SQS or Secrets Manager call
IDLE_POLL_SECONDS = 1.0  # a poller finding the queue empty looks again


class Played:
    """The pollers' played clocks, in step: a poller takes its turn (a Slack call, a receive) only when no other
    is behind it, so the sink sees every call in played order, at ``current``."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._at: dict[int, float] = {}
        self._local = threading.local()
        self.current = 0.0  # the played time of the call in hand
        self.caller = -1  # the poller making it
        self.invoking = (
            threading.local()
        )  # ``on``: the poller's thread is in an invocation (its AWS calls count)

    def enter(self, index: int, at: float) -> None:
        with self._cond:
            self._local.index = index
            self._at[index] = at
            self._cond.notify_all()

    def leave(self) -> None:
        with self._cond:
            del self._at[self._local.index]
            self._local.index = None
            self._cond.notify_all()

    def playing(self) -> bool:
        return getattr(self._local, "index", None) is not None

    def now(self) -> float:
        with self._cond:
            return self._at[self._local.index]

    def earliest_other(self) -> float | None:
        """The earliest clock of the other pollers (None: none is left): nothing they do can land sooner."""
        with self._cond:
            me = self._local.index
            return min((t for i, t in self._at.items() if i != me), default=None)

    def advance(self, seconds: float) -> None:
        with self._cond:
            self._at[self._local.index] += max(0.0, float(seconds))
            self._cond.notify_all()

    @contextlib.contextmanager
    def turn(self) -> Iterator[float]:
        """Wait until this poller is the earliest (ties by index): nobody else moves on meanwhile."""
        me = self._local.index
        with self._cond:
            self._cond.wait_for(lambda: min((t, i) for i, t in self._at.items())[1] == me)
            self.current, self.caller = self._at[me], me
        yield self.current


class _PerThreadRandom:
    """The retry handler's jitter, one seeded sequence per poller: the same waits every run."""

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._local = threading.local()

    def random(self) -> float:
        rng = getattr(self._local, "rng", None)
        if rng is None:
            rng = self._local.rng = random.Random(f"{self._seed}-{threading.current_thread().name}")
        return rng.random()


def playing(monkeypatch: pytest.MonkeyPatch, seed: int = SEED) -> Played:
    """Every wait, Slack call and AWS call of a poller's thread on its played clock, and the wall clock that
    claims and leases are judged by (costguard.clock.wall): nothing the notifiers decide hangs on how fast the
    machine is."""
    clock = Played()
    real_sleep = time.sleep
    slack_request = SlackClient._perform_urllib_http_request_internal
    aws_call = BaseClient._make_api_call  # type: ignore[attr-defined]

    def sleep(seconds: float) -> None:
        clock.advance(seconds) if clock.playing() else real_sleep(seconds)

    def request(self: SlackClient, url: str, req: Any) -> dict[str, Any]:
        if not clock.playing():
            return slack_request(self, url, req)
        with clock.turn():
            try:
                return slack_request(self, url, req)
            finally:
                clock.advance(SLACK_CALL_SECONDS)

    def call(self: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        if clock.playing() and getattr(clock.invoking, "on", False):
            clock.advance(AWS_CALL_SECONDS)
        return aws_call(self, operation, params)

    def wall() -> float:  # claims and leases in the state table: a poller's own played time, else the call's
        return base + (clock.now() if clock.playing() else clock.current)

    base = time.time()
    monkeypatch.setattr(time, "sleep", sleep)  # slack_sdk's back-off and Retry-After, the notifier's turns
    monkeypatch.setattr(costguard_clock, "_played_wall", wall)
    monkeypatch.setattr(delivery_run, "_pause", sleep)  # waiting for the other notifier's claim or lease
    monkeypatch.setattr(SlackClient, "_perform_urllib_http_request_internal", request)
    monkeypatch.setattr(BaseClient, "_make_api_call", call)
    monkeypatch.setattr(slack_retry, "random", _PerThreadRandom(seed))
    return clock


@dataclass
class Source:
    """One of the notifier's event sources: its queue and the template's settings for it."""

    logical_id: str
    url: str
    arn: str
    window: float
    batch_size: int
    concurrency: int
    visibility: float
    opened: float | None = None  # when its batching window began gathering
    returned: list[tuple[float, str]] = field(default_factory=list)  # (visible again at, receipt handle)

    def visible(self) -> int:
        attributes = clients.sqs().get_queue_attributes(
            QueueUrl=self.url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"])


@dataclass
class World:
    """What the pollers share: the sources, the notices still to be decided (played time, notices), when each
    notice was decided, the visibility the notifier gave each handed-back message, and the invocations running."""

    sources: list[Source]
    arrivals: list[tuple[float, list[Notice]]]
    queue: SqsNoticeQueue
    decided: dict[str, float] = field(default_factory=dict)
    hastened: dict[str, int] = field(default_factory=dict)  # receipt handle -> seconds
    retried_soon: int = 0  # hand-backs the notifier made visible again sooner than the visibility timeout
    running: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def feed(self, now: float) -> None:
        while self.arrivals and self.arrivals[0][0] <= now:
            at, notices = self.arrivals.pop(0)
            for notice in notices:
                self.decided.setdefault(notice.id, at)
            self.queue.send(notices)

    def next_event(self) -> float | None:
        times = [t for s in self.sources for t, _ in s.returned]
        times += [s.opened + s.window for s in self.sources if s.opened is not None]
        times += [self.arrivals[0][0]] if self.arrivals else []
        return min(times, default=None)


@dataclass
class Poller:
    index: int
    source: Source
    world: World
    stack: LocalStack
    clock: Played
    timeout: float
    invocations: list[dict[str, Any]] = field(default_factory=list)

    start: float = 0.0
    error: BaseException | None = None

    def run(self) -> None:
        self.clock.enter(self.index, self.start)
        try:
            self._run()
        except BaseException as error:  # surfaced by _play: a poller's error is the test's
            self.error = error
            raise
        finally:
            self.clock.leave()

    def _run(self) -> None:
        handler = self.stack.module(self.stack.template.functions()["NotifierFunction"]).lambda_handler
        while True:
            with self.clock.turn() as now, self.world.lock:
                self.world.feed(now)
                received = self._receive(now)
                later = self.world.next_event()
                idle = not received and later is None and self.world.running == 0 and not self._queued()
            if idle:
                return
            if not received:
                # Nothing is visible before the next known event (an arrival, a hand-back's visibility, a window
                # closing), nor before another poller's clock: what it settles lands no sooner than its own time.
                wake = min((t for t in (later, self.clock.earliest_other()) if t is not None), default=now)
                self.clock.advance(max(IDLE_POLL_SECONDS, wake - now))
                continue
            failed, took, killed = invoke(handler, self.clock, self.timeout, received, self.source.arn)
            self._settle(received, failed, now, self.clock.now())
            self.invocations.append(
                {
                    "started": now,
                    "records": len(received),
                    "seconds": took,
                    "killed": killed,
                    "returned": len(failed),
                }
            )

    def _queued(self) -> bool:
        return any(s.visible() for s in self.world.sources)

    def _receive(self, now: float) -> list[dict[str, Any]]:
        source, sqs = self.source, clients.sqs()
        for visible_at, handle in [r for r in source.returned if r[0] <= now]:
            source.returned.remove((visible_at, handle))
            sqs.change_message_visibility(QueueUrl=source.url, ReceiptHandle=handle, VisibilityTimeout=0)
        waiting = source.visible()
        if not waiting:
            return []
        if source.opened is None:
            source.opened = now
        if waiting < source.batch_size and now < source.opened + source.window:
            return []  # the batching window is still gathering
        received: list[dict[str, Any]] = []
        while len(received) < source.batch_size:
            got = sqs.receive_message(
                QueueUrl=source.url,
                MaxNumberOfMessages=min(10, source.batch_size - len(received)),
                AttributeNames=["All"],
                VisibilityTimeout=43_200,  # handed back in played time
            ).get("Messages", [])
            if not got:
                break
            received.extend(dict(m) for m in got)
        source.opened = None
        if received:
            self.world.running += 1
        return received

    def _settle(self, received: list[dict[str, Any]], failed: set[str], started: float, ended: float) -> None:
        sqs, source = clients.sqs(), self.source
        with self.world.lock:
            for message in received:
                handle = message["ReceiptHandle"]
                if message["MessageId"] not in failed:
                    sqs.delete_message(QueueUrl=source.url, ReceiptHandle=handle)
                elif handle in self.world.hastened:
                    source.returned.append((ended + self.world.hastened.pop(handle), handle))
                    self.world.retried_soon += 1
                else:
                    source.returned.append((started + source.visibility, handle))
            self.world.running -= 1


def recording_hand_backs(monkeypatch: pytest.MonkeyPatch, played: Played) -> dict[str, int]:
    """The notifier's ChangeMessageVisibilityBatch calls, kept in played time (not sent to moto, whose clock is
    the machine's): receipt handle -> seconds."""
    seen: dict[str, int] = {}
    call = BaseClient._make_api_call  # type: ignore[attr-defined]

    def recorded(self: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        if operation == "ChangeMessageVisibilityBatch" and getattr(played.invoking, "on", False):
            for entry in params["Entries"]:
                seen[entry["ReceiptHandle"]] = int(entry["VisibilityTimeout"])
            return {"Successful": [{"Id": e["Id"]} for e in params["Entries"]], "Failed": []}
        return call(self, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", recorded)
    return seen


def _sources(stack: LocalStack, batch_size: int | None = None) -> list[Source]:
    template = stack.template
    sqs = clients.sqs()
    found = []
    for logical in ("UrgentDecisionsQueue", "DecisionsQueue"):
        props = template.resources[logical]["Properties"]
        url = stack.urls[logical]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        event = next(
            e["Properties"]
            for e in template.resources["NotifierFunction"]["Properties"]["Events"].values()
            if e["Properties"]["Queue"] == {"Fn::GetAtt": [logical, "Arn"]}
        )
        found.append(
            Source(
                logical_id=logical,
                url=url,
                arn=arn,
                window=float(template.batch_window("NotifierFunction", logical)),
                batch_size=batch_size or int(event.get("BatchSize", 10)),
                concurrency=int(event["ScalingConfig"]["MaximumConcurrency"]),
                visibility=float(props["VisibilityTimeout"]),
            )
        )
    return found


def play(
    stack: LocalStack,
    clock: Played,
    arrivals: list[tuple[float, list[Notice]]],
    hastened: dict[str, int],
    start: float = 0.0,
    *,
    batch_size: int | None = None,
    timeout: float | None = None,
) -> tuple[World, list[Poller], float]:
    """The event sources from played time ``start`` until every arrival is told or kept; the world, the pollers
    and when the last invocation ended. ``batch_size`` and ``timeout``: settings other than the template's."""
    template = stack.template
    props = template.resources["NotifierFunction"]["Properties"]
    timeout = timeout or float(props.get("Timeout", template.body["Globals"]["Function"]["Timeout"]))
    sources = _sources(stack, batch_size)
    world = World(
        sources=sources,
        arrivals=sorted(arrivals, key=lambda a: a[0]),
        queue=SqsNoticeQueue(stack.urls["DecisionsQueue"], stack.urls["UrgentDecisionsQueue"]),
        hastened=hastened,
    )
    pollers: list[Poller] = []
    for source in sources:
        for _ in range(source.concurrency):
            pollers.append(Poller(len(pollers), source, world, stack, clock, timeout, start=start))
    threads = [threading.Thread(target=p.run, name=f"poller-{p.index}") for p in pollers]
    with contextlib.redirect_stdout(io.StringIO()):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=900)
    assert not any(t.is_alive() for t in threads), "a poller is still running"
    for poller in pollers:
        if poller.error is not None:
            raise AssertionError(f"poller {poller.index} failed") from poller.error
    ends = [i["started"] + i["seconds"] for p in pollers for i in p.invocations]
    return world, pollers, max(ends, default=start)


def invoke(
    handler: Callable[[Any, Any], Any],
    clock: Played,
    timeout: float,
    received: list[dict[str, Any]],
    arn: str,
) -> tuple[set[str], float, bool]:
    """One invocation of the notifier on ``received``, on the poller's played clock with ``timeout``: the ids it
    hands back (every one when it ran past its timeout: Lambda would have stopped it), how long it took, and
    whether it was killed."""
    started = clock.now()
    context = _Context("NotifierFunction", timeout, started, lambda s: clock.now() - s)
    clock.invoking.on = True
    try:
        result = handler({"Records": [_record(m, arn) for m in received]}, context)
    finally:
        clock.invoking.on = False
    took = clock.now() - started
    killed = took > timeout
    failed = (
        {m["MessageId"] for m in received}
        if killed
        else {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
    )
    return failed, took, killed


class _Context(LambdaContext):
    """Lambda's context with the invocation's played clock."""

    def __init__(self, name: str, timeout: float, started: float, played: Callable[[float], float]) -> None:
        super().__init__(function_name=name)
        self._timeout, self._started, self._played = timeout, started, played

    def get_remaining_time_in_millis(self) -> int:
        return int(max(0.0, self._timeout - self._played(self._started)) * 1000)


def _record(message: dict[str, Any], url: str) -> dict[str, Any]:
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": {},
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": url,
        "awsRegion": "us-east-1",
    }
