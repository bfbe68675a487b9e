"""costguard.handler: the one handler shell, its routes, conversions and organization sweep; what a handler's
cold import loads."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from pydantic import BaseModel

from bench.imports import handler_environment
from costguard.entry import OncePerEvent
from costguard.events.cloudwatch import AlarmNotification, AlarmStateChange
from costguard.events.ec2 import SpotInterruptionWarning
from costguard.events.scheduled import ScheduledEvent
from costguard.flows import org
from costguard.handler import OrgSweep, event_handler, lambda_entry
from costguard.local.stack import LambdaContext
from costguard.local.template import Template
from costguard.observability import logger
from costguard.settings import get_settings
from tests.conftest import ROOT, load_event

SPOT = load_event("ec2-spot-interruption-warning.json")
SCHEDULE = load_event("schedule-gpu-sweep-1200.json")
CONTEXT = LambdaContext(function_name="costguard-test")
GPU_INTERVAL = org.SWEEP_INTERVALS["gpu"]  # as functions/gpu_idle/app.py builds its sweep
WORK_BATCH = {"Records": [{"messageId": "m-1", "body": "{}", "eventSource": "aws:sqs"}]}


@pytest.fixture
def failed_queue(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The failed-events queue a rejection keeps its event in, on moto."""
    with mock_aws():
        url = boto3.client("sqs", region_name="us-east-1").create_queue(QueueName="failed")["QueueUrl"]
        monkeypatch.setenv("COSTGUARD_FAILED_EVENTS_QUEUE_URL", url)
        get_settings.cache_clear()
        yield url


def _kept(url: str) -> list[dict[str, Any]]:
    answer = boto3.client("sqs", region_name="us-east-1").receive_message(
        QueueUrl=url, MaxNumberOfMessages=10
    )
    return [json.loads(m["Body"]) for m in answer.get("Messages", [])]


class RecordingOnce(OncePerEvent):
    """An OncePerEvent that records what it is called with instead of keeping an idempotency record."""

    def __init__(self) -> None:
        super().__init__(lambda event: {})
        self.calls: list[tuple[BaseModel, Any]] = []

    def __call__(self, event: BaseModel, context: Any = None) -> dict[str, Any]:
        self.calls.append((event, context))
        return {"once": type(event).__name__}


def test_an_accepted_event_is_parsed_and_handed_to_its_route() -> None:
    seen: list[BaseModel] = []

    def on_spot(event: SpotInterruptionWarning) -> dict[str, Any]:
        seen.append(event)
        return {"correlation_id": logger.get_correlation_id()}

    handle = event_handler("spot_interruptions", {SpotInterruptionWarning: on_spot})
    assert handle(SPOT, CONTEXT) == {
        "correlation_id": SPOT["id"]
    }  # the shell's correlation id: the event's id
    assert len(seen) == 1 and isinstance(seen[0], SpotInterruptionWarning) and seen[0].id == SPOT["id"]


def test_each_model_goes_to_its_own_route() -> None:
    handle = event_handler(
        "f",
        {
            SpotInterruptionWarning: lambda e: {"route": "spot"},
            ScheduledEvent: lambda e: {"route": "schedule"},
        },
    )
    assert handle(SPOT, CONTEXT) == {"route": "spot"}
    assert handle(SCHEDULE, CONTEXT) == {"route": "schedule"}


def test_an_event_no_route_accepts_is_rejected_and_kept(failed_queue: str) -> None:
    routed: list[BaseModel] = []
    handle = event_handler("spot_interruptions", {SpotInterruptionWarning: routed.append})  # type: ignore[dict-item]
    result = handle(SCHEDULE, CONTEXT)
    assert result["rejected"] is True and result["event_id"] == SCHEDULE["id"]
    assert "spot_interruptions does not handle" in result["problem"]
    assert routed == []
    kept = _kept(failed_queue)
    assert [k["function"] for k in kept] == ["spot_interruptions"] and kept[0]["event"] == SCHEDULE


def test_a_malformed_event_of_a_routed_model_is_rejected_and_kept(failed_queue: str) -> None:
    broken = {**SPOT, "region": "not-a-region"}
    handle = event_handler("spot_interruptions", {SpotInterruptionWarning: lambda e: {"routed": True}})
    result = handle(broken, CONTEXT)
    assert result["rejected"] is True and "not an AWS region" in result["problem"]
    assert len(_kept(failed_queue)) == 1


