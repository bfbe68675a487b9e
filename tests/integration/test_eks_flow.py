"""GPUs on EKS through the deployed sweep handler, on the embedded stack: moto's EKS, the local Kubernetes API
(local/kube_responder.py, answered through the real Kubernetes client) and Container Insights series in the
embedded CloudWatch. The demo world's clusters: an idle notebook, an idle Deployment in an opted-in namespace,
an idle one not opted in, a busy training Job, a GPU node kept alive by a pod that uses no GPU, and a cluster
without an access entry."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard import clock
from costguard.act.eks import SCALED_PREFIX
from costguard.act.ledger_book import DynamoLedger
from costguard.aws import clients
from costguard.local.sink import SlackSink
from costguard.local.stack import TABLE, LocalStack
from costguard.local.world import World, load_world
from tests.conftest import DEMO_WORLD, ROOT

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SQUATTER = "ml-platform/serving/Deployment/llm-squatter"
NOTEBOOK = "ml-platform/research/Notebook/jupyter-dana"
NOT_OPTED = "ml-platform/research/Deployment/embeddings-api"
JOB = "ml-platform/training/Job/train-resnet"


@pytest.fixture(scope="module")
def eks_world() -> World:
    """The demo world's clusters alone: the rest of the demo account is not read by this sweep."""
    demo = load_world(DEMO_WORLD)
    return World(account=demo.account, region=demo.region, now=demo.now, eks_clusters=demo.eks_clusters)


