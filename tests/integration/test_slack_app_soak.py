"""Soak of the Slack app path on the embedded stack: 1,000 notices about 200 resources (five news each, queued at
once, shuffled) through two notifiers running at once (the event source's MaximumConcurrency), each invocation
given the template's timeout and batch size, while 30% of Slack's Web API calls fail: 429 with Retry-After,
Slack's own ``ok: false ratelimited``, 500, 503, a stall past the client's timeout or a connection reset, before
Slack acted or after it (the post made, its answer lost).

Time is played at 1/SCALE: the client's 5 s timeout is 0.1 s here, and every back-off, Retry-After and margin is
as much shorter. An invocation's clock counts its Slack calls as they took, its own work (moto answering in ~2 ms
what DynamoDB answers in ~10 ms) LOCAL_SCALE/SCALE as long, and the back-off it slept (not slept here). An
invocation still running past the template's timeout would have been killed: there must be none.

Then every notice appears exactly once in Slack (its own post, a row of one group, or of one group of news),
every conversation has one parent (a group of news, the news of many conversations at once, is not one) and every
reply is in its thread, no told entry and no group row is lost, every parent shows the newest
news of its conversation, and nothing is dead-lettered or parked. The figures go to build/slack-soak-figures.json,
and with COSTGUARD_SOAK_RESULTS=1 into bench/results.json (``slack_app_soak``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from costguard.aws import clients
from costguard.flows import notifier
from costguard.local.interactions import LOCAL_CHANNEL
from costguard.local.sink import SlackSink
from costguard.local.stack import TABLE, LambdaContext, LocalStack
from costguard.local.world import World
from costguard.notify import delivery, slack_api
from costguard.notify.conversation import DynamoConversationStore, destination_id, group_post_id, order_of
from costguard.notify.message import build_group_message, build_message
from costguard.notify.notice import Notice
from tests.conftest import ROOT
from tests.integration.slack_app import atomic_dynamodb, notice

RESOURCES = 200
NEWS = 5  # per resource: 1,000 notices
FAILING_SHARE = 0.30
FAULTS = ("429", "ratelimited", "500", "503", "stall", "reset", "stall_after", "reset_after")
SEED = 20261201
# Production seconds per second here. At 10 the Slack calls (their wall time counts whole, in production seconds)
# leave the played deadline room on a loaded machine: at 50, and once at 20, a CI worker beside another slowed the sink
# enough that a notice met its deadline five times (dead-lettered), or a parent update was cut short.
SCALE = float(os.environ.get("COSTGUARD_SOAK_SCALE") or 10.0)
LOCAL_SCALE = 5.0  # production seconds per second of the notifier's own work here (moto for DynamoDB)
CONCURRENCY = 2
FIGURES = ROOT / "build" / "slack-soak-figures.json"
RESULTS = ROOT / "bench" / "results.json"
# Read as the module loads (each test starts with no COSTGUARD_ variable): COSTGUARD_SOAK_RESULTS=1 writes the
# figures into bench/results.json; COSTGUARD_SOAK_BATCH_SIZE and COSTGUARD_SOAK_TIMEOUT_SECONDS play settings
# other than the template's (how the template's were chosen); COSTGUARD_SOAK_SCALE plays time faster (a harder
# deadline for a loaded machine).
WRITE_RESULTS = os.environ.get("COSTGUARD_SOAK_RESULTS") == "1"
BATCH_SIZE = os.environ.get("COSTGUARD_SOAK_BATCH_SIZE")
TIMEOUT_SECONDS = os.environ.get("COSTGUARD_SOAK_TIMEOUT_SECONDS")


@pytest.fixture
def played(monkeypatch: pytest.MonkeyPatch) -> threading.local:
    """Production's seconds at 1/SCALE: the client's timeout, its back-off, Slack's Retry-After, the deadline's
    margin and the notifier's waits; every sleep added to the sleeping thread's clock instead of slept."""
    clock = threading.local()

    def sleep(seconds: float) -> None:
        clock.slept = getattr(clock, "slept", 0.0) + float(seconds)

    call = slack_api.SlackApi._call

    def timed(self: slack_api.SlackApi, method: str, make: Any, **options: Any) -> Any:
        started = time.monotonic()
        try:
            return call(self, method, make, **options)
        finally:
            clock.in_slack = getattr(clock, "in_slack", 0.0) + time.monotonic() - started
            clock.calls = getattr(clock, "calls", 0) + 1

    def pause(seconds: float) -> None:  # waiting for the other notifier: real, and counted whole
        threading.Event().wait(seconds)
        clock.slept = getattr(clock, "slept", 0.0) + seconds * (1 - LOCAL_SCALE / SCALE)

    monkeypatch.setattr(time, "sleep", sleep)
    monkeypatch.setattr(slack_api.SlackApi, "_call", timed)
    monkeypatch.setattr(notifier, "_pause", pause)
    monkeypatch.setattr(slack_api, "CALL_TIMEOUT_SECONDS", 5 / SCALE)
    monkeypatch.setattr(slack_api, "BACKOFF_FACTOR", 0.5 / SCALE)
    monkeypatch.setattr(slack_api, "JITTER", 1 / SCALE)
    monkeypatch.setattr(slack_api, "_RETRY_AFTER", 1 / SCALE)
    monkeypatch.setattr(delivery, "DEADLINE_MARGIN_SECONDS", delivery.DEADLINE_MARGIN_SECONDS / SCALE)
    monkeypatch.setattr(notifier, "CLAIM_MARGIN_SECONDS", notifier.CLAIM_MARGIN_SECONDS / SCALE)
    monkeypatch.setattr(notifier, "_PAUSES", tuple(p / SCALE for p in notifier._PAUSES))
    monkeypatch.setattr(notifier, "_CHANNEL_INTERVAL_SECONDS", notifier._CHANNEL_INTERVAL_SECONDS / SCALE)
    return clock


@pytest.fixture
def stack(world: World, sink: SlackSink, played: threading.local) -> Iterator[LocalStack]:
    sink.stall_seconds = 2.5 * 5 / SCALE  # past the client's timeout
    sink.retry_after_seconds = 1 / SCALE
    with atomic_dynamodb(), LocalStack(world, sink=sink, slack_app=True) as running:
        yield running


@dataclass
class Poller:
    """Lambda's SQS event source for the notifier, one of CONCURRENCY: batches of the template's size, each
    invocation with the template's timeout (played); what it returns goes back to the queue."""

    stack: LocalStack
    clock: threading.local
    batch_size: int
    timeout: float  # played seconds
    invocations: list[dict[str, Any]] = field(default_factory=list)

    def run(self, stop: threading.Event) -> None:
        function = self.stack.template.functions()["NotifierFunction"]
        handler = self.stack.module(function).lambda_handler
        sqs, url = clients.sqs(), self.stack.urls["DecisionsQueue"]
        while not stop.is_set():
            received: list[dict[str, Any]] = []
            while len(received) < self.batch_size:
                got = sqs.receive_message(
                    QueueUrl=url,
                    MaxNumberOfMessages=min(10, self.batch_size - len(received)),
                    AttributeNames=["All"],
                    VisibilityTimeout=60,
                ).get("Messages", [])
                if not got:
                    break
                received.extend(got)
            if not received:
                threading.Event().wait(0.05)
                continue
            self.clock.slept = self.clock.in_slack = 0.0
            self.clock.calls = 0
            started = time.monotonic()
            context = _Context("NotifierFunction", self.timeout, started, self._played)
            event = {"Records": [_record(m, url) for m in received]}
            result = handler(event, context)
            took = self._played(started)
            failed = {f["itemIdentifier"] for f in result.get("batchItemFailures", [])}
            killed = took > self.timeout  # Lambda would have stopped it: the whole batch comes back
            if killed:
                failed = {m["MessageId"] for m in received}
            for message in received:
                if message["MessageId"] in failed:  # visible again a played visibility timeout later
                    sqs.change_message_visibility(
                        QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=1
                    )
                else:
                    sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
            self.invocations.append(
                {
                    "records": len(received),
                    "returned": len(failed),
                    "seconds": took * SCALE,
                    "killed": killed,
                    "wall": time.monotonic() - started,
                    "in_slack": getattr(self.clock, "in_slack", 0.0),
                    "slept": getattr(self.clock, "slept", 0.0),
                    "slack_calls": getattr(self.clock, "calls", 0),
                }
            )

    def _played(self, started: float) -> float:
        in_slack = getattr(self.clock, "in_slack", 0.0)
        own = time.monotonic() - started - in_slack
        return in_slack + own * LOCAL_SCALE / SCALE + getattr(self.clock, "slept", 0.0)


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


