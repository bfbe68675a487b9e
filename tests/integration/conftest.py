"""Integration fixtures: the local stack on moto with the demo world, and a Slack sink with no real sleeps."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World, load_world
from tests.conftest import DEMO_WORLD, ROOT


@pytest.fixture
def world() -> World:
    return load_world(DEMO_WORLD)


@pytest.fixture
def stack(world: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    with LocalStack(world, sink=sink) as running:
        yield running


@pytest.fixture(scope="session")
def demo_output(tmp_path_factory: pytest.TempPathFactory) -> str:
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
        [sys.executable, "-m", "costguard.local.cli", "demo", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout
