"""The SageMaker sweep end to end on the demo world: schedule -> routing -> handler -> moto -> Slack sink."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from costguard.act.ledger_book import DynamoLedger
from costguard.aws import clients
from costguard.local.replay import ReplayResult, latest_event_time, replay
from costguard.local.sink import SlackSink
from costguard.local.stack import TABLE, LocalStack
from costguard.local.world import World
from costguard.model import MARK_TAG_KEY
from costguard.pricing import bundled_table
from tests.conftest import EVENTS, load_event

SWEEP = EVENTS / "schedule-sagemaker-sweep.json"
HUNG, BUSY_JOB = "bert-pretrain-hung", "vision-vit-train"
IDLE_NOTEBOOK, BUSY_NOTEBOOK = "dana-scratch", "li-finetune-lab"
IDLE_ENDPOINT, BUSY_ENDPOINT = "sentiment-canary", "search-rerank"
UNDERUSED_ENDPOINT = "faq-bot"  # 30 invocations an hour on an ml.g5.12xlarge, its four GPUs at 3%


def expected_hourly(instance_type: str, count: int) -> float | None:
    """What the bundled table says the resource costs per hour; None where it has no price."""
    price = bundled_table()["sagemaker"].get(instance_type)
    return round(price * count, 4) if price is not None else None


@pytest.fixture
def later_sweep(tmp_path: Path) -> Path:
    """The same schedule 20 minutes later: past the 15-minute grace period of the template's defaults."""
    event = load_event(SWEEP.name)
    event["id"] = "c0ffee00-0000-4000-8000-000000000302"
    event["time"] = "2026-11-20T12:20:00Z"
    path = tmp_path / "schedule-sagemaker-sweep-1220.json"
    path.write_text(json.dumps(event))
    return path


@pytest.fixture
def two_sweeps(later_sweep: Path) -> list[str | Path]:
    return [SWEEP, later_sweep]


@pytest.fixture
def remediating(
    world: World, sink: SlackSink, sleeps: list[float], two_sweeps: list[str | Path]
) -> Iterator[LocalStack]:
    with LocalStack(world, mode="remediate", sink=sink, until=latest_event_time(two_sweeps)) as running:
        yield running


@pytest.fixture
def notifying(
    world: World, sink: SlackSink, sleeps: list[float], two_sweeps: list[str | Path]
) -> Iterator[LocalStack]:
    with LocalStack(world, sink=sink, until=latest_event_time(two_sweeps)) as running:
        yield running


def by_resource(result: ReplayResult) -> dict[str, dict[str, Any]]:
    decisions = {d["resource_id"]: d for d in result.decisions}
    assert len(decisions) == len(result.decisions), "one decision per resource"
    return decisions


def training_job_status(name: str) -> str:
    return str(clients.sagemaker().describe_training_job(TrainingJobName=name)["TrainingJobStatus"])


def notebook_status(name: str) -> str:
    return str(
        clients.sagemaker().describe_notebook_instance(NotebookInstanceName=name)["NotebookInstanceStatus"]
    )


def tags_of(arn: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in clients.sagemaker().list_tags(ResourceArn=arn)["Tags"]}


def arn(kind: str, name: str) -> str:
    return f"arn:aws:sagemaker:us-east-1:123456789012:{kind}/{name}"


def test_sweep_reports_the_hung_job_the_idle_notebook_and_the_idle_endpoint(
    stack: LocalStack, world: World
) -> None:
    [result] = replay(stack, [SWEEP])
    assert result.ok, result.error
    assert result.function == "SageMakerIdleFunction"
    decisions = by_resource(result)
    assert {name: d["reason"] for name, d in decisions.items()} == {
        HUNG: "job_stalled",
        IDLE_NOTEBOOK: "notebook_idle",
        IDLE_ENDPOINT: "endpoint_idle",
        UNDERUSED_ENDPOINT: "endpoint_underused",
    }
    for busy in (BUSY_JOB, BUSY_NOTEBOOK, BUSY_ENDPOINT):
        assert busy not in decisions

    hung = next(j for j in world.training_jobs if j.name == HUNG)
    assert decisions[HUNG]["hourly_usd"] == expected_hourly(hung.instance_type, hung.instance_count)
    assert decisions[HUNG]["resource_kind"] == "training_job"
    assert (decisions[HUNG]["action"], decisions[HUNG]["dry_run"]) == ("mark", True)

    notebook = next(n for n in world.notebooks if n.name == IDLE_NOTEBOOK)
    assert decisions[IDLE_NOTEBOOK]["hourly_usd"] == expected_hourly(notebook.instance_type, 1)
    assert decisions[IDLE_NOTEBOOK]["action"] == "mark"

    idle_endpoint = next(e for e in world.endpoints if e.name == IDLE_ENDPOINT)
    assert decisions[IDLE_ENDPOINT]["action"] == "notify"  # never acted on
    assert decisions[IDLE_ENDPOINT]["hourly_usd"] == expected_hourly(
        idle_endpoint.instance_type, idle_endpoint.instance_count
    )

    titles = {m["blocks"][0]["text"]["text"] for m in result.slack}
    assert titles == {
        "costguard: Training job stalled",
        "costguard: Idle GPU notebook",
        "costguard: 2 findings on 2 endpoints",  # the two endpoints, one kind: one grouped message
    }