def _queued(stack: LocalStack) -> int:
    attributes = clients.sqs().get_queue_attributes(
        QueueUrl=stack.urls["DecisionsQueue"],
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(
        attributes["ApproximateNumberOfMessagesNotVisible"]
    )


def test_a_thousand_notices_through_two_notifiers_with_slack_failing_are_each_told_once(
    stack: LocalStack, played: threading.local
) -> None:
    rng = random.Random(SEED)
    lock = threading.Lock()

    def fault(method: str, params: dict[str, Any]) -> str | None:
        with lock:
            return rng.choice(FAULTS) if rng.random() < FAILING_SHARE else None

    notices = [notice(1000 + r, step) for r in range(RESOURCES) for step in range(NEWS)]
    bodies = [n.model_dump_json() for n in notices]
    rng.shuffle(bodies)
    for start in range(0, len(bodies), 10):
        clients.sqs().send_message_batch(
            QueueUrl=stack.urls["DecisionsQueue"],
            Entries=[{"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies[start : start + 10])],
        )
    batch_size = int(BATCH_SIZE or stack.template.batch_size("NotifierFunction", "DecisionsQueue"))
    props = stack.template.resources["NotifierFunction"]["Properties"]
    timeout = float(
        TIMEOUT_SECONDS or props.get("Timeout", stack.template.body["Globals"]["Function"]["Timeout"])
    )
    pollers = [Poller(stack, played, batch_size, timeout / SCALE) for _ in range(CONCURRENCY)]
    stack.sink.fault = fault
    stop = threading.Event()
    started = time.monotonic()
    threads = [threading.Thread(target=p.run, args=(stop,)) for p in pollers]
    with contextlib.redirect_stdout(io.StringIO()):  # the invocations' metrics
        for thread in threads:
            thread.start()
        while _queued(stack) and time.monotonic() - started < 240:
            threading.Event().wait(0.1)
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    wall = time.monotonic() - started
    stack.sink.fault = None

    figures = _check(stack, notices)
    twice = figures.pop("told_twice")  # each notice told twice, with the posts that tell it
    invocations = [i for p in pollers for i in p.invocations]
    seconds = sorted(i["seconds"] for i in invocations)
    methods = Counter(
        path.split("/api/", 1)[-1].split("?")[0] for path, _ in stack.sink.requests if "/api/" in path
    )
    figures |= {
        "notices": len(notices),
        "resources": RESOURCES,
        "seed": SEED,
        "failing_share": FAILING_SHARE,
        "slack_faults_injected": dict(sorted(stack.sink.faults.items())),
        "slack_requests": dict(sorted(methods.items())),
        "notifiers_at_once": CONCURRENCY,
        "batch_size": batch_size,
        "timeout_seconds": timeout,
        "time_scale": SCALE,
        "invocations": len(invocations),
        "invocations_killed": sum(i["killed"] for i in invocations),
        "records_returned_to_the_queue": sum(i["returned"] for i in invocations),
        "invocation_seconds_p50": round(statistics.median(seconds), 1),
        "invocation_seconds_p95": round(seconds[int(0.95 * (len(seconds) - 1))], 1),
        "invocation_seconds_max": round(seconds[-1], 1),
        "slack_calls_in_one_invocation_max": max(i["slack_calls"] for i in invocations),
        "backoff_seconds_in_one_invocation_max": round(max(i["slept"] for i in invocations) * SCALE, 1),
        "dead_lettered": stack.queue_depth("DecisionsDeadLetterQueue"),
        "parked": stack.queue_depth("FailedEventsQueue"),
        "left_in_queue": _queued(stack),
        "wall_seconds": round(wall, 1),
    }
    FIGURES.parent.mkdir(exist_ok=True)
    FIGURES.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    if WRITE_RESULTS:
        results = json.loads(RESULTS.read_text())
        results["slack_app_soak"] = figures
        RESULTS.write_text(json.dumps(results, indent=2) + "\n")

    assert figures["left_in_queue"] == 0, figures
    assert figures["told_exactly_once"] == len(notices), (figures, twice)
    assert figures["conversations_with_one_parent"] == RESOURCES, figures
    assert figures["replies_outside_their_thread"] == 0, figures
    assert figures["told_entries_lost"] == 0, figures
    assert figures["group_rows_lost"] == 0, figures
    assert figures["parents_stale"] == 0, figures
    assert figures["invocations_killed"] == 0, figures
    assert figures["dead_lettered"] == 0 and figures["parked"] == 0, figures


def _check(stack: LocalStack, notices: list[Notice]) -> dict[str, Any]:
    """What Slack and the state table hold against what was queued."""
    sink, channel = stack.sink, LOCAL_CHANNEL
    store = DynamoConversationStore(TABLE)
    where = destination_id(channel)
    posts = [
        m for m in sink.messages if m.get("method") == "chat.postMessage" and m.get("channel") == channel
    ]
    key_of = {m["ts"]: (m.get("metadata") or {}).get("event_payload", {}).get("post") for m in posts}
    tellings: Counter[str] = Counter()
    parent_of: dict[str, list[str]] = {}  # conversation key -> the top-level posts that tell it
    rows_of: dict[str, list[str]] = {}  # a group's ts -> the notice ids it told
    by_id = {n.id: n for n in notices}
    groups = 0
    for message in posts:
        key = key_of[message["ts"]]
        state = store.group(group_post_id(where, key)) if key and key not in by_id else None
        told = list(state.posted) if state is not None else [key] if key in by_id else []
        if state is not None:
            groups += 1
            rows_of[message["ts"]] = told
        tellings.update(told)
        if not message.get("thread_ts") and not (key or "").startswith(notifier.NEWS_PREFIX):
            for told_id in told:
                parent_of.setdefault(by_id[told_id].decision.finding.conversation, []).append(message["ts"])
    newest: dict[str, Notice] = {}
    for n in notices:
        key = n.decision.finding.conversation
        if key not in newest or order_of(n) > order_of(newest[key]):
            newest[key] = n
    conversations = store.get_many(channel, list(newest))
    one_parent = lost_told = stale = lost_rows = outside = 0
    for key, latest in newest.items():
        conversation = conversations.get(key)
        parents = sorted(set(parent_of.get(key, [])))
        if conversation is None or conversation.ts is None:
            continue
        if len(parents) == 1 and conversation.ts == parents[0]:
            one_parent += 1
        ids = {n.id for n in notices if n.decision.finding.conversation == key}
        lost_told += len(ids - set(conversation.told))
        replies = [m for m in posts if m.get("thread_ts") and key_of[m["ts"]] in ids]
        outside += sum(m["thread_ts"] != conversation.ts for m in replies)
        current = sink.current(channel, conversation.ts or "")
        if conversation.grouped:
            state = store.group(group_post_id(where, conversation.post or ""))
            assert state is not None
            row = next(r for r in state.body.rows if r.decision.finding.conversation == key)
            lost_rows += row.id != latest.id
            expected = build_group_message(state.body, owners={}, interactive=True)
        else:
            expected = build_message(latest, interactive=True)
        stale += current.get("blocks") != expected["blocks"]
    carriers: dict[str, list[dict[str, Any]]] = {}
    for message in posts:
        key = key_of[message["ts"]]
        for told_id in rows_of.get(message["ts"], [key] if key in by_id else []):
            carriers.setdefault(told_id, []).append(
                {"ts": message["ts"], "thread_ts": message.get("thread_ts"), "post": key}
            )
    return {
        "told_twice": {i: carriers.get(i, []) for i in list(tellings) if tellings[i] > 1},
        "told_exactly_once": sum(tellings[n.id] == 1 for n in notices),
        "told_twice_or_more": sum(tellings[n.id] > 1 for n in notices),
        "never_told": sum(tellings[n.id] == 0 for n in notices),
        "conversations_with_one_parent": one_parent,
        "replies_outside_their_thread": outside,
        "told_entries_lost": lost_told,
        "group_rows_lost": lost_rows,
        "parents_stale": stale,
        "top_level_posts": sum(not m.get("thread_ts") for m in posts),
        "group_messages": groups,
        "replies": sum(bool(m.get("thread_ts")) for m in posts),
        "parent_updates": len(sink.updates),
    }
