"""`costguard replay` on what real accounts send: other topics, sloppy envelopes, far-off times, failing handlers."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from costguard.cli import main
from costguard.local.stack import SEED_AHEAD
from costguard.local.world import load_world
from tests.conftest import DEMO_WORLD, EVENTS, FIXTURES

FINOPS = str(FIXTURES / "sns-budget-stack-finops.json")
USER_TOPIC = str(FIXTURES / "sns-budget-user-topic-bad-timestamp.json")
ANOMALY = str(FIXTURES / "sns-cost-anomaly-user-topic.json")
ALARM = str(FIXTURES / "sns-cloudwatch-alarm-lambdago.json")
GPU_ALARM = str(FIXTURES / "sns-gpu-idle-alarm.json")
HELLO = str(FIXTURES / "sns-hello-powertools.json")
FAR_FUTURE = str(FIXTURES / "sagemaker-training-job-failed-2099.json")
FAILED = str(EVENTS / "sagemaker-training-job-failed.json")
ANOMALY_EVENTBRIDGE = str(EVENTS / "cost-anomaly-detected.json")


def _lines(out: str) -> dict[str, dict[str, Any]]:
    return {(line := json.loads(text))["event"]: line for text in out.strip().splitlines()}


def test_sns_from_other_topics_is_routed_by_subscription_or_by_content(
    capsys: pytest.CaptureFixture[str], sleeps: list[float]
) -> None:
    code = main(["replay", FINOPS, USER_TOPIC, ANOMALY, ALARM, GPU_ALARM, HELLO, "--json"])
    out, err = capsys.readouterr()
    lines = _lines(out)
    assert code == 1  # AWS's sample alarm (placeholders for its region) and the unknown message
    # A budget alert from the cost-alerts topic of a stack named finops: the template's subscription.
    assert (lines[FINOPS]["function"], lines[FINOPS]["route"]) == (
        "BudgetsFunction",
        "routed by subscription",
    )
    assert "error" not in lines[FINOPS]
    assert {d["reason"] for d in lines[FINOPS]["decisions"]} == {"budget_breach"}
    # The user's own budget topic, its Timestamp malformed ("12:07:00 .000 Z"): by content, and processed.
    assert lines[USER_TOPIC]["route"] == "routed by content: budgets text"
    assert "error" not in lines[USER_TOPIC]
    assert lines[USER_TOPIC]["decisions"]
    # A Cost Anomaly alert on the user's topic: the budgets function's anomaly path.
    assert (lines[ANOMALY]["function"], lines[ANOMALY]["route"]) == (
        "BudgetsFunction",
        "routed by content: cost anomaly",
    )
    assert [d["reason"] for d in lines[ANOMALY]["decisions"]] == ["cost_anomaly"]
    # A CloudWatch alarm action over SNS goes to the function that handles alarms and is judged like the
    # EventBridge state change: the idle p4d's alarm gives its gpu_idle finding.
    assert (lines[GPU_ALARM]["function"], lines[GPU_ALARM]["route"]) == (
        "GpuIdleFunction",
        "routed by content: cloudwatch alarm",
    )
    assert "error" not in lines[GPU_ALARM]
    assert [(f["reason"], f["resource_id"]) for f in lines[GPU_ALARM]["findings"]] == [
        ("gpu_idle", "i-0a1f00000000000a1")
    ]
    # AWS's own sample names its region "REGION": rejected, saying so, and kept.
    assert lines[ALARM]["function"] == "GpuIdleFunction"
    assert "region 'REGION' is not an AWS region" in lines[ALARM]["error"]
    # Neither a subscription nor a content it knows: named, with the way to route it anyway.
    assert lines[HELLO]["function"] is None
    assert "'sns-lambda'" in lines[HELLO]["error"] and "--function NAME" in lines[HELLO]["error"]
    assert "sns-hello-powertools.json" in err


def test_function_option_forces_the_route(capsys: pytest.CaptureFixture[str], sleeps: list[float]) -> None:
    assert main(["replay", HELLO, "--function", "budgets", "--json"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert (line["function"], line["route"]) == ("BudgetsFunction", "routed by --function")
    # Over SNS, a message the budgets function cannot read is forwarded as received, not dropped.
    [decision] = line["decisions"]
    assert decision["reason"] == "budget_breach" and decision["action"] == "notify"


SMALL_WORLD = """
account: "123456789012"
region: us-east-1
now: "2026-11-20T12:00:00Z"
instances:
  - {id: i-0a1f00000000000a1, type: p4d.24xlarge, launched: "2026-11-18T09:00:00Z", gpu_metrics: {pattern: idle}}
training_jobs:
  - {name: llama-ft-nightly-2026-11-20-06-30-00, instance_type: ml.p3.2xlarge, instance_count: 2, status: Failed,
     started: "2026-11-20T06:32:00Z"}