def test_a_once_per_event_route_is_given_the_invocations_context() -> None:
    once = RecordingOnce()
    handle = event_handler("spot_interruptions", {SpotInterruptionWarning: once})
    assert handle(SPOT, CONTEXT) == {"once": "SpotInterruptionWarning"}
    [(event, context)] = once.calls
    assert isinstance(event, SpotInterruptionWarning) and context is CONTEXT


def test_a_converted_delivery_goes_to_the_route_of_what_it_converts_to() -> None:
    once = RecordingOnce()
    handle = event_handler(
        "gpu_idle",
        {AlarmStateChange: once},
        converts={AlarmNotification: AlarmNotification.as_state_change},
    )
    handle(load_event("sns-gpu-idle-alarm.json"), CONTEXT)
    [(event, _)] = once.calls
    assert isinstance(event, AlarmStateChange)
    assert event.id == "4a1c2e9d-5b7f-5d3e-9a61-2b8c0d4e6f10"  # the SNS message id stays the event's id


def _sweep_settings(monkeypatch: pytest.MonkeyPatch, organization: bool) -> Any:
    if organization:
        monkeypatch.setenv("COSTGUARD_MEMBER_ROLE_NAME", "costguard-member")
        monkeypatch.setenv("COSTGUARD_SWEEP_QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/1/sweep")
    get_settings.cache_clear()
    settings = get_settings()
    assert settings.organization is organization
    return settings


def test_an_organizations_scheduled_event_fans_out(monkeypatch: pytest.MonkeyPatch) -> None:
    fanned: list[tuple[str, Any, dict[str, Any]]] = []
    monkeypatch.setattr(
        org,
        "fan_out",
        lambda name, event, settings, **kwargs: fanned.append((name, event, kwargs)) or {"fan": 1},
    )
    settings = _sweep_settings(monkeypatch, organization=True)
    handle = event_handler(
        "gpu_idle",
        {ScheduledEvent: lambda e: {"local": True}},
        sweep=OrgSweep("gpu", lambda item, now: None, settings, interval=GPU_INTERVAL),  # type: ignore[arg-type,return-value]
    )
    assert handle(SCHEDULE, CONTEXT) == {"fan": 1}
    # The work items are sized to the sweep's own schedule; without a probe there is no census.
    assert [(name, type(event), kwargs) for name, event, kwargs in fanned] == [
        ("gpu", ScheduledEvent, {"census": False, "interval": GPU_INTERVAL})
    ]


def test_outside_an_organization_the_scheduled_event_sweeps_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(org, "fan_out", lambda *a: pytest.fail("fanned out outside an organization"))
    settings = _sweep_settings(monkeypatch, organization=False)
    handle = event_handler(
        "gpu_idle",
        {ScheduledEvent: lambda e: {"local": e.id}},
        sweep=OrgSweep("gpu", lambda item, now: None, settings, interval=GPU_INTERVAL),  # type: ignore[arg-type,return-value]
    )
    assert handle(SCHEDULE, CONTEXT) == {"local": SCHEDULE["id"]}


