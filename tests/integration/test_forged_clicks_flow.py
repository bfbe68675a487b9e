"""The attacks on Slack's buttons, end to end on the embedded stack in remediate mode: a message put straight
on the interactions queue, a Stop now on an instance working again, a click on a message costguard never posted.
Each changes no tag, mute or instance state."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard import clock
from costguard.aws import clients
from costguard.aws.metrics import GPU_METRIC, GPU_NAMESPACE
from costguard.local.interactions import LOCAL_OPS_USER, block_actions, form_body, signed_request
from costguard.local.sink import SlackSink
from costguard.local.stack import TABLE, LocalStack
from costguard.local.world import World
from costguard.model import MARK_TAG_KEY
from costguard.notify.values import action_value
from tests.integration.test_interactions_flow import IDLE_P4D, KEY, _click, _instance, _sweep

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def remediating(world: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    with LocalStack(
        world, sink=sink, mode="remediate", slack_app=True, until=world.now + timedelta(hours=1)
    ) as running:
        yield running


def _items(prefix: str) -> list[dict[str, Any]]:
    items = clients.client("dynamodb").scan(TableName=TABLE)["Items"]
    return [i for i in items if i["id"]["S"].startswith(prefix)]


def _state() -> tuple[tuple[str, dict[str, str]], list[dict[str, Any]], list[dict[str, Any]]]:
    return _instance(IDLE_P4D), _items("mute#"), _items("action#")


def test_messages_put_straight_on_the_queue_change_nothing_and_are_kept(
    remediating: LocalStack, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    now = remediating.world.now
    _sweep(remediating, tmp_path, now)  # marks the idle p4d: a stop would go ahead
    before = _state()
    sqs = clients.sqs()
    queue = remediating.urls["InteractionsQueue"]
    forged = [
        # The old format: a payload "from" the ops user, no signature at all.
        {
            "payload": block_actions(
                "costguard:stop", action_value("gpu_idle", KEY + IDLE_P4D), user=LOCAL_OPS_USER
            )
        },
        {"payload": block_actions("costguard:keep", action_value("gpu_idle", KEY + IDLE_P4D, 8760))},
        {"payload": block_actions("costguard:protect", action_value("gpu_idle", KEY + IDLE_P4D))},
        {"payload": block_actions("costguard:mute", action_value("gpu_idle", KEY + IDLE_P4D, 8760))},
        # The new format, signed with a secret that is not the app's.
        {
            "body": form_body(block_actions("costguard:stop", action_value("gpu_idle", KEY + IDLE_P4D))),
            "timestamp": str(int(now.timestamp())),
            "signature": "v0=" + "0" * 64,
        },
    ]
    for message in forged:
        sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(message))
    invocations = remediating.drain("InteractionsQueue")
    assert _state() == before  # no tag, mute, action record or instance state changed
    dead = sqs.get_queue_attributes(
        QueueUrl=remediating.urls["InteractionsDeadLetterQueue"],
        AttributeNames=["ApproximateNumberOfMessages"],
    )["Attributes"]["ApproximateNumberOfMessages"]
    assert int(dead) == len(forged)  # every one kept
    assert remediating.queue_depth("InteractionsQueue") == 0
    # Every batch failed whole (Lambda returns it to the queue): each message was refused on each receive.
    assert invocations and all("All records failed" in str(i.result.get("error")) for i in invocations)
    unverified = [r for r in caplog.records if r.getMessage().startswith("unverified interaction")]
    assert len({getattr(r, "message_id", None) for r in unverified}) == len(
        forged
    )  # each logged, with its id
    assert remediating.sink.responses == []  # nobody was answered: nothing came from Slack


def _busy_from(stack: LocalStack, instance_id: str, start: datetime, minutes: int) -> None:
    """Its GPUs at 95% from ``start`` on, as the agent would publish them (through the API)."""
    cloudwatch = clients.client("cloudwatch")
    listed = cloudwatch.list_metrics(
        Namespace=GPU_NAMESPACE,
        MetricName=GPU_METRIC,
        Dimensions=[{"Name": "InstanceId", "Value": instance_id}],
    )["Metrics"]
    assert listed, "the instance publishes GPU series"
    for metric in listed:
        cloudwatch.put_metric_data(
            Namespace=GPU_NAMESPACE,
            MetricData=[
                {
                    "MetricName": GPU_METRIC,
                    "Dimensions": metric["Dimensions"],
                    "Timestamp": start + timedelta(minutes=m),
                    "Value": 95.0,
                    "Unit": "Percent",
                }
                for m in range(minutes)
            ],
        )


def test_stop_now_on_a_marked_instance_busy_again_is_refused_with_the_reason(
    remediating: LocalStack, tmp_path: Path
) -> None:
    now = remediating.world.now
    _sweep(remediating, tmp_path, now)  # 12:00: marked idle
    assert MARK_TAG_KEY in _instance(IDLE_P4D)[1]
    _busy_from(remediating, IDLE_P4D, now + timedelta(minutes=1), 4)  # 95% from 12:01
    result = _click(
        remediating,
        tmp_path,
        "costguard:stop",
        action_value("gpu_idle", KEY + IDLE_P4D),
        now + timedelta(minutes=4),
    )
    assert result.ok, result.error
    assert _instance(IDLE_P4D)[0] == "running"
    [reply] = result.output["responses"]
    assert "working now" in reply["text"] and "busiest GPU at 95%" in reply["text"]
    assert [r["status"]["S"] for r in _items("action#")] == ["refused"]


def test_a_click_on_a_message_costguard_never_posted_is_refused(
    remediating: LocalStack, tmp_path: Path
) -> None:
    now = remediating.world.now
    _sweep(remediating, tmp_path, now)
    before = _state()
    at = now + timedelta(minutes=2)
    # A keep of the right resource and reason, from the menu, signed by Slack, on a message costguard did not post.
    payload = block_actions(
        "costguard:keep",
        action_value("gpu_idle", KEY + IDLE_P4D, 24),
        action_ts=f"{int(at.timestamp())}.000300",
        response_url=remediating.sink.response_url("elsewhere"),
        message_ts="1700009999.000100",
    )
    clock.freeze(at)
    answer = remediating.invoke("InteractionsFunction", signed_request(payload, signed_at=at)).result
    assert answer["statusCode"] == 200
    remediating.drain("InteractionsQueue")
    [reply] = remediating.sink.responses
    assert "not a choice costguard offered here" in reply["text"].lower()
    assert _state()[0] == before[0] and _state()[1] == before[1]
    assert [r["status"]["S"] for r in _items("action#")] == ["refused"]