"""


def test_an_event_far_in_the_future_does_not_seed_metrics_up_to_its_time(
    capsys: pytest.CaptureFixture[str], sleeps: list[float], tmp_path: Path
) -> None:
    (tmp_path / "world.yaml").write_text(SMALL_WORLD)
    world = load_world(tmp_path / "world.yaml")
    # Seconds, not the decades of per-minute GPU points up to 2099.
    assert main(["replay", FAR_FUTURE, "--json", "--world", str(tmp_path / "world.yaml")]) == 0
    out, err = capsys.readouterr()
    line = json.loads(out)
    horizon = world.now + SEED_AHEAD
    assert f"seeded only up to {horizon:%Y-%m-%dT%H:%M:%SZ}" in err
    [note] = line["notes"]
    assert note.startswith("event time 2099-01-01T00:00:00Z is past the metric series seeded")
    assert [d["reason"] for d in line["decisions"]] == ["training_job_failed"]


def test_the_stack_caps_what_it_seeds(sleeps: list[float]) -> None:
    from costguard.local.stack import LocalStack

    world = load_world(DEMO_WORLD).model_copy(update={"instances": [], "training_jobs": [], "notebooks": []})
    with LocalStack(world, until=datetime(2099, 1, 1, tzinfo=UTC)) as stack:
        assert stack.until == world.now + SEED_AHEAD
        assert stack.requested_until == datetime(2099, 1, 1, tzinfo=UTC)


def test_a_handler_that_raises_shows_the_events_before_it_and_the_error(
    capsys: pytest.CaptureFixture[str], sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    import costguard.flows.training_jobs as training_jobs

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("the training-jobs flow broke")

    # Loaded into the function's module when the local stack imports functions/training_jobs/app.py.
    monkeypatch.setattr(training_jobs, "handle_training_job_event", broken)
    assert main(["replay", ANOMALY_EVENTBRIDGE, FAILED, USER_TOPIC]) == 1
    out, err = capsys.readouterr()
    # The event before the failure is printed in full, then the failure with its file, then the next event.
    before, failure, after = out.index(ANOMALY_EVENTBRIDGE), out.index(f"=== {FAILED}"), out.index(USER_TOPIC)
    assert before < failure < after
    assert "function: BudgetsFunction (routed by rule)" in out[before:failure]
    assert "decision: notify (dry run)" in out[before:failure]
    assert "function: TrainingJobsFunction (routed by rule)" in out[failure:after]
    assert "function: BudgetsFunction (routed by content: budgets text)" in out[after:]
    # The error is said once, on stderr (not again on stdout).
    assert "the training-jobs flow broke" not in out
    assert err.count("the training-jobs flow broke") == 1
    assert (
        f"costguard: {FAILED}: TrainingJobsFunction raised RuntimeError: the training-jobs flow broke" in err
    )
    assert "(--verbose for the traceback)" in err
    assert "Traceback" not in err  # the traceback only with --verbose


def test_a_handler_that_raises_prints_its_traceback_with_verbose(
    capsys: pytest.CaptureFixture[str], sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    import costguard.flows.training_jobs as training_jobs

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("the training-jobs flow broke")

    monkeypatch.setattr(training_jobs, "handle_training_job_event", broken)
    assert main(["replay", FAILED, "--json", "--verbose"]) == 1
    out, err = capsys.readouterr()
    line = json.loads(out)
    assert line["function"] == "TrainingJobsFunction"
    assert "RuntimeError: the training-jobs flow broke" in line["error"]
    assert "Traceback (most recent call last)" in err and "broken" in err


def _with_message(path: str, message: dict[str, Any], to: Path) -> str:
    """The SNS delivery at ``path`` carrying ``message`` instead, written to ``to``."""
    event = json.loads(Path(path).read_text())
    event["Records"][0]["Sns"]["Message"] = json.dumps(message)
    to.write_text(json.dumps(event))
    return str(to)


def test_an_anomaly_naming_regions_that_are_not_region_codes_is_delivered_naming_them(
    capsys: pytest.CaptureFixture[str], sleeps: list[float], tmp_path: Path
) -> None:
    anomaly = json.loads(json.loads(Path(ANOMALY).read_text())["Records"][0]["Sns"]["Message"])
    ec2 = "Amazon Elastic Compute Cloud - Compute"
    anomaly["rootCauses"] = [
        {"service": ec2, "region": "global", "linkedAccount": "123456789012"},
        {"service": "Amazon SageMaker", "region": "NoRegion", "linkedAccount": "123456789012"},
        {"service": ec2, "region": "eu-west-1 ", "linkedAccount": "123456789012"},
    ]
    path = _with_message(ANOMALY, anomaly, tmp_path / "anomaly-odd-regions.json")
    assert main(["replay", path, "--json"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert "error" not in line
    [decision] = line["decisions"]
    assert (decision["reason"], decision["action"]) == ("cost_anomaly", "notify")
    [finding] = line["findings"]
    assert finding["evidence"]["regions_not_read"] == ["global", "NoRegion"]
    assert "Regions not read (not a region code): global, NoRegion." in finding["summary"]
    assert f"{ec2}, eu-west-1, account" in finding["summary"]


def test_a_function_url_request_whose_body_cannot_be_read_is_rejected_and_the_run_goes_on(
    capsys: pytest.CaptureFixture[str], sleeps: list[float], tmp_path: Path
) -> None:
    keep = EVENTS / "slack-interaction-keep.json"
    request = json.loads(keep.read_text())
    bad = {
        "not-base64": (
            {**request, "body": "%%% not base64 %%%", "isBase64Encoded": True},
            "not valid base64",
        ),
        "number": ({**request, "body": 12345}, "not text but a JSON number"),
        "object": ({**request, "body": {"payload": "{}"}}, "not text but a JSON object"),
    }
    paths = []
    for name, (event, _) in bad.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(event))
        paths += [str(tmp_path / f"{name}.json"), FAILED]
    assert main(["replay", str(keep), *paths, "--json"]) == 1
    out, err = capsys.readouterr()
    lines = [json.loads(text) for text in out.strip().splitlines()]
    assert [line["event"] for line in lines] == [str(keep), *paths]  # every event ran, in order
    for line in lines:
        name = Path(line["event"]).stem
        if name in bad:
            assert line["function"] == "InteractionsFunction"
            assert "rejected by InteractionsFunction (HTTP 4" in line["error"], line
            assert bad[name][1] in line["error"]
            assert f"costguard: {line['event']}: rejected" in err
        else:
            assert "error" not in line, line
    assert [[d["reason"] for d in line["decisions"]] for line in lines if line["event"] == FAILED] == [
        ["training_job_failed"]
    ] * 3
