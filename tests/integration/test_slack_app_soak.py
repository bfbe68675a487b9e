"""Soak of the Slack app path on the embedded stack: 1,000 notices about 200 resources (five news each, queued at
once, shuffled) through two notifiers running at once (the event source's MaximumConcurrency), each invocation
given the template's timeout and batch size, while 30% of Slack's Web API calls fail: 429 with Retry-After,
Slack's own ``ok: false ratelimited``, 500, 503, a stall past the client's timeout or a connection reset, before
Slack acted or after it (the post made, its answer lost).

Time is played, never the machine's (tests/integration/played_source.py): a Web API call takes SLACK_CALL_SECONDS,
any AWS call AWS_CALL_SECONDS, a stall the client's whole timeout (the sink tells it at once), and every back-off,
Retry-After and wait for the other notifier is added to the poller's clock, not slept; claims and leases are
judged by the same clock. The pollers are kept in step, so the run is the same on an idle machine and a loaded one
(the test runs on both: ``machine``). An invocation still running past the template's timeout would have been
killed: there must be none.

Then every notice appears exactly once in Slack (its own post, a row of one group, or of one group of news),
every conversation has one parent (a group of news, the news of many conversations at once, is not one) and every
reply is in its thread, no told entry and no group row is lost, every parent shows the newest
news of its conversation, and nothing is dead-lettered or parked. Once those checks pass, the figures go to
build/slack-soak-figures.json, and with COSTGUARD_SOAK_RESULTS=1 into bench/results.json (``slack_app_soak``).
"""

from __future__ import annotations

import json
import os
import random
import statistics
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from costguard.aws import clients
from costguard.local.interactions import LOCAL_CHANNEL
from costguard.local.sink import SlackSink
from costguard.local.stack import TABLE, LocalStack
from costguard.local.world import World
from costguard.notify.conversation import DynamoConversationStore, destination_id, group_post_id, order_of
from costguard.notify.group_message import build_group_message
from costguard.notify.message import build_message
from costguard.notify.notice import Notice
from costguard.notify.posts import NEWS_PREFIX
from tests.conftest import ROOT
from tests.integration.played_source import Played, play, playing, recording_hand_backs
from tests.integration.slack_app import atomic_dynamodb, notice, playing_stalls

RESOURCES = 200
NEWS = 5  # per resource: 1,000 notices
FAILING_SHARE = 0.30
FAULTS = ("429", "ratelimited", "500", "503", "stall", "reset", "stall_after", "reset_after")
SEED = 20261201
LOADED_SECONDS = 0.3  # a loaded machine: each Slack answer held longer than a played call takes
FIGURES = ROOT / "build" / "slack-soak-figures.json"
RESULTS = ROOT / "bench" / "results.json"
# Read as the module loads (each test starts with no COSTGUARD_ variable): COSTGUARD_SOAK_RESULTS=1 writes the
# figures into bench/results.json; COSTGUARD_SOAK_BATCH_SIZE and COSTGUARD_SOAK_TIMEOUT_SECONDS play settings
# other than the template's (how the template's were chosen).
WRITE_RESULTS = os.environ.get("COSTGUARD_SOAK_RESULTS") == "1"
BATCH_SIZE = os.environ.get("COSTGUARD_SOAK_BATCH_SIZE")
TIMEOUT_SECONDS = os.environ.get("COSTGUARD_SOAK_TIMEOUT_SECONDS")


@pytest.fixture
def played(monkeypatch: pytest.MonkeyPatch) -> Played:
    return playing(monkeypatch, SEED)


@pytest.fixture
def stack(
    world: World, sink: SlackSink, played: Played, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LocalStack]:
    sink.retry_after_seconds = 1  # whole seconds, as Slack sends them
    playing_stalls(monkeypatch, sink, played.advance)  # the poller's clock waits out the client's timeout
    with atomic_dynamodb(), LocalStack(world, sink=sink, slack_app=True) as running:
        yield running


