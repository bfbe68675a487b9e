"""One cluster's broken API does not stop the EKS sweep (issue 39): a cluster whose Kubernetes API answers an
error of any status (a stale continue token's 410 Expired past its one restart, a 429 past its Retry-After waits, a
500, a 503) or an object costguard cannot read is reported once, with what failed, and every other cluster is swept
as usual. A 429 with Retry-After is waited out; a 410 on a continue token restarts the list once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from costguard.aws import eks as aws_eks
from costguard.local.eks_world import EksCluster, EksNode
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World, load_world
from tests.conftest import DEMO_WORLD
from tests.integration.test_eks_flow import NOW, by_id, sweep

HEALTHY = ("alpha", "gamma")
BROKEN = "beta"
PAGE = 2  # items per list call here: the demo cluster's 11 pods are six pages, so a continue token is used


def squatter(cluster: str) -> str:
    return f"{cluster}/serving/Deployment/llm-squatter"


def renamed(cluster: EksCluster, name: str, digit: str) -> EksCluster:
    """The demo's ml-platform cluster under another name, its nodes' instance ids its own."""
    nodes = [
        EksNode.model_validate(
            {**n.model_dump(), "instance_id": n.instance_id[:-4] + digit + n.instance_id[-3:]}
        )
        for n in cluster.nodes
    ]
    return cluster.model_copy(update={"name": name, "nodes": nodes})


@pytest.fixture(scope="module")
def three_clusters() -> World:
    demo = load_world(DEMO_WORLD)
    shape = next(c for c in demo.eks_clusters if c.name == "ml-platform")
    clusters = [renamed(shape, name, str(n)) for n, name in enumerate(("alpha", "beta", "gamma"), start=1)]
    return World(account=demo.account, region=demo.region, now=demo.now, eks_clusters=clusters)


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aws_eks, "LIST_PAGE", PAGE)


@pytest.fixture
def stack(
    three_clusters: World, sink: SlackSink, sleeps: list[float], small_pages: None
) -> Iterator[LocalStack]:
    routes = {team: sink.url_for(team) for team in ("ml-serving", "ml-research", "ml-training")}
    with LocalStack(
        three_clusters, sink=sink, routes=routes, mode="remediate", until=NOW + timedelta(hours=1)
    ) as running:
        yield running


def told_about(stack: LocalStack, cluster: str) -> list[dict[str, Any]]:
    return [m for m in stack.sink.messages if f"EKS cluster {cluster}" in json.dumps(m)]


def assert_swept(result: dict[str, Any], cluster: str) -> None:
    found = by_id(result)
    assert (squatter(cluster), "pod_gpu_idle") in found
    assert (f"{cluster}/research/Notebook/jupyter-dana", "pod_gpu_idle") in found
    assert (f"{cluster}/gpu-c", "gpu_node_unused") in found
    assert (cluster, "eks_cluster_unreachable") not in found


@pytest.mark.parametrize(
    ("status", "plan", "said"),
    [
        (410, {"page": 1}, "410"),  # every continue token stale: restarted once, then given up
        (429, {"retry_after": 1}, "429"),  # throttled past the bounded waits
        (500, {}, "500"),
        (503, {}, "503"),
    ],
)
def test_a_failing_cluster_is_told_once_and_the_others_are_swept(
    stack: LocalStack, status: int, plan: dict[str, Any], said: str
) -> None:
    stack.kube.fail(BROKEN, "pods", status, times=None, **plan)

    first = sweep(stack, NOW)
    second = sweep(stack, NOW + timedelta(minutes=15))

    for result in (first, second):
        for cluster in HEALTHY:
            assert_swept(result, cluster)
        broken = by_id(result)[(BROKEN, "eks_cluster_unreachable")]
        assert said in broken["summary"]
        assert "pods" in broken["summary"]
        assert not [f for f in by_id(result) if f[0].startswith(f"{BROKEN}/")]
    # In remediate mode the healthy clusters' opted-in idle Deployment is still marked.
    decisions = {d["resource_id"]: d["action"] for d in first["decisions"]}
    assert decisions[squatter("alpha")] == "mark"
    assert decisions[squatter("gamma")] == "mark"
    assert squatter(BROKEN) not in decisions
    # Told once: the repeat sweep does not tell it again.
    assert len(told_about(stack, BROKEN)) == 1
    assert said in json.dumps(told_about(stack, BROKEN)[0])
    # Past the grace period the healthy clusters' opted-in Deployment is scaled; nothing is written to the other.
    assert stack.kube.writes() == [(c, "PATCH", "deployments/scale") for c in HEALTHY]


@pytest.mark.parametrize("times", [1, aws_eks.THROTTLE_WAITS])
def test_a_429_with_retry_after_is_waited_out_then_swept(
    stack: LocalStack, sleeps: list[float], times: int
) -> None:
    stack.kube.fail(BROKEN, "pods", 429, times=times, retry_after=3)

    result = sweep(stack, NOW)

    for cluster in (*HEALTHY, BROKEN):
        assert_swept(result, cluster)
    assert sleeps.count(3) == times  # each Retry-After waited once (recorded, not slept)
    assert told_about(stack, BROKEN) == []


def test_a_long_retry_after_is_waited_no_longer_than_the_bound(
    stack: LocalStack, sleeps: list[float]
) -> None:
    stack.kube.fail(BROKEN, "nodes", 429, times=None, retry_after=3600)

    result = sweep(stack, NOW)

    for cluster in HEALTHY:
        assert_swept(result, cluster)
    assert "429" in by_id(result)[(BROKEN, "eks_cluster_unreachable")]["summary"]
    waited = [s for s in sleeps if s >= aws_eks.MAX_RETRY_AFTER]
    assert waited == [aws_eks.MAX_RETRY_AFTER] * aws_eks.THROTTLE_WAITS


def test_a_stale_continue_token_restarts_the_list_once_then_swept(stack: LocalStack) -> None:
    stack.kube.fail(BROKEN, "pods", 410, times=1, page=2)

    result = sweep(stack, NOW)

    for cluster in (*HEALTHY, BROKEN):
        assert_swept(result, cluster)
    calls = stack.kube.calls
    # The first three pages, the third's 410, then the whole list again.
    assert calls[(BROKEN, "GET", "api/v1/pods")] == calls[("alpha", "GET", "api/v1/pods")] + 3
    assert told_about(stack, BROKEN) == []


def test_an_object_that_cannot_be_read_is_reported_and_the_others_are_swept(stack: LocalStack) -> None:
    stack.kube.objects[BROKEN]["pods"].append({"metadata": "not an object", "spec": [], "status": 7})

    first = sweep(stack, NOW)
    second = sweep(stack, NOW + timedelta(minutes=15))

    for result in (first, second):
        for cluster in HEALTHY:
            assert_swept(result, cluster)
        assert (BROKEN, "eks_cluster_unreachable") in by_id(result)
    assert len(told_about(stack, BROKEN)) == 1
