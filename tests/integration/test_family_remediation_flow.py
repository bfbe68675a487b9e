"""A job family is not a weapon, end to end in remediate mode on the local stack (moto).

- Failures of ``resnet-18``, ``resnet-34`` and ``resnet-50`` make a loop of the family guessed from their names,
  ``resnet``; another team's ``resnet-152`` strips to the same name. Before, remediate mode marked (then
  stopped) it, busy or not. A family guessed from names is now reported only, and the alert says why.
- A tagged family (``costguard:family``) marks then stops only its own in-progress jobs known to be idle on
  their GPUs; a busy one, and one with no GPU data, are left running with the reason in the message.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from costguard.aws import clients
from costguard.detect.job_families import family_of
from costguard.local.replay import ReplayResult, replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import TrainingJob, World
from tests.conftest import EVENTS, load_event

TEMPLATE = EVENTS / "sagemaker-training-job-failed-resnet.json"
MARK = "costguard:marked-at"
FAMILY = "costguard:family"


def failed(
    tmp_path: Path, name: str, tags: dict[str, str], n: int, minutes_after_now: int | None = None
) -> Path:
    """A Failed state change of job ``name``; by default at the template's time (before the world's now)."""
    event: dict[str, Any] = load_event(TEMPLATE.name)
    arn = f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}"
    event["id"] = f"{event['id'][:-4]}{n:04d}"
    event["resources"] = [arn]
    event["detail"] |= {"TrainingJobName": name, "TrainingJobArn": arn, "Tags": tags}
    if minutes_after_now is not None:
        event["time"] = f"2026-11-20T12:{minutes_after_now:02d}:00Z"
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(event))
    return path


def job(name: str, pattern: str, tags: dict[str, str], world: World) -> TrainingJob:
    return TrainingJob(
        name=name,
        instance_type="ml.g5.xlarge",  # one GPU a host
        status="InProgress",
        started=world.now - timedelta(hours=2),
        tags=tags,
        gpu_pattern=pattern,  # type: ignore[arg-type]
    )


def with_jobs(world: World, *jobs: TrainingJob) -> World:
    return world.model_copy(update={"training_jobs": [*world.training_jobs, *jobs]})


def described(name: str) -> tuple[str, dict[str, str]]:
    sagemaker = clients.sagemaker()
    found = sagemaker.describe_training_job(TrainingJobName=name)
    tags = {t["Key"]: t["Value"] for t in sagemaker.list_tags(ResourceArn=found["TrainingJobArn"])["Tags"]}
    return str(found["TrainingJobStatus"]), tags


def loop_decisions(results: list[ReplayResult]) -> list[dict[str, Any]]:
    return [d for r in results for d in r.decisions if d["reason"] == "job_failure_loop"]


def test_a_family_guessed_from_names_never_stops_another_teams_job(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    # The reproduction: three model sizes and another team's model all strip to "resnet".
    assert {family_of(n) for n in ("resnet-18", "resnet-34", "resnet-50", "resnet-152")} == {"resnet"}
    theirs = {"team": "perception"}
    grown = with_jobs(
        world,
        job("resnet-152", "busy", theirs, world),
        job("resnet-101", "idle", theirs, world),  # idle does not matter: a guessed family is never acted on
    )
    events = [
        failed(tmp_path, f"resnet-{size}", {"team": "vision"}, n) for n, size in enumerate((18, 34, 50))
    ]
    with LocalStack(grown, mode="remediate", sink=sink) as stack:
        results = replay(stack, events)
        calls = dict(clients.calls)
        after = {name: described(name) for name in ("resnet-152", "resnet-101")}
    assert all(r.ok for r in results), [r.error for r in results]
    [loop] = loop_decisions(results)
    assert (loop["resource_id"], loop["action"], loop["dry_run"]) == ("resnet", "notify", False)
    touched = [d for r in results for d in r.decisions if d["resource_id"] in ("resnet-152", "resnet-101")]
    assert touched == []
    for status, tags in after.values():
        assert status == "InProgress" and MARK not in tags
    # Nothing was even looked up to act on: no walk over the in-progress jobs' tags, no GPU read.
    assert calls.get(("sagemaker", "ListTags"), 0) == 0
    assert calls.get(("cloudwatch", "GetMetricData"), 0) == 0
    [message] = [m for m in stack.sink.messages if "Training job failing in a loop" in m["text"]]
    text = json.dumps(message)
    assert "Nothing is stopped" in text and "guessed from job names" in text and FAMILY in text


def test_a_tagged_family_marks_then_stops_only_its_idle_jobs(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    ours = {FAMILY: "detr-sweep", "team": "vision"}
    grown = with_jobs(
        world,
        job("detr-sweep-idle", "idle", ours, world),
        job("detr-sweep-busy", "busy", ours, world),
        job("detr-sweep-dark", "none", ours, world),  # publishes no GPUUtilization
        job("detr-sweep-7", "idle", {"team": "vision"}, world),  # its name strips to the family, no tag
        job("other-sweep-idle", "idle", {FAMILY: "other-sweep"}, world),
    )
    first = [failed(tmp_path, f"detr-sweep-fail-{n}", ours, n) for n in (1, 2, 3)]
    # A fourth failure 20 minutes on, past the 15-minute grace period.
    fourth = failed(tmp_path, "detr-sweep-fail-4", ours, 4, minutes_after_now=20)
    with LocalStack(grown, mode="remediate", sink=sink, until=world.now + timedelta(minutes=30)) as stack:
        marked = replay(stack, first)
        marked_state = {n: described(n) for n in ("detr-sweep-idle", "detr-sweep-busy", "detr-sweep-dark")}
        stopped = replay(stack, [fourth])
        final = {
            n: described(n)
            for n in (
                "detr-sweep-idle",
                "detr-sweep-busy",
                "detr-sweep-dark",
                "detr-sweep-7",
                "other-sweep-idle",
            )
        }
    assert all(r.ok for r in [*marked, *stopped]), [r.error for r in [*marked, *stopped]]

    def by_job(results: list[ReplayResult]) -> dict[str, dict[str, Any]]:
        return {d["resource_id"]: d for d in loop_decisions(results) if d["resource_kind"] == "training_job"}

    at_loop = by_job(marked)
    assert set(at_loop) == {"detr-sweep-idle", "detr-sweep-busy", "detr-sweep-dark"}
    assert (at_loop["detr-sweep-idle"]["action"], at_loop["detr-sweep-idle"]["dry_run"]) == ("mark", False)
    assert at_loop["detr-sweep-busy"]["action"] == "notify"
    assert "busy on its GPUs" in at_loop["detr-sweep-busy"]["note"]
    assert at_loop["detr-sweep-dark"]["action"] == "notify"
    assert "GPU use is unknown" in at_loop["detr-sweep-dark"]["note"]
    assert MARK in marked_state["detr-sweep-idle"][1]
    assert MARK not in marked_state["detr-sweep-busy"][1] and MARK not in marked_state["detr-sweep-dark"][1]

    after_grace = by_job(stopped)
    assert after_grace["detr-sweep-idle"]["action"] == "stop"
    assert after_grace["detr-sweep-busy"]["action"] == "notify"
    assert after_grace["detr-sweep-dark"]["action"] == "notify"
    assert final["detr-sweep-idle"][0] == "Stopped"
    for name in ("detr-sweep-busy", "detr-sweep-dark", "detr-sweep-7", "other-sweep-idle"):
        status, tags = final[name]
        assert status == "InProgress" and MARK not in tags, name

    [family] = [d for d in loop_decisions(marked) if d["resource_kind"] == "job_family"]
    assert family["resource_id"] == "tag:detr-sweep"
    texts = json.dumps(stack.sink.messages)
    assert "not known to be idle" in texts  # the job with no GPU data says why it is left running
