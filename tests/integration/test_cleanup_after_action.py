"""A failure after the action never tells the opposite of what happened (issue: the unmark after a scale to zero
throttled): the scale is told as done, the mark left behind belongs to the run that was scaled, and the workload
its owner scales back up is marked and given its grace period afresh."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from botocore.client import BaseClient
from botocore.exceptions import ClientError

from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from tests.integration.test_eks_flow import NOW, SQUATTER, eks_world, sweep  # noqa: F401

CLUSTER = "ml-platform"


class Throttle:
    """DynamoDB answering ProvisionedThroughputExceededException to every DeleteItem of one workload's items,
    past the client's own retries (every client: each function's own)."""

    def __init__(self, needle: str, monkeypatch: pytest.MonkeyPatch) -> None:
        self.needle, self.on, self.refused = needle, True, 0
        real: Any = getattr(BaseClient, "_make_api_call")  # noqa: B009
        throttle = self

        def call(client: Any, operation: str, params: dict[str, Any]) -> Any:
            if (
                throttle.on
                and operation == "DeleteItem"
                and throttle.needle in json.dumps(params.get("Key", {}))
            ):
                throttle.refused += 1
                error = {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "injected"}}
                raise ClientError(error, operation)  # type: ignore[arg-type]
            return real(client, operation, params)

        monkeypatch.setattr(BaseClient, "_make_api_call", call)


@pytest.fixture
def remediating(eks_world: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:  # noqa: F811
    with LocalStack(eks_world, sink=sink, mode="remediate", until=NOW + timedelta(hours=2)) as stack:
        yield stack


def actions(result: dict[str, Any]) -> dict[str, str]:
    return {d["resource_id"]: d["action"] for d in result["decisions"]}


def test_a_throttled_unmark_after_a_scale_to_zero_is_told_as_done_and_a_scale_back_up_starts_anew(
    remediating: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = remediating
    assert actions(sweep(stack, NOW))[SQUATTER] == "mark"
    running = copy.deepcopy(stack.kube.objects[CLUSTER]["pods"])
    throttle = Throttle("llm-squatter", monkeypatch)
    try:
        after = sweep(stack, NOW + timedelta(minutes=20))
    finally:
        throttle.on = False
    assert throttle.refused > 0  # the cleanup after the scale was refused
    assert actions(after)[SQUATTER] == "stop"
    assert stack.kube.replicas(CLUSTER, "Deployment", "serving", "llm-squatter") == 0
    told = [m for m in stack.sink.messages if "llm-squatter" in json.dumps(m)]
    assert told and not any("failed to" in json.dumps(m) for m in told), told  # told as done

    # Its owner scales it back up at 12:30: new pods, started then.
    restarted = (NOW + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    objects = stack.kube.objects[CLUSTER]
    for deployment in objects["deployments"] + objects["replicasets"]:
        if deployment["metadata"]["name"].startswith("llm-squatter"):
            deployment["spec"]["replicas"] = 2
    back = [copy.deepcopy(p) for p in running if p["metadata"]["name"].startswith("llm-squatter")]
    for pod in back:
        pod["status"]["startTime"] = restarted
    objects["pods"] = objects["pods"] + back

    again = sweep(stack, NOW + timedelta(minutes=65))  # its new pods past the idle window
    decision = next((d for d in again["decisions"] if d["resource_id"] == SQUATTER), again)
    assert decision.get("action") == "mark", [
        (f["resource_id"], f["reason"], f.get("summary", "")[:200]) for f in again["findings"]
    ]  # not scaled at first sight on the old run's mark
    assert "older than the resource's current run" in decision["note"]
    assert stack.kube.replicas(CLUSTER, "Deployment", "serving", "llm-squatter") == 2
