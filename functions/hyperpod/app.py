"""Entry point: SageMaker HyperPod node health, cluster state changes and cluster events (hyperpod_node_unhealthy,
hyperpod_cluster_failed, hyperpod_provisioning_failed), and the hourly sweep over instance groups whose GPUs stayed
idle (hyperpod_idle)."""

from __future__ import annotations

from typing import Any

from costguard import clock
from costguard.aws import clients
from costguard.entry import ONCE_PERMISSIONS, PARSE_PERMISSIONS, OncePerEvent
from costguard.events.hyperpod import ClusterEvent, ClusterStateChange, NodeHealthEvent
from costguard.events.scheduled import ScheduledEvent
from costguard.flows.hyperpod import (
    EVENT_PERMISSIONS,
    handle_cluster_event,
    handle_cluster_state,
    handle_node_health,
)
from costguard.flows.hyperpod_idle import SWEEP_PERMISSIONS, handle_sweep
from costguard.handler import event_handler
from costguard.runtime import runtime
from costguard.settings import get_settings, require

# The IAM actions this handler's calls need: tests/template/test_iam.py holds the template to them.
PERMISSIONS = (
    PARSE_PERMISSIONS | ONCE_PERMISSIONS | EVENT_PERMISSIONS | SWEEP_PERMISSIONS | clients.ASSUME_PERMISSIONS
)

# Validated at cold start: a bad variable, or a table, queue or secret it needs unset, fails here, named.
settings = require(get_settings(), "state_table", "decisions_queue_url", "failed_events_queue_url")


def node_health(event: NodeHealthEvent) -> dict[str, Any]:
    return handle_node_health(event, runtime(), clock.now()).summary()


def cluster_state(event: ClusterStateChange) -> dict[str, Any]:
    return handle_cluster_state(event, runtime(), clock.now()).summary()


def cluster_event(event: ClusterEvent) -> dict[str, Any]:
    return handle_cluster_event(event, runtime(), clock.now()).summary()


def on_schedule(event: ScheduledEvent) -> dict[str, Any]:
    return handle_sweep(runtime(), clock.now(), event.region, event.id).summary()


# AWS may send an event more than once: a redelivery must not alert twice.
lambda_handler = event_handler(
    "hyperpod",
    {
        NodeHealthEvent: OncePerEvent(node_health),
        ClusterStateChange: OncePerEvent(cluster_state),
        ClusterEvent: OncePerEvent(cluster_event),
        ScheduledEvent: on_schedule,
    },
)