def test_a_work_batch_runs_its_items_with_the_sweeps_one_item_function(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[dict[str, Any]] = []

    def run_items(event: Any, context: Any, **kwargs: Any) -> dict[str, Any]:
        ran.append({"event": event, "context": context, **kwargs})
        return {"batchItemFailures": []}

    def one(item: Any, now: Any) -> Any:
        return None

    monkeypatch.setattr(org, "run_items", run_items)
    monkeypatch.setattr("costguard.runtime.runtime", lambda: "the runtime")
    settings = _sweep_settings(monkeypatch, organization=True)
    handle = event_handler(
        "gpu_idle",
        {ScheduledEvent: lambda e: {}},
        sweep=OrgSweep("gpu", one, settings, interval=GPU_INTERVAL),
    )
    assert handle(WORK_BATCH, CONTEXT) == {"batchItemFailures": []}
    [call] = ran
    assert call["event"] == WORK_BATCH and call["context"] is CONTEXT
    assert call["sweep"] is one and call["function"] == "gpu_idle" and call["runtime"] == "the runtime"


def test_without_a_sweep_a_work_batch_is_an_event_like_any_other(failed_queue: str) -> None:
    handle = event_handler("spot_interruptions", {SpotInterruptionWarning: lambda e: {}})
    assert handle(WORK_BATCH, CONTEXT)["rejected"] is True


def test_a_sweep_needs_a_route_for_its_scheduled_event() -> None:
    settings = get_settings()
    with pytest.raises(ValueError, match="needs a route for its ScheduledEvent"):
        event_handler(
            "f",
            {SpotInterruptionWarning: lambda e: {}},
            sweep=OrgSweep("gpu", print, settings, interval=GPU_INTERVAL),  # type: ignore[arg-type]
        )


def test_a_converted_model_is_not_routed_as_well() -> None:
    with pytest.raises(ValueError, match="a converted model is not routed"):
        event_handler(
            "f",
            {AlarmNotification: lambda e: {}, AlarmStateChange: lambda e: {}},
            converts={AlarmNotification: AlarmNotification.as_state_change},
        )


def test_lambda_entry_names_the_handler_and_correlates_its_logs() -> None:
    @lambda_entry
    def body(event: dict[str, Any], context: Any) -> dict[str, Any]:
        logger.info("inside")
        return {"correlation_id": logger.get_correlation_id()}

    assert body.__name__ == "lambda_handler"
    assert body({"Records": [{"messageId": "sqs-1"}]}, CONTEXT) == {"correlation_id": "sqs-1"}
    assert body({"run": "audit-1"}, CONTEXT) == {"correlation_id": None}  # the last id does not stay


# --- what a cold import loads ---------------------------------------------------------------------------------

_LOADED = """
import importlib.util, json, pathlib, sys
target = sys.argv[1]
if target.endswith(".py"):
    sys.path.insert(0, str(pathlib.Path(target).parent))
    spec = importlib.util.spec_from_file_location("handler", target)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
else:
    __import__(target)
print(json.dumps(sorted(sys.modules)))
"""

# Loaded by the first client, the first OncePerEvent call, the first traced call: never by an import. Nor
# powertools' parser (every model it ships, for the one envelope events/envelope.py declares) or
# pydantic-settings (asyncio and its CLI, for one prefix: settings.py reads it).
DEFERRED = (
    "boto3",
    "botocore.session",
    "botocore.client",
    "aws_lambda_powertools.utilities.idempotency",
    "aws_lambda_powertools.utilities.parser",
    "aws_xray_sdk",
    "pydantic_settings",
)
# The functions that load slack_sdk at import: the notifier (its Block Kit messages). The worker of queued clicks
# loads it with its first click's Slack client, the audit with its summary's; the interactions endpoint never
# (interact/verify.py checks the Slack signature without it), nor the others.
SLACK_FUNCTIONS = {"NotifierFunction"}


def _loaded(target: str, env: dict[str, str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _LOADED, target], env=env, capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout))


def _environment() -> dict[str, str]:
    return {"PATH": "", "PYTHONPATH": str(ROOT / "shared"), "AWS_REGION": "us-east-1"}


@pytest.mark.parametrize("module", ["costguard.handler", "costguard.entry", "costguard.aws.clients"])
def test_the_shell_loads_no_client_library(module: str) -> None:
    loaded = _loaded(module, _environment())
    assert not [m for m in loaded if m.startswith(DEFERRED)]
    assert "costguard.flows.org" not in loaded and "aws_lambda_powertools.utilities.batch" not in loaded


FUNCTIONS = sorted(Template.load(ROOT / "template.yaml").functions().values(), key=lambda f: f.logical_id)


@pytest.mark.parametrize("function", FUNCTIONS, ids=[f.logical_id for f in FUNCTIONS])
def test_no_handler_builds_a_client_or_loads_boto3_at_import(function: Any) -> None:
    template = Template.load(ROOT / "template.yaml")
    env = _environment() | handler_environment(template, function.logical_id)
    loaded = _loaded(str(ROOT / function.module_path), env)
    deferred = sorted(m for m in loaded if m.startswith(DEFERRED))
    assert not deferred, (function.logical_id, deferred[:5])
    assert ("slack_sdk" in loaded) == (function.logical_id in SLACK_FUNCTIONS), function.logical_id


def test_every_app_builds_its_handler_with_the_shell() -> None:
    apps = sorted((ROOT / "functions").glob("*/app.py"))
    assert apps
    for app in apps:
        text = app.read_text()
        assert "from costguard.handler import" in text, app
        assert "inject_lambda_context" not in text and "capture_lambda_handler" not in text, app
        assert "PERMISSIONS = " in text and "settings = require(" in text, app
