"""Integration fixtures: the local stack on moto with the demo world, and a Slack sink with no real sleeps."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest

from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World, load_world
from tests.conftest import DEMO_WORLD, ROOT

REGION = "us-east-1"


@pytest.fixture
def world() -> World:
    return load_world(DEMO_WORLD)


@pytest.fixture
def stack(world: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    with LocalStack(world, sink=sink) as running:
        yield running


@dataclass(frozen=True)
class DemoRun:
    brief: str  # what the terminal shows by default: the short story
    transcript: str  # every event, finding, decision and Slack message in full (its transcript.txt)


@pytest.fixture(scope="session")
def demo_output(demo_run: DemoRun) -> str:
    """The demo's full detail: its transcript (what --verbose prints)."""
    return demo_run.transcript


@pytest.fixture(scope="session")
def demo_brief(demo_run: DemoRun) -> str:
    """What the demo prints by default."""
    return demo_run.brief


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """`costguard demo` as a user runs it, in a fresh interpreter, once for the session.

    A fresh process also keeps the demo's state machine run clear of the many mocks an in-process test run
    has started and stopped before it. Its reports go to a folder of the session's own.
    """
    out = tmp_path_factory.mktemp("demo")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COSTGUARD_", "AWS_", "POWERTOOLS_"))}
    env |= {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    run = subprocess.run(
        [sys.executable, "-m", "costguard.cli", "demo", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return DemoRun(run.stdout, (out / "transcript.txt").read_text(encoding="utf-8"))


def subscribe_queue(topic_arn: str, region: str = REGION) -> str:
    """An SQS queue subscribed to the topic (raw delivery): what an email subscriber would get, readable."""
    sqs = boto3.client("sqs", region_name=region)
    url = sqs.create_queue(QueueName="ops-inbox")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    boto3.client("sns", region_name=region).subscribe(
        TopicArn=topic_arn, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"}
    )
    return url


def drain(sqs: Any, url: str) -> list[str]:
    """Every message body on the queue, each deleted once read."""
    found: list[str] = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        for message in messages:
            found.append(message["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return found