def test_sweep_reads_in_batches(stack: LocalStack) -> None:
    [result] = replay(stack, [SWEEP])
    assert result.ok, result.error
    calls = clients.calls
    # One GetMetricData for every per-minute GPU series and one for the endpoints' hourly sums.
    assert calls[("cloudwatch", "GetMetricData")] == 2
    assert calls[("sagemaker", "ListTrainingJobs")] == 1
    assert calls[("sagemaker", "ListNotebookInstances")] == 1
    assert calls[("sagemaker", "ListEndpoints")] == 1
    in_progress = sum(1 for j in stack.world.training_jobs if j.status == "InProgress")
    assert calls[("sagemaker", "DescribeTrainingJob")] == in_progress  # the in-progress jobs only
    assert calls[("sagemaker", "DescribeEndpoint")] == len(stack.world.endpoints)


def test_remediate_mode_marks_then_stops_the_job_and_the_notebook(
    remediating: LocalStack, two_sweeps: list[str | Path]
) -> None:
    first, second = replay(remediating, two_sweeps)
    assert first.ok and second.ok, (first.error, second.error)

    marked = by_resource(first)
    assert {(n, marked[n]["action"], marked[n]["dry_run"]) for n in (HUNG, IDLE_NOTEBOOK)} == {
        (HUNG, "mark", False),
        (IDLE_NOTEBOOK, "mark", False),
    }
    assert MARK_TAG_KEY in tags_of(arn("training-job", HUNG))
    assert MARK_TAG_KEY in tags_of(arn("notebook-instance", IDLE_NOTEBOOK))

    stopped = by_resource(second)
    assert stopped[HUNG]["action"] == "stop"
    assert stopped[IDLE_NOTEBOOK]["action"] == "stop"
    assert training_job_status(HUNG) == "Stopped"
    assert notebook_status(IDLE_NOTEBOOK) == "Stopped"
    assert ":stop_sign: Stopped." in json.dumps(second.slack)
    assert ":x:" not in json.dumps(second.slack)

    # Busy resources and the idle endpoint are untouched.
    assert training_job_status(BUSY_JOB) == "InProgress"
    assert notebook_status(BUSY_NOTEBOOK) == "InService"
    described = clients.sagemaker().describe_endpoint(EndpointName=IDLE_ENDPOINT)
    assert described["EndpointStatus"] == "InService"


def test_notify_mode_changes_nothing(notifying: LocalStack, two_sweeps: list[str | Path]) -> None:
    first, second = replay(notifying, two_sweeps)
    assert first.ok and second.ok, (first.error, second.error)
    assert all(d["dry_run"] for r in (first, second) for d in r.decisions)
    # Marked in the state table, not on the resource: its stop falls due as in remediate mode, and is not made.
    assert by_resource(first)[HUNG]["action"] == by_resource(first)[IDLE_NOTEBOOK]["action"] == "mark"
    assert by_resource(second)[HUNG]["action"] == by_resource(second)[IDLE_NOTEBOOK]["action"] == "stop"
    assert training_job_status(HUNG) == "InProgress"
    assert notebook_status(IDLE_NOTEBOOK) == "InService"
    assert MARK_TAG_KEY not in tags_of(arn("training-job", HUNG))
    assert MARK_TAG_KEY not in tags_of(arn("notebook-instance", IDLE_NOTEBOOK))


def test_gpu_notebook_without_metrics_is_reported_never_idle(
    world: World, sink: SlackSink, sleeps: list[float]
) -> None:
    # A SageMaker-only world (no EC2 instances) is seeded too.
    silent = [
        n.model_copy(update={"gpu_pattern": "none"}) for n in world.notebooks if n.name == IDLE_NOTEBOOK
    ]
    only_notebook = world.model_copy(
        update={"instances": [], "training_jobs": [], "endpoints": [], "notebooks": silent}
    )
    with LocalStack(only_notebook, mode="remediate", sink=sink) as stack:
        [result] = replay(stack, [SWEEP])
        assert result.ok, result.error
        [decision] = result.decisions
        assert (decision["resource_id"], decision["reason"], decision["action"]) == (
            IDLE_NOTEBOOK,
            "gpu_metrics_missing",
            "notify",
        )
        assert notebook_status(IDLE_NOTEBOOK) == "InService"
        assert "NotebookInstanceName" in json.dumps(result.slack)


