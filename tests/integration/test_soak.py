"""Soak: 1,000 decisions through the notifier while Slack fails 30% of the time; after redrive, each arrives once."""

from __future__ import annotations

import copy
import json
import random
import re
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from costguard.aws import clients
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.ops.redrive import redrive
from tests.conftest import EVENTS, ROOT

NOTICES = 1000
FAILING_SHARE = 0.30
SEED = 20261129
FIGURES = ROOT / "build" / "soak-figures.json"
_MARK = re.compile(r"soak-job-(\d{4})")


@pytest.fixture
def stack(world: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    """Each notice its own message (no groups), so that each one's arrival can be counted."""
    with LocalStack(world, sink=sink, overrides={"COSTGUARD_SLACK_GROUP_ABOVE": "10000"}) as running:
        yield running


def _notices(stack: LocalStack) -> list[str]:
    """1,000 distinct notices made from a real one: each its own job, event and so its own decision id."""
    stack.invoke(
        "TrainingJobsFunction", json.loads((EVENTS / "sagemaker-training-job-failed.json").read_text())
    )
    [message] = clients.sqs().receive_message(QueueUrl=stack.urls["DecisionsQueue"])["Messages"]
    clients.sqs().delete_message(
        QueueUrl=stack.urls["DecisionsQueue"], ReceiptHandle=message["ReceiptHandle"]
    )
    original = json.loads(message["Body"])
    original.pop("id", None)  # computed from the decision
    bodies = []
    for index in range(NOTICES):
        notice = copy.deepcopy(original)
        finding = notice["decision"]["finding"]
        name = f"soak-job-{index:04d}"
        finding["resource"].update(
            id=name, name=name, arn=finding["resource"]["arn"].rsplit("/", 1)[0] + "/" + name
        )
        finding["summary"] = f"Training job {name} failed."
        finding["event_id"] = f"soak-event-{index:04d}"
        bodies.append(json.dumps(notice))
    return bodies


def test_a_thousand_notices_with_slack_failing_arrive_exactly_once_after_redrive(stack: LocalStack) -> None:
    rng = random.Random(SEED)
    # 30% of the notices meet an outage: Slack answers 503 on every try until it is back (the client retries,
    # then the queue, then the dead-letter queue keeps them); meanwhile, and after, 30% of all other requests
    # fail at random (429, 500, 503), which the client retries. (A refusal for good, a 4xx, is parked instead:
    # tests/integration/test_hostile_slack.py.)
    down = set(rng.sample(range(NOTICES), int(NOTICES * FAILING_SHARE)))
    injected: Counter[int] = Counter()
    outage = {"on": True}

    def answer(message: dict[str, Any]) -> int:
        match = _MARK.search(message.get("text", ""))
        index = int(match[1]) if match else -1
        if outage["on"] and index in down:
            status = 503
        elif rng.random() < FAILING_SHARE:
            status = rng.choice([429, 500, 503])
        else:
            return 200
        injected[status] += 1
        return status

    stack.sink.answer = answer
    sqs = clients.sqs()
    url = stack.urls["DecisionsQueue"]
    bodies = _notices(stack)
    started = time.perf_counter()
    for start in range(0, NOTICES, 10):
        sqs.send_message_batch(
            QueueUrl=url,
            Entries=[{"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies[start : start + 10])],
        )

    invocations = len(stack.drain(max_rounds=100_000))
    dead_lettered = stack.queue_depth("DecisionsDeadLetterQueue")
    outage["on"] = False  # Slack is back (still failing 30% of requests at random)
    redrives, moved = 0, 0
    while stack.queue_depth("DecisionsDeadLetterQueue") or stack.queue_depth("DecisionsQueue"):
        redrives += 1
        assert redrives <= 20, "the dead-letter queue does not drain"
        moved += redrive(stack.urls["DecisionsDeadLetterQueue"], url)
        invocations += len(stack.drain(max_rounds=100_000))
    duration = time.perf_counter() - started

    arrived = Counter(
        int(m[1]) for m in (_MARK.search(msg.get("text", "")) for msg in stack.sink.messages) if m
    )
    exactly_once = sum(1 for index in range(NOTICES) if arrived[index] == 1)
    figures = {
        "notices": NOTICES,
        "delivered_exactly_once": exactly_once,
        "duplicates": sum(count - 1 for count in arrived.values() if count > 1),
        "missing": NOTICES - len(arrived),
        "seed": SEED,
        "failing_share": FAILING_SHARE,
        "slack_requests": len(stack.sink.requests),
        "slack_failures_injected": dict(sorted(injected.items())),
        "dead_lettered_before_redrive": dead_lettered,
        "redrive_rounds": redrives,
        "redriven": moved,
        "notifier_invocations": invocations,
        "duration_seconds": round(duration, 2),
    }
    assert dead_lettered == len(down), figures  # the outage did put them aside, and nothing else
    assert moved >= len(down), figures
    assert exactly_once == NOTICES, figures
    assert stack.queue_depth("DecisionsDeadLetterQueue") == 0
    # Figures are written only once the checks that judge them have passed.
    FIGURES.parent.mkdir(exist_ok=True)
    FIGURES.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
