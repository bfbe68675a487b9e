"""ReasonModes and RemediateScope on the embedded stack: one reason, then every team but one, remediated, through
the sweeps, a budget escalation and a Slack Stop now click; what is left out is reported, not marked."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard.local.interactions import offered_elements
from costguard.local.replay import ReplayResult, replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.model import MARK_TAG_KEY
from costguard.notify.values import action_value
from tests.conftest import load_event
from tests.integration import test_gpu_flow as gpu
from tests.integration import test_interactions_flow as clicks
from tests.integration import test_sagemaker_flow as sagemaker
from tests.integration.test_budgets_flow import ACTUAL_100, FOLLOW_UP_AT

RESEARCH_P4D = "i-0a1f00000000000a1"  # idle, team ml-research (worlds/demo.yaml)
FORECASTING_G6E = "i-0a1f00000000000d1"  # idle, team forecasting
KEY = "123456789012/us-east-1/ec2_instance/"
AT_1220 = datetime(2026, 11, 20, 12, 20, tzinfo=UTC)
OUTSIDE = "notify only: team=ml-research is outside RemediateScope (team!=ml-research)"
SCOPE = {"COSTGUARD_REMEDIATE_SCOPE": "team!=ml-research"}


def sagemaker_sweep_at_1220(directory: Path) -> Path:
    event = load_event(sagemaker.SWEEP.name)
    event |= {"id": "c0ffee00-0000-4000-8000-000000000392", "time": "2026-11-20T12:20:00Z"}
    path = directory / "schedule-sagemaker-sweep-1220.json"
    path.write_text(json.dumps(event))
    return path


def of(results: list[ReplayResult], resource_id: str) -> list[dict[str, Any]]:
    return [d for r in results for d in r.decisions if d["resource_id"] == resource_id]


BUSY_AGAIN = "i-0a1f00000000000a9"  # nlp-g6-queued-eval: idle until 12:05, working after


def test_gpu_idle_in_remediate_with_the_rest_in_notify_stops_only_idle_instances(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    overrides = {"COSTGUARD_REASON_MODES": "gpu_idle=remediate"}
    events: list[str | Path] = [
        gpu.SWEEP,
        sagemaker.SWEEP,
        gpu.SWEEP_LATER,
        sagemaker_sweep_at_1220(tmp_path),
    ]
    with LocalStack(world, sink=sink, mode="notify", overrides=overrides, until=AT_1220) as stack:
        results = replay(stack, events)
        assert all(r.ok for r in results), [r.error for r in results]
        # The idle instances: marked at 12:00, stopped at 12:20, for real.
        for instance in (RESEARCH_P4D, FORECASTING_G6E):
            assert [(d["action"], d["dry_run"]) for d in of(results, instance)] == [
                ("mark", False),
                ("stop", False),
            ]
            assert gpu.state_of(instance) in ("stopping", "stopped")
        # A stalled job and an idle notebook: decided as notify mode decides them, saying why, and left running.
        for name, reason in ((sagemaker.HUNG, "job_stalled"), (sagemaker.IDLE_NOTEBOOK, "notebook_idle")):
            decided = of(results, name)
            assert [(d["action"], d["dry_run"]) for d in decided] == [("mark", True), ("stop", True)]
            assert all(d["note"].startswith(f"notify only: {reason} follows Mode (notify)") for d in decided)
        assert sagemaker.training_job_status(sagemaker.HUNG) == "InProgress"
        assert sagemaker.notebook_status(sagemaker.IDLE_NOTEBOOK) == "InService"
        assert MARK_TAG_KEY not in sagemaker.tags_of(
            sagemaker.arn("notebook-instance", sagemaker.IDLE_NOTEBOOK)
        )
        assert MARK_TAG_KEY not in sagemaker.tags_of(sagemaker.arn("training-job", sagemaker.HUNG))
        # Nothing else is marked or stopped for real: the instance idle at 12:00 and working from 12:05 is marked,
        # then unmarked at 12:20, never stopped.
        live = {
            (d["resource_id"], d["action"])
            for r in results
            for d in r.decisions
            if d["action"] in ("mark", "stop", "unmark") and not d["dry_run"]
        }
        idle = {(i, action) for i in (RESEARCH_P4D, FORECASTING_G6E) for action in ("mark", "stop")}
        assert live == idle | {(BUSY_AGAIN, "mark"), (BUSY_AGAIN, "unmark")}


def test_a_team_outside_the_scope_is_reported_not_marked_in_the_sweeps(
    world: World, sink: SlackSink, sleeps: list[float]
) -> None:
    with LocalStack(world, sink=sink, mode="remediate", overrides=SCOPE, until=AT_1220) as stack:
        first, later = replay(stack, [gpu.SWEEP, gpu.SWEEP_LATER])
        assert first.ok and later.ok, (first.error, later.error)
        assert [(d["action"], d["dry_run"]) for d in of([first, later], FORECASTING_G6E)] == [
            ("mark", False),
            ("stop", False),
        ]
        research = of([first, later], RESEARCH_P4D)
        assert [(d["action"], d["dry_run"]) for d in research] == [("mark", True), ("stop", True)]
        assert all(d["note"].startswith(OUTSIDE) for d in research)
        assert gpu.state_of(RESEARCH_P4D) == "running" and MARK_TAG_KEY not in gpu.tags_of(RESEARCH_P4D)
        assert gpu.state_of(FORECASTING_G6E) in ("stopping", "stopped")
        # Its message says why it is not acted on.
        told = json.dumps([m for m in first.slack if "research-p4d-forgotten" in json.dumps(m)])
        assert f"Would mark for stop ({OUTSIDE}); stop due at 2026-11-20 12:15 UTC" in told


@pytest.mark.parametrize(("scope", "marked"), [("team!=ml-research", False), ("team!=vision", True)])
def test_a_budget_escalation_marks_only_what_is_in_the_scope(
    world: World, sink: SlackSink, sleeps: list[float], scope: str, marked: bool
) -> None:
    overrides = {"COSTGUARD_REMEDIATE_SCOPE": scope}
    with LocalStack(world, sink=sink, mode="remediate", overrides=overrides, until=FOLLOW_UP_AT) as stack:
        [result] = replay(stack, [ACTUAL_100])
        assert result.ok, result.error
        [decision] = [d for d in result.decisions if d["resource_id"] == RESEARCH_P4D]
        assert (decision["action"], decision["dry_run"]) == ("mark", not marked)
        assert (MARK_TAG_KEY in gpu.tags_of(RESEARCH_P4D)) is marked
        assert gpu.state_of(RESEARCH_P4D) == "running"
        if not marked:
            assert decision["note"].startswith(OUTSIDE)
            # The breach's one message lists it with why it is only a dry run.
            line = "research-p4d-forgotten (p4d.24xlarge): would be marked for stop, stop due at 2026-11-20 12:22 UTC"
            assert f"{line} ({OUTSIDE})" in json.dumps(result.slack)


def test_a_stop_now_click_leaves_a_team_outside_the_scope_running_and_unmarked(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    with LocalStack(
        world,
        sink=sink,
        mode="remediate",
        slack_app=True,
        overrides=SCOPE,
        until=world.now + timedelta(hours=1),
    ) as stack:
        now = world.now
        clicks._sweep(stack, tmp_path, now)
        stops = {o.value for o in offered_elements(sink) if o.action_id == "costguard:stop"}
        assert action_value("gpu_idle", KEY + FORECASTING_G6E) in stops
        assert action_value("gpu_idle", KEY + RESEARCH_P4D) not in stops  # its card has no Stop now
        refused = clicks._click(
            stack,
            tmp_path,
            "costguard:stop",
            action_value("gpu_idle", KEY + RESEARCH_P4D),
            now + timedelta(minutes=1),
        )
        [reply] = refused.output["responses"]
        assert (
            reply["response_type"] == "ephemeral"
            and "not a choice costguard offered" in reply["text"].lower()
        )
        state, tags = clicks._instance(RESEARCH_P4D)
        assert state == "running" and MARK_TAG_KEY not in tags
        stopped = clicks._click(
            stack,
            tmp_path,
            "costguard:stop",
            action_value("gpu_idle", KEY + FORECASTING_G6E),
            now + timedelta(minutes=2),
            name="click-in-scope",
        )
        assert stopped.ok, stopped.error
        assert clicks._instance(FORECASTING_G6E)[0] in ("stopping", "stopped")