def sweep_event(at: datetime) -> dict[str, Any]:
    event = json.loads(Path(ROOT / "events" / "schedule-eks-gpu-sweep-1200.json").read_text())
    event["time"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    event["id"] = f"eks-sweep-{at:%H%M}"
    return event


def sweep(stack: LocalStack, at: datetime) -> dict[str, Any]:
    clock.freeze(at)
    result: dict[str, Any] = stack.invoke("EksGpuFunction", sweep_event(at)).result
    stack.drain()
    return result


def by_id(result: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(f["resource_id"], f["reason"]): f for f in result["findings"]}


@pytest.fixture
def notify_stack(eks_world: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    routes = {team: sink.url_for(team) for team in ("ml-serving", "ml-research")}
    with LocalStack(eks_world, sink=sink, routes=routes, until=NOW + timedelta(hours=1)) as stack:
        yield stack


def test_idle_pods_are_found_with_owner_namespace_team_and_dollars(notify_stack: LocalStack) -> None:
    found = by_id(sweep(notify_stack, NOW))

    squatter = found[(SQUATTER, "pod_gpu_idle")]
    assert squatter["evidence"]["namespace"] == "serving"
    assert squatter["evidence"]["team"] == "ml-serving"
    assert squatter["evidence"]["workload"] == "Deployment/llm-squatter"
    assert len(squatter["evidence"]["pods"]) == 2
    # Two of gpu-a's four GPUs: half a g5.12xlarge ($5.672/h).
    assert squatter["hourly_usd"] == pytest.approx(5.672 / 2)

    notebook = found[(NOTEBOOK, "pod_gpu_idle")]
    assert notebook["evidence"]["team"] == "ml-research"
    assert notebook["evidence"]["pods"] == ["jupyter-dana-0"]
    assert notebook["hourly_usd"] == pytest.approx(5.672 / 4)

    assert not [f for f in found if f[0] == JOB]  # busy on all eight GPUs


def test_the_gpu_node_kept_alive_is_reported_with_what_keeps_it(notify_stack: LocalStack) -> None:
    found = by_id(sweep(notify_stack, NOW))
    node = found[("ml-platform/gpu-c", "gpu_node_unused")]
    assert node["evidence"]["kept_by"] == ["Deployment research/metrics-proxy"]
    assert node["evidence"]["managed_by"] == "Karpenter NodePool gpu"
    assert "NoSchedule" in node["summary"]
    assert node["hourly_usd"] == pytest.approx(1.006)
    # gpu-a and gpu-b run GPU pods; cpu-a has no GPU.
    assert [f for f in found if f[1] == "gpu_node_unused"] == [("ml-platform/gpu-c", "gpu_node_unused")]


def test_findings_go_to_their_teams_channel(notify_stack: LocalStack) -> None:
    sweep(notify_stack, NOW)
    channels = {m["channel"] for m in notify_stack.sink.messages if "llm-squatter" in json.dumps(m)}
    assert channels == {"ml-serving"}


def test_an_unreachable_cluster_is_reported_once_and_the_others_are_swept(notify_stack: LocalStack) -> None:
    first = sweep(notify_stack, NOW)
    second = sweep(notify_stack, NOW + timedelta(minutes=15))
    for result in (first, second):
        assert ("legacy", "eks_cluster_unreachable") in by_id(result)
        assert (SQUATTER, "pod_gpu_idle") in by_id(result)  # the other cluster is swept all the same
    told = [m for m in notify_stack.sink.messages if "EKS cluster legacy" in json.dumps(m)]
    assert len(told) == 1
    assert "access entry" in json.dumps(told[0])
    # The cluster without an access entry was asked once per sweep, and refused.
    assert notify_stack.kube.calls[("legacy", "GET", "api/v1/nodes")] == 2


def test_notify_mode_writes_nothing_to_the_cluster(notify_stack: LocalStack) -> None:
    sweep(notify_stack, NOW)
    sweep(notify_stack, NOW + timedelta(minutes=20))
    assert notify_stack.kube.writes() == []
    assert notify_stack.kube.replicas("ml-platform", "Deployment", "serving", "llm-squatter") == 2


def test_remediate_marks_rejudges_then_scales_only_the_opted_in_deployment(
    eks_world: World, sink: SlackSink, sleeps: list[float]
) -> None:
    with LocalStack(eks_world, sink=sink, mode="remediate", until=NOW + timedelta(hours=1)) as stack:
        first = sweep(stack, NOW)
        marked = {d["resource_id"]: d for d in first["decisions"]}
        assert marked[SQUATTER]["action"] == "mark"
        assert marked[NOT_OPTED]["action"] == "notify"
        assert "not opted in" in marked[NOT_OPTED]["note"]
        assert marked[NOTEBOOK]["action"] == "notify"
        assert stack.kube.writes() == []  # the mark is kept in the state table, not on the workload

        during = sweep(stack, NOW + timedelta(minutes=10))  # in its grace period: judged again, left alone
        assert {d["resource_id"]: d["action"] for d in during["decisions"]}[SQUATTER] == "none"
        assert stack.kube.writes() == []

        after = sweep(stack, NOW + timedelta(minutes=20))  # re-judged idle after the grace period
        assert {d["resource_id"]: d["action"] for d in after["decisions"]}[SQUATTER] == "stop"
        squatter = by_id(after)[(SQUATTER, "pod_gpu_idle")]
        assert (
            squatter["evidence"]["restore"] == "kubectl -n serving scale deployment/llm-squatter --replicas=2"
        )

        # One read of its scale subresource, one patch of it, and no other write: nothing deleted, ever.
        assert stack.kube.writes() == [("ml-platform", "PATCH", "deployments/scale")]
        assert stack.kube.calls[("ml-platform", "GET", "deployments/scale")] == 1
        assert stack.kube.refused == []
        assert stack.kube.replicas("ml-platform", "Deployment", "serving", "llm-squatter") == 0
        assert stack.kube.replicas("ml-platform", "Deployment", "research", "embeddings-api") == 1

        key = f"{SCALED_PREFIX}123456789012/us-east-1/eks_workload/{SQUATTER}"
        record = clients.client("dynamodb").get_item(TableName=TABLE, Key={"id": {"S": key}})["Item"]
        assert record["previous_replicas"] == {"N": "2"}

        later = sweep(stack, NOW + timedelta(minutes=40))  # its pods are gone: nothing more to do
        assert SQUATTER not in {d["resource_id"] for d in later["decisions"]}
        assert stack.kube.writes() == [("ml-platform", "PATCH", "deployments/scale")]


def test_a_workload_scaled_back_up_closes_its_ledger_entry_at_its_pods_start(
    eks_world: World, sink: SlackSink, sleeps: list[float]
) -> None:
    with LocalStack(eks_world, sink=sink, mode="remediate", until=NOW + timedelta(hours=2)) as stack:
        pods = copy.deepcopy(stack.kube.objects["ml-platform"]["pods"])
        sweep(stack, NOW)
        sweep(stack, NOW + timedelta(minutes=20))  # scaled to zero
        assert stack.kube.replicas("ml-platform", "Deployment", "serving", "llm-squatter") == 0
        ledger = DynamoLedger(TABLE)
        [entry] = ledger.entries(NOW - timedelta(days=1), NOW + timedelta(days=1), ["ml-serving"])
        assert entry.resource_id == SQUATTER and entry.returned_at is None
        sweep(stack, NOW + timedelta(minutes=40))  # still at zero: nothing seen running, nothing closed
        assert ledger.entries(NOW - timedelta(days=1), NOW + timedelta(days=1))[0].returned_at is None
        # Its owner scales it back up at 13:30: its pods start again, as Kubernetes writes it.
        back = NOW + timedelta(minutes=90)
        again = [p for p in pods if p["metadata"]["name"].startswith("llm-squatter")]
        assert again
        for pod in again:
            pod["status"]["startTime"] = back.strftime("%Y-%m-%dT%H:%M:%SZ")
        stack.kube.objects["ml-platform"]["pods"].extend(again)
        sweep(stack, NOW + timedelta(minutes=100))
        [closed] = ledger.entries(NOW - timedelta(days=1), NOW + timedelta(days=1), ["ml-serving"])
        assert closed.returned_at == back  # the pods' start, not the sweep's time
        assert not closed.near_miss and closed.hours_off(NOW + timedelta(hours=5)) == pytest.approx(70 / 60)
