"""Shared fixtures: project paths, sample events, a clean costguard environment."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from botocore.stub import Stubber

from costguard.local.sink import SlackSink
from tests.moto_speed import faster_moto

if TYPE_CHECKING:
    from costguard.local.world import World

# moto's EC2 loads its 1,300 stock AMIs into every new region's backend unless told not to (a third of a second
# each); no test reads them: instances are launched from seed_world's STAND_IN_IMAGE, which moto does not check.
os.environ.setdefault("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")

ROOT = Path(__file__).resolve().parents[1]
EVENTS = ROOT / "events"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
DEMO_WORLD = ROOT / "worlds" / "demo.yaml"


# `make unit` runs the tests on every core with `--dist loadgroup` and `--no-loadscope-reorder` (pyproject.toml).
# A test without an xdist_group mark is grouped with its file, as `--dist loadfile` would group it: a module's
# fixtures are built once, on one worker. A file lets its independent heavy tests run on another worker by giving
# them a group of their own. The groups below go first, slowest first (as `pytest --durations` measured them), so
# that no long group starts last while the other worker has nothing left to do; every other group follows in
# collection order.
SLOWEST_FIRST = (  # seconds on 2026-12-01 and 2026-12-07, `-n 2`: the groups of 10 s or more
    "tests/integration/test_slack_latency.py",  # 380 in all, each case on its own: three played sweeps
    "tests/integration/test_ledger_flow.py",  # 147: the demo world played in each mode, and by `ledger --world`
    "tests/integration/test_slack_app_soak.py",  # 140: 1,000 notices played, and a fifth on a loaded machine
    "tests/integration/test_slack_channel_rate.py",  # 110: two organization bursts against the per-channel limit
    "tests/integration/test_soak.py",  # 50
    "tests/integration/test_demo_payloads.py",  # 40: the demo world played in each mode
    "demo",  # 32: `costguard demo` in a fresh interpreter, read by test_cli.py and test_sagemaker_flow.py
    "tests/integration/test_organization.py",  # 29
    "tests/integration/test_gpu_scale.py",  # 29: the hub's 1,000-instance fleet, a sweep and two reconciles
    "slack_noise_fleet",  # 26: 1,000 idle instances seeded in moto, one sweep
    "tests/unit/test_bounded_state.py",  # 23
    "tests/integration/test_training_health_flow.py",  # 20
    "tests/integration/test_gpu_flow.py",  # 17
    "tests/integration/test_adaptive_sweep.py",  # 17
    "gpu_scale_member_fleet",  # 16: the same fleet in a member account, swept as an organization's work item
    "tests/integration/test_launch_detectors.py",  # 16
    "tests/property/test_hostile_events.py",  # 13
    "tests/integration/test_training_guardrails_flow.py",  # 11
)

# Files whose tests share nothing beyond one test (a stack of their own each, no module or session fixture): each
# of their tests is a unit of its own, as under `--dist load`, and fills whichever worker is free.
SPREAD = frozenset(
    {
        "tests/integration/test_hostile_slack.py",
        "tests/integration/test_budgets_flow.py",
        "tests/integration/test_faults.py",
        "tests/integration/test_interactions_flow.py",
        "tests/integration/test_capacity_flow.py",
        "tests/integration/test_slack_latency.py",
        "tests/integration/test_slack_app_soak.py",
    }
)


def xdist_group_of(item: pytest.Item) -> str:
    """The group a test is scheduled with: its xdist_group mark's name, else its file."""
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return item.path.relative_to(ROOT).as_posix()
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("dist", "no") != "loadgroup":
        return
    for item in items:
        group = xdist_group_of(item)
        if item.get_closest_marker("xdist_group") is None and group not in SPREAD:
            item.add_marker(pytest.mark.xdist_group(group))
    rank = {group: n for n, group in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(xdist_group_of(item), len(rank)))


def load_event(name: str) -> dict[str, Any]:
    """A sample payload from events/ (or tests/fixtures/ for broken ones) by file name."""
    path = EVENTS / name if (EVENTS / name).exists() else FIXTURES / name
    event: dict[str, Any] = json.loads(path.read_text())
    return event