@pytest.mark.xdist_group("demo")
def test_demo_shows_the_sagemaker_alerts(demo_output: str) -> None:
    out = demo_output
    # Told with the other findings of their batch: the notebook alone of its kind in the batch, a message of its
    # own; the stalled job a row of the batch's group of training jobs; the idle and the underused endpoint one
    # group message of endpoints (the terminal view wraps lines: compared with the frame and the wrapping taken out).
    shown = " ".join(out.replace("│", " ").split())
    assert "** costguard: Idle GPU notebook **" in shown
    assert "on 2 training jobs costing" in shown
    assert "· ml.p4d.24xlarge x 2 · $75.38/h · Training job stalled ·" in shown  # bert-pretrain-hung's row
    assert "on 2 endpoints costing" in shown
    assert "GPU endpoint serving a trickle" in shown and "GPU endpoint with no traffic" in shown


def test_a_trickle_on_an_oversized_gpu_endpoint_is_priced_per_1000_invocations(
    world: World, sink: SlackSink, sleeps: list[float]
) -> None:
    alone = world.model_copy(
        update={
            "training_jobs": [],
            "notebooks": [],
            "endpoints": [e for e in world.endpoints if e.name == UNDERUSED_ENDPOINT],
        }
    )
    with LocalStack(alone, sink=sink) as stack:
        [result] = replay(stack, [SWEEP])
    assert result.ok, result.error
    decision = by_resource(result)[UNDERUSED_ENDPOINT]
    assert (decision["reason"], decision["action"]) == ("endpoint_underused", "notify")  # never acted on
    price = bundled_table()["sagemaker"]["ml.g5.12xlarge"]
    assert decision["hourly_usd"] == price
    [message] = result.slack
    assert message["blocks"][0]["text"]["text"] == "costguard: GPU endpoint serving a trickle"
    text = json.dumps(message)
    # 24 hours at the ml.g5.12xlarge rate over 30 x 24 invocations.
    per_1000 = price * 24 / (30 * 24 / 1000)
    assert f"${per_1000:,.4f} per 1,000 invocations" in text
    # One A10G carries 3% x 4 GPUs with room, and 15% x 4 of 24 GB fits it: the cheapest g5 size.
    cheaper = bundled_table()["sagemaker"]["ml.g5.xlarge"]
    assert f"1 x ml.g5.xlarge (1 x A10G): ${cheaper:,.2f}/h" in text
    assert (
        "MinInstanceCount=0" not in text.split("Cheapest fit")[0]
    )  # traffic every hour: no scale-to-zero line


def test_a_notebook_started_again_after_its_stop_closes_its_ledger_entry_at_the_next_sweep(
    world: World, sink: SlackSink, sleeps: list[float], two_sweeps: list[str | Path], tmp_path: Path
) -> None:
    event = load_event(SWEEP.name) | {
        "id": "c0ffee00-0000-4000-8000-000000000303",
        "time": "2026-11-20T12:50:00Z",
    }
    third = tmp_path / "schedule-sagemaker-sweep-1250.json"
    third.write_text(json.dumps(event))
    with LocalStack(world, mode="remediate", sink=sink, until=latest_event_time([third])) as stack:
        assert all(r.ok for r in replay(stack, two_sweeps))
        ledger = DynamoLedger(TABLE)
        since, until = datetime(2026, 11, 20, tzinfo=UTC), datetime(2026, 11, 21, tzinfo=UTC)
        [entry] = [e for e in ledger.entries(since, until) if e.resource_id == IDLE_NOTEBOOK]
        assert entry.returned_at is None and entry.mode == "acted"
        clients.sagemaker().start_notebook_instance(NotebookInstanceName=IDLE_NOTEBOOK)  # its owner, at 12:4x
        [result] = replay(stack, [third])
        assert result.ok, result.error
        [back] = [e for e in ledger.entries(since, until) if e.resource_id == IDLE_NOTEBOOK]
        # Seen InService by the 12:50 sweep: back within the hour of its 12:20 stop, a near-miss, not a saving.
        assert back.returned_at == datetime(2026, 11, 20, 12, 50, tzinfo=UTC)
        assert back.near_miss and back.saved_usd(until) == 0.0
        # The job it stopped never comes back: its entry stays as it was.
        [job] = [e for e in ledger.entries(since, until) if e.resource_id == HUNG]
        assert job.returned_at is None
