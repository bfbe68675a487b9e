"""The three HyperPod event types replay from events/ and produce their messages with dollars."""

from __future__ import annotations

import json

from costguard.aws import clients
from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.pricing import bundled_table
from tests.conftest import EVENTS

NODE = EVENTS / "sagemaker-hyperpod-node-health-unhealthy.json"
STATE = EVENTS / "sagemaker-hyperpod-cluster-state-change-failed.json"
CLUSTER_EVENT = EVENTS / "sagemaker-hyperpod-cluster-event-instance-failed.json"


def price(instance_type: str) -> float:
    return float(bundled_table()["sagemaker"][instance_type])


def test_the_three_hyperpod_event_types_replay_into_messages_with_dollars(
    world: World, sink: SlackSink
) -> None:
    with LocalStack(world, sink=sink) as stack:
        node, state, event = replay(stack, [NODE, STATE, CLUSTER_EVENT])
        calls = dict(clients.calls)
    assert all(r.ok for r in (node, state, event)), [r.error for r in (node, state, event)]
    assert {r.function for r in (node, state, event)} == {"HyperPodFunction"}
    p5, g5 = price("ml.p5.48xlarge"), price("ml.g5.2xlarge")

    [decision] = node.decisions
    assert (decision["reason"], decision["action"]) == ("hyperpod_node_unhealthy", "notify")
    assert decision["hourly_usd"] == p5  # the type DescribeClusterNode names: the event names none
    [message] = node.slack
    text = json.dumps(message)
    assert "i-0b7e5f0000000a001" in text and "replacing" in text
    assert f"${p5:,.2f}/h" in text and f"${p5 * 24:,.2f} a day" in text

    [decision] = state.decisions
    assert (decision["reason"], decision["action"]) == ("hyperpod_cluster_failed", "notify")
    running = round(3 * p5 + 1 * g5, 4)
    assert decision["hourly_usd"] == running
    text = json.dumps(state.slack[0])
    assert f"${running:,.2f}/h" in text and f"${4 * p5 + g5:,.2f}/h" in text and "Lifecycle script" in text

    [decision] = event.decisions
    assert (decision["reason"], decision["action"]) == ("hyperpod_provisioning_failed", "notify")
    assert decision["hourly_usd"] == round(3 * p5, 4)
    text = json.dumps(event.slack[0])
    assert "sufficient capacity" in text and f"${3 * p5:,.2f}/h" in text and "3 of 4" in text

    # One DescribeClusterNode for the node event, one DescribeCluster for the cluster event; the state change
    # carries its instance groups.
    assert calls.get(("sagemaker", "DescribeClusterNode")) == 1
    assert calls.get(("sagemaker", "DescribeCluster")) == 1


def test_a_redelivered_node_event_is_told_once(world: World, sink: SlackSink) -> None:
    with LocalStack(world, sink=sink) as stack:
        first, again = replay(stack, [NODE, NODE])
    assert len(first.slack) == 1 and not again.slack