def later(path: Path, tmp_path: Path, minutes: int) -> Path:
    """Another delivery of a shipped event (its own id), ``minutes`` after it, written under ``tmp_path``."""
    from datetime import datetime, timedelta

    event = load_event(path.name)
    event["id"] = f"{event['id'][:-4]}{minutes:04d}"
    event["time"] = (
        datetime.fromisoformat(event["time"].replace("Z", "+00:00")) + timedelta(minutes=minutes)
    ).isoformat()
    out = tmp_path / f"{path.stem}-{minutes}.json"
    out.write_text(json.dumps(event))
    return out


def job_status(name: str) -> str:
    """A training job's status in the embedded AWS."""
    from costguard.aws import clients

    return str(clients.sagemaker().describe_training_job(TrainingJobName=name)["TrainingJobStatus"])


def with_reason(results: list[Any], reason: str, kind: str = "decisions") -> list[dict[str, Any]]:
    """The decisions (or, with ``kind="findings"``, the findings) of ``reason`` across replayed runs' results."""
    return [d for r in results for d in getattr(r, kind) if d["reason"] == reason]


def replay_with_status(
    world: World, sink: SlackSink, mode: str | None, events: list[Path], job: str
) -> tuple[list[Any], str]:
    """``events`` replayed on a local stack of ``world`` in ``mode`` (its metrics published to 30 minutes past
    its now), and training job ``job``'s status when they are done."""
    from datetime import timedelta

    from costguard.local.replay import replay
    from costguard.local.stack import LocalStack

    with LocalStack(world, mode=mode, sink=sink, until=world.now + timedelta(minutes=30)) as stack:
        return replay(stack, events), job_status(job)


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects among the lines of captured output (powertools' log lines, EMF metrics)."""
    found = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                found.append(value)
    return found


@pytest.fixture(autouse=True, scope="session")
def _fast_moto_responses() -> Iterator[None]:
    """moto with its serializer's per-member work cached and its instance lookup uncopied (tests/moto_speed.py)."""
    with faster_moto():
        yield


@pytest.fixture(autouse=True, scope="session")
def _dynamodb_key_limits() -> Iterator[None]:
    """moto's DynamoDB refuses a key over DynamoDB's limits on every call, as DynamoDB does, not on PutItem only
    (costguard/local/dynamo_limits.py): every test that keeps state runs under the real limit."""
    from costguard.local.dynamo_limits import key_limits

    with key_limits():
        yield


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test sees the developer's AWS profile or costguard variables, and none can reach AWS."""
    for key in list(os.environ):
        if key.startswith(("COSTGUARD_", "AWS_", "POWERTOOLS_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "CostguardTest")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    from costguard.aws import clients
    from costguard.settings import get_settings

    clients.reset()
    clients.enter_account(None)  # an earlier test's handler parsed an event of some account
    get_settings.cache_clear()
    yield
    clients.reset()
    clients.enter_account(None)
    get_settings.cache_clear()


@pytest.fixture
def state_table() -> Iterator[str]:
    """The embedded AWS (moto) for one test, with costguard's state table in it: its name."""
    from moto import mock_aws

    from costguard.aws import clients
    from costguard.local.stack import create_state_table

    with mock_aws():
        create_state_table(clients.client("dynamodb"), "state")
        yield "state"


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """slack_sdk's retry back-off, recorded instead of slept."""
    import slack_sdk.http_retry.builtin_handlers as builtin
    import slack_sdk.http_retry.handler as handler

    recorded: list[float] = []
    monkeypatch.setattr(builtin.time, "sleep", recorded.append)
    monkeypatch.setattr(handler.time, "sleep", recorded.append)
    return recorded


@pytest.fixture
def sink() -> Iterator[SlackSink]:
    """The local Slack (webhooks and Web API), running for one test."""
    with SlackSink() as running:
        yield running


@pytest.fixture
def dynamodb_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """aws/dynamo.py's back-off between tries, recorded instead of slept."""
    from costguard.aws import dynamo

    recorded: list[float] = []
    monkeypatch.setattr(dynamo.time, "sleep", recorded.append)
    return recorded


@pytest.fixture
def stubbed_dynamodb(dynamodb_waits: list[float]) -> Iterator[Stubber]:
    """The client the state table's code gets (``clients.client("dynamodb")``), stubbed, its back-off not slept;
    every stubbed answer used by the end of the test."""
    from costguard.aws import clients

    with Stubber(clients.client("dynamodb")) as stub:
        yield stub
        stub.assert_no_pending_responses()
