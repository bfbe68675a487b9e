"""The `costguard` command as a user runs it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from costguard import cli
from costguard.cli import main
from tests.conftest import EVENTS, FIXTURES

FAILED = str(EVENTS / "sagemaker-training-job-failed.json")


def test_replay_json_prints_one_object_per_event(
    capsys: pytest.CaptureFixture[str], sleeps: list[float]
) -> None:
    assert main(["replay", FAILED, FAILED, "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert set(first) >= {"event", "function", "findings", "decisions", "slack"}
    [decision] = first["decisions"]
    assert {"action", "resource_id", "reason", "dry_run", "hourly_usd"} <= set(decision)
    assert decision["reason"] == "training_job_failed"
    assert len(first["slack"]) + len(second["slack"]) == 1


@pytest.mark.parametrize("name", ["not-json.json", "sagemaker-training-job-failed-bad-types.json"])
def test_replay_of_a_broken_event_exits_non_zero_naming_the_problem(
    name: str, capsys: pytest.CaptureFixture[str], sleeps: list[float]
) -> None:
    assert main(["replay", str(FIXTURES / name)]) == 1
    err = capsys.readouterr().err
    assert name in err
    assert ("bad JSON" in err) or ("InstanceCount" in err)


def test_replay_with_a_bad_world_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    world = tmp_path / "world.yaml"
    world.write_text(
        "now: 2026-11-20T12:00:00Z\ninstances:\n  - id: not-an-instance-id\n    type: p5.48xlarge\n"
    )
    assert main(["replay", FAILED, "--world", str(world)]) == 2
    assert "instances.0.id" in capsys.readouterr().err


@pytest.mark.xdist_group("demo")
def test_demo_shows_the_training_job_alert(demo_output: str) -> None:
    out = demo_output
    assert "** costguard: Training job failed **" in out
    assert "Summary:" in out


# The demo's headline, worked out by hand from the sample events and the world (replayed in the order they
# arrive, each at its own time), each resource once at its latest figure. Budgets' month-to-date spend, anomalies' impact, the llama failure loop (its jobs are counted one by
# one) and the daily digest are context, never added.
SPENT_BY_HAND = {
    "8f2d7c1e-3b5a-4c9d-a0e1-6b7f2d9c4e31": 3.17,  # Batch job: its failed attempts' run time x g5 price
    "cr-0a1f0000000000c04": 110.08,  # the idle Capacity Block at the 12:00 sweep: two hours at $55.04/h
    "i-0a1f00000000000b1": 25.52,  # spot interruption at 11:58: the work lost since launch
    "llama-ft-nightly-2026-11-20-03-00-00": 30.98,
    "llama-ft-nightly-2026-11-20-05-00-00": 32.90,
    "llama-ft-nightly-2026-11-20-06-30-00": 38.25,
    "bert-pretrain-multinode-2026-11-20-03-00-00": 464.82,  # 22,200 s x 2 x $37.688/h (ml.p4d.24xlarge)
    "resnet-bench-2026-11-20-10-00-00": 0.87,
    "gpt-eval-sweep-2026-11-20-02-00-00": 168.30,  # at its latest reading; the warning and earlier ceilings included
    # warned at 12:00 ($7.04 of its $8), over its ceiling by the last reading: 14.5 h x 2 x $1.408/h (ml.g5.xlarge)
    "vit-eval-2026-11-20-09-30-00": 40.83,
    "cr-0a1f0000000000c01": 1053.98,  # the idle ODCR's unused instances over the window
    "cr-0a1f0000000000c05": 20.99,
    "support-bot-ft-pt": 492.00,  # idle Provisioned Throughput: 24 h x 1 model unit x the world's $20.50
    "claude-summarize-pt": 3024.00,  # idle, committed: 24 h x 2 model units x the world's $63.00
}


@pytest.mark.xdist_group("demo")
def test_demo_headline_counts_each_resource_once(demo_output: str) -> None:
    [line] = [line for line in demo_output.splitlines() if "already spent by the" in line]
    spent = float(line.split("$", 1)[1].split(" ", 1)[0].replace(",", ""))
    assert spent == round(sum(SPENT_BY_HAND.values()), 2) == 5506.69
    assert f"by the {len(SPENT_BY_HAND)} flagged resources" in line
    context = demo_output.split("Not added to those", 1)[1]
    assert "budget_breach ml-research-gpu/ACTUAL>5000: $5,120.40" in context
    assert "job_failure_loop llama-ft-nightly" in context


@pytest.mark.xdist_group("demo")
def test_demo_prints_each_slack_message_under_the_events_it_came_from(demo_output: str) -> None:
    """The batching window posts when a later event arrives: its messages are printed under a line naming the
    events whose notices they carry, not under that later event. What skips the window (a stop made, a budget
    breached) is told as its own event runs, printed under that event and said to be told at once."""
    replay = demo_output.split("\nSummary:", 1)[0]
    sections = replay.split("\n=== ")[1:]
    told = [s for s in sections if "┌─ Slack" in s]
    at_once = [s for s in told if not s.startswith("Slack:")]
    assert told and all(s.startswith("Slack: the notifier's batch (") for s in told if s not in at_once)
    for section in at_once:  # the event's own messages, after the line saying they skipped the window
        assert section.index(cli.AT_ONCE) < section.index("┌─ Slack"), section.splitlines()[0]
        assert "decision: stop" in section or "budget" in section.splitlines()[0], section.splitlines()[0]
    assert any("budget" in s.splitlines()[0] for s in at_once)

    def heading_of(shown: str) -> str:
        [section] = [s for s in told if shown in s.split("\n", 1)[1]][:1]
        return section.splitlines()[0]

    # llama's 03:00 failure is told when the p4d failure arrives, and printed under its own event.
    closed_by, _, source = heading_of("llama-ft-nightly-2026-11-20-03-00-00").partition(" from ")
    assert source.endswith("] sagemaker-training-job-failed-llama-0300.json"), source
    assert closed_by.endswith("sagemaker-training-job-failed-p4d.json arrived) told 1 message(s)"), closed_by
    _, _, source = heading_of("costguard-gpu-idle-i-0a1f00000000000b9").partition(" from ")
    assert source.endswith("] cloudwatch-alarm-gpu-idle-instance-gone.json"), source
    assert "(at the end of the replay)" in told[-1].splitlines()[0]


@pytest.mark.xdist_group("demo")
def test_demo_shows_progress_and_names_its_report(demo_brief: str, demo_output: str) -> None:
    lines = demo_brief.splitlines()
    assert lines[0].startswith("costguard demo: account")  # no stray log line first
    assert any(line.startswith("[1/") for line in lines)  # each event as it runs
    assert any(
        line.startswith("=== [1/") for line in demo_output.splitlines()
    )  # and in full in the transcript
    [opened] = [line for line in lines if line.startswith("Open the audit report in a browser: file://")]
    assert opened.endswith("/audit/report.html")
    assert lines[-1].startswith("Every event, finding, decision and Slack message in full: ")
    assert lines[-1].split(": ", 1)[1].split(" (")[0].endswith("transcript.txt")


@pytest.mark.xdist_group("demo")
def test_the_demo_tells_a_short_story_by_default(demo_brief: str) -> None:
    """Issue 41: a newcomer can read it: under 400 lines; each Slack message by its title in words (never a
    reason code, never "Findings (N)"); what would be stopped, by name; one time format."""
    from costguard.model import Reason

    lines = demo_brief.splitlines()
    assert len(lines) < 400, len(lines)
    titles = [line.split("Slack: ", 1)[1] for line in lines if "Slack: " in line]
    titles += [line.split("Slack, at once: ", 1)[1] for line in lines if "Slack, at once: " in line]
    assert any("Slack, at once: " in line for line in lines)  # the budget breaches, told as they arrive
    titles += [
        t
        for line in lines
        if "Slack, after the batching window: " in line
        for t in line.split("Slack, after the batching window: ", 1)[1].split("; ")
    ]
    assert titles
    codes = {r.value for r in Reason}
    for title in titles:
        assert not any(code in title.split() or f"{code}:" in title for code in codes), title
        assert not re.search(r"\bFindings \(\d+\)", title), title
    assert not any("Findings (" in line for line in lines)
    [stopping] = [line for line in lines if line.startswith("Would stop (in remediate mode): ")]
    assert "$" in stopping and "/h)" in stopping
    assert "The world holds " in demo_brief
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", demo_brief)  # times as ... UTC
