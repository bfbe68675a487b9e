"""spot_interruption end to end: the warning -> SpotInterruptionsFunction -> queue -> notifier -> Slack sink."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from costguard import clock
from costguard.aws import clients
from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import Instance, World
from costguard.pricing import bundled_table
from tests.conftest import EVENTS, FIXTURES, load_event

WARNING = EVENTS / "ec2-spot-interruption-warning.json"
SPOT_ID = "i-0a1f00000000000b1"


def spec(world: World, instance_id: str = SPOT_ID) -> Instance:
    return next(i for i in world.instances if i.id == instance_id)


def warning_for(tmp_path: Path, instance_id: str, n: int) -> Path:
    event: dict[str, Any] = load_event(WARNING.name)
    event["id"] = f"{event['id'][:-2]}{n:02d}"
    event["detail"]["instance-id"] = instance_id
    event["resources"] = [f"arn:aws:ec2:us-east-1:123456789012:instance/{instance_id}"]
    path = tmp_path / f"warning-{n}.json"
    path.write_text(json.dumps(event))
    return path


def test_alert_names_the_job_says_it_does_not_checkpoint_and_goes_to_the_team(
    world: World, sink: SlackSink, sleeps: list[float]
) -> None:
    instance = spec(world)
    assert instance.lifecycle == "spot"
    with LocalStack(world, sink=sink, routes={"vision": sink.url_for("vision")}) as stack:
        [result] = replay(stack, [WARNING])
        now = clock.now()
        described = clients.ec2().describe_instances(InstanceIds=[SPOT_ID])["Reservations"][0]["Instances"][0]
    assert described.get("InstanceLifecycle") == "spot"
    assert result.ok, result.error
    assert result.function == "SpotInterruptionsFunction"
    [decision] = result.decisions
    assert (decision["reason"], decision["action"]) == ("spot_interruption", "notify")
    assert instance.launched is not None
    price = bundled_table()["ec2"][instance.type]
    lost = round((now - instance.launched).total_seconds() / 3600 * price, 2)
    assert decision["cost_usd"] == lost
    [message] = result.slack
    assert message["channel"] == "vision"
    text = json.dumps(message)
    assert instance.tags["costguard:job"] in text
    assert "does not checkpoint" in text
    assert f"${lost:,.2f}" in text
    assert "Capacity Block" not in text


def test_repeated_interruptions_recommend_on_demand_or_a_capacity_block(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    base = spec(world)
    replacements = [
        base.model_copy(
            update={
                "id": f"i-0a1f00000000000b{n}",
                "name": f"vision-g5-spot-train-{n}",
                "launched": world.now - timedelta(hours=1),
                "tags": base.tags | {"costguard:job": f"vision-detr-train-2026-11-20-1{n}-00-00"},
            }
        )
        for n in (2, 3)
    ]
    grown = world.model_copy(update={"instances": [*world.instances, *replacements]})
    with LocalStack(grown, sink=sink) as stack:
        paths = [
            WARNING,
            warning_for(tmp_path, replacements[0].id, 2),
            warning_for(tmp_path, replacements[1].id, 3),
        ]
        results = replay(stack, paths)
    assert all(r.ok for r in results), [r.error for r in results]
    assert [len(r.slack) for r in results] == [1, 1, 1]
    texts = [json.dumps(r.slack) for r in results]
    assert not any("Capacity Block" in t for t in texts[:2])
    assert "on-demand" in texts[2] and "Capacity Block" in texts[2]
    assert "vision-detr-train was interrupted 3 times in 24h" in texts[2]
    assert "make it checkpoint" in texts[2]


def test_a_gone_instance_is_reported_without_crashing(stack: LocalStack, tmp_path: Path) -> None:
    [result] = replay(stack, [warning_for(tmp_path, "i-0dead00000000beef", 9)])
    assert result.ok, result.error
    [decision] = result.decisions
    assert decision["cost_usd"] is None
    assert "gone already" in json.dumps(result.slack)


def test_malformed_event_is_rejected_logged_and_kept(stack: LocalStack, caplog) -> None:  # type: ignore[no-untyped-def]
    path = FIXTURES / "ec2-spot-interruption-missing-instance.json"
    [result] = replay(stack, [path])
    assert not result.ok
    assert "instance-id" in (result.error or "")
    kept = clients.sqs().receive_message(QueueUrl=stack.urls["FailedEventsQueue"], MaxNumberOfMessages=10)
    [message] = kept["Messages"]
    body = json.loads(message["Body"])
    assert body["function"] == "spot_interruptions"
    assert body["event"] == load_event(path.name)
    assert stack.sink.messages == []
    [logged] = [r for r in caplog.records if r.getMessage() == "rejected malformed event"]
    assert logged.event_id == load_event(path.name)["id"]  # type: ignore[attr-defined]