def _queued(stack: LocalStack) -> int:
    total = 0
    for queue in ("UrgentDecisionsQueue", "DecisionsQueue"):
        attributes = clients.sqs().get_queue_attributes(
            QueueUrl=stack.urls[queue],
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        total += int(attributes["ApproximateNumberOfMessages"])
        total += int(attributes["ApproximateNumberOfMessagesNotVisible"])
    return total


@pytest.mark.parametrize(("machine", "resources"), [("idle", RESOURCES), ("loaded", RESOURCES // 5)])
def test_a_thousand_notices_through_two_notifiers_with_slack_failing_are_each_told_once(
    stack: LocalStack, played: Played, monkeypatch: pytest.MonkeyPatch, machine: str, resources: int
) -> None:
    """The soak on an idle machine, and a fifth of it on a loaded one (each Slack answer held on the machine's
    clock, longer than any played call): the played run does not hang on how fast the machine is."""
    rng = random.Random(SEED)
    hastened = recording_hand_backs(monkeypatch, played)
    stack.sink.slow_seconds = LOADED_SECONDS if machine == "loaded" else 0.0

    def fault(method: str, params: dict[str, Any]) -> str | None:
        # The sink's lock is held; the pollers call Slack one at a time, in played order.
        return rng.choice(FAULTS) if rng.random() < FAILING_SHARE else None

    notices = [notice(1000 + r, step) for r in range(resources) for step in range(NEWS)]
    rng.shuffle(notices)
    batch_size = int(BATCH_SIZE or stack.template.batch_size("NotifierFunction", "DecisionsQueue"))
    props = stack.template.resources["NotifierFunction"]["Properties"]
    timeout = float(
        TIMEOUT_SECONDS or props.get("Timeout", stack.template.body["Globals"]["Function"]["Timeout"])
    )
    stack.sink.fault = fault
    _, pollers, end = play(stack, played, [(0.0, notices)], hastened, batch_size=batch_size, timeout=timeout)
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
        "resources": resources,
        "seed": SEED,
        "failing_share": FAILING_SHARE,
        "slack_faults_injected": dict(sorted(stack.sink.faults.items())),
        "slack_requests": dict(sorted(methods.items())),
        "notifiers_at_once": len(pollers),
        "batch_size": batch_size,
        "timeout_seconds": timeout,
        "invocations": len(invocations),
        "invocations_killed": sum(i["killed"] for i in invocations),
        "records_returned_to_the_queue": sum(i["returned"] for i in invocations),
        "invocation_seconds_p50": round(statistics.median(seconds), 1),
        "invocation_seconds_p95": round(seconds[int(0.95 * (len(seconds) - 1))], 1),
        "invocation_seconds_max": round(seconds[-1], 1),
        "played_seconds": round(end, 1),
        "dead_lettered": stack.queue_depth("DecisionsDeadLetterQueue"),
        "parked": stack.queue_depth("FailedEventsQueue"),
        "left_in_queue": _queued(stack),
    }

    assert figures["left_in_queue"] == 0, figures
    assert figures["told_exactly_once"] == len(notices), (figures, twice)
    assert figures["conversations_with_one_parent"] == resources, figures
    assert figures["replies_outside_their_thread"] == 0, figures
    assert figures["told_entries_lost"] == 0, figures
    assert figures["group_rows_lost"] == 0, figures
    assert figures["parents_stale"] == 0, figures
    assert figures["invocations_killed"] == 0, figures
    assert figures["dead_lettered"] == 0 and figures["parked"] == 0, figures
    assert sum(stack.sink.faults.values()) > 0, figures  # Slack did fail

    if machine == "idle":  # the figures are the same on both: written once, after the checks
        FIGURES.parent.mkdir(exist_ok=True)
        FIGURES.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        if WRITE_RESULTS:
            results = json.loads(RESULTS.read_text())
            results["slack_app_soak"] = figures
            RESULTS.write_text(json.dumps(results, indent=2) + "\n")


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
        if not message.get("thread_ts") and not (key or "").startswith(NEWS_PREFIX):
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
