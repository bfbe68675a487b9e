"""Issue 38, case 6: one pod's labels must not override its workload. Through the deployed EKS sweep on the
embedded stack (moto's EKS, the local Kubernetes API through the real client, Container Insights series in the
embedded CloudWatch), in remediate mode, swept at the EKS schedule's event then again after the grace period.

Protect wins from any source (a pod, its template, its namespace); the opt-in to scale-to-zero counts only from
what the workload's owner wrote (its pod template, or its namespace), never from a pod's own labels, which anyone
allowed ``kubectl label pod`` can write."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard import clock
from costguard.act.arming import DynamoArmingRecords
from costguard.local.eks_world import EksCluster, EksNamespace, EksNode, EksWorkload
from costguard.local.sink import SlackSink
from costguard.local.stack import TABLE, LocalStack
from costguard.local.world import World
from tests.conftest import ROOT

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
CLUSTER = "lab"
OPT_IN = "costguard.io/scale-to-zero"
PROTECT = "costguard.io/protect"
NAMESPACES = [
    EksNamespace(name="serving", labels={"team": "ml-serving"}),
    EksNamespace(name="locked", labels={"team": "ml-serving", PROTECT: "true"}),
    EksNamespace(name="opted", labels={"team": "ml-serving", OPT_IN: "true"}),
]


def deployment(
    name: str,
    namespace: str = "serving",
    *,
    template: dict[str, str] | None = None,
    pods: dict[int, dict[str, str]] | None = None,
    replicas: int = 1,
) -> EksWorkload:
    """An idle Deployment of single-GPU pods: ``template`` its pod template's labels, ``pods`` the labels set on
    some of its pods since (kubectl label pod --overwrite)."""
    return EksWorkload(
        kind="Deployment",
        name=name,
        namespace=namespace,
        replicas=replicas,
        nodes=["gpu-a"],
        gpu_pattern="idle",
        labels=template or {},
        pod_labels=pods or {},
    )


def world_of(workload: EksWorkload) -> World:
    node = EksNode(name="gpu-a", instance_type="g5.12xlarge", instance_id="i-0e5a000000000a001")
    cluster = EksCluster(name=CLUSTER, nodes=[node], namespaces=NAMESPACES, workloads=[workload])
    return World(now=NOW, eks_clusters=[cluster])


def sweep(stack: LocalStack, at: datetime) -> dict[str, Any]:
    """The EKS sweep's schedule event, replayed at ``at``; the notifier drained."""
    event = json.loads(Path(ROOT / "events" / "schedule-eks-gpu-sweep-1200.json").read_text())
    event["time"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    event["id"] = f"eks-sweep-{at:%H%M}"
    clock.freeze(at)
    result: dict[str, Any] = stack.invoke("EksGpuFunction", event).result
    stack.drain()
    return result


def workload_id(workload: EksWorkload) -> str:
    return f"{CLUSTER}/{workload.namespace}/Deployment/{workload.name}"


class Run:
    """Two sweeps of one workload in remediate mode: at NOW, and after the grace period (15 minutes)."""

    def __init__(self, stack: LocalStack, workload: EksWorkload) -> None:
        self.stack, self.workload, self.id = stack, workload, workload_id(workload)
        self.first = sweep(stack, NOW)
        self.after = sweep(stack, NOW + timedelta(minutes=20))

    def decisions(self, result: dict[str, Any]) -> list[dict[str, Any]]:
        return [d for d in result["decisions"] if d["resource_id"] == self.id]

    def actions(self) -> list[str]:
        return [d["action"] for r in (self.first, self.after) for d in self.decisions(r)]

    def idle(self, result: dict[str, Any]) -> dict[str, Any]:
        [found] = [
            f for f in result["findings"] if f["resource_id"] == self.id and f["reason"] == "pod_gpu_idle"
        ]
        return found

    def replicas(self) -> int | None:
        return self.stack.kube.replicas(CLUSTER, "Deployment", self.workload.namespace, self.workload.name)

    def told(self) -> str:
        return json.dumps([m for m in self.stack.sink.messages if self.workload.name in json.dumps(m)])

    def assert_never_scaled(self) -> None:
        assert "mark" not in self.actions() and "stop" not in self.actions(), self.actions()
        assert self.stack.kube.writes() == []
        assert self.replicas() == self.workload.replicas


@pytest.fixture
def remediate(sink: SlackSink, sleeps: list[float]) -> Iterator[Any]:
    stacks: list[LocalStack] = []

    def run(workload: EksWorkload) -> Run:
        stack = LocalStack(world_of(workload), sink=sink, mode="remediate", until=NOW + timedelta(hours=1))
        stacks.append(stack.__enter__())
        return Run(stack, workload)

    yield run
    for stack in stacks:
        stack.__exit__(None, None, None)


def test_a_pod_relabelled_protect_false_and_opted_in_does_not_override_its_protected_template(
    remediate: Any,
) -> None:
    """The exact attack: the template says protect=true; one pod is relabelled protect=false, scale-to-zero=true."""
    run = remediate(
        deployment("relabelled", template={PROTECT: "true"}, pods={0: {PROTECT: "false", OPT_IN: "true"}})
    )
    [first] = run.decisions(run.first)
    assert first["action"] == "notify"
    assert "protected" in first["note"]
    assert run.decisions(run.after)[0]["action"] == "notify"
    run.assert_never_scaled()
    idle = run.idle(run.first)
    # Said where the protect was read from, and that the pod's own labels disagree with its template.
    assert f"{PROTECT}=true on its pod template" in idle["summary"]
    assert idle["evidence"]["protected_by"] == [
        f"{PROTECT}=true on its pod template (ReplicaSet serving/relabelled-5d8f7b9c6)"
    ]
    assert "disagree" in idle["summary"]
    assert "protected" in run.told()


def test_a_pod_labelled_scale_to_zero_does_not_opt_in_a_template_without_it(remediate: Any) -> None:
    run = remediate(deployment("pod-opt-in", pods={0: {OPT_IN: "true"}}))
    [first] = run.decisions(run.first)
    assert first["action"] == "notify"
    assert "not opted in" in first["note"] or "disagree" in first["note"]
    run.assert_never_scaled()
    assert run.idle(run.first)["evidence"].get("scale_to_zero_from") is None


def test_a_protected_namespace_wins_over_a_template_opted_in(remediate: Any) -> None:
    run = remediate(deployment("locked-in", "locked", template={OPT_IN: "true"}))
    [first] = run.decisions(run.first)
    assert first["action"] == "notify"
    assert "protected" in first["note"]
    run.assert_never_scaled()
    assert f"{PROTECT}=true on namespace locked" in run.idle(run.first)["summary"]


def test_a_pod_relabelled_protect_false_does_not_unprotect_a_template_in_an_opted_in_namespace(
    remediate: Any,
) -> None:
    run = remediate(deployment("ns-opted", "opted", template={PROTECT: "true"}, pods={0: {PROTECT: "false"}}))
    assert run.decisions(run.first)[0]["action"] == "notify"
    run.assert_never_scaled()


def test_one_pod_of_two_labelled_protect_protects_the_workload(remediate: Any) -> None:
    """Protect wins from any source: the second pod's label counts, not only the first's."""
    run = remediate(deployment("half-protected", "opted", replicas=2, pods={1: {PROTECT: "true"}}))
    [first] = run.decisions(run.first)
    assert first["action"] == "notify"
    assert "protected" in first["note"]
    run.assert_never_scaled()
    assert f"{PROTECT}=true on pod half-protected-" in run.idle(run.first)["summary"]


def test_a_pod_relabelled_scale_to_zero_false_against_its_opted_in_template_arms_nothing(
    remediate: Any,
) -> None:
    run = remediate(deployment("opted-out-pod", template={OPT_IN: "true"}, pods={0: {OPT_IN: "false"}}))
    [first] = run.decisions(run.first)
    assert first["action"] == "notify"
    assert "disagree" in first["note"]
    run.assert_never_scaled()


def test_a_template_opted_in_nothing_protected_idle_is_still_marked_then_scaled(remediate: Any) -> None:
    run = remediate(deployment("opted-in", template={OPT_IN: "true"}))
    assert [d["action"] for d in run.decisions(run.first)] == ["mark"]
    assert [d["action"] for d in run.decisions(run.after)] == ["stop"]
    assert run.stack.kube.writes() == [(CLUSTER, "PATCH", "deployments/scale")]
    assert run.replicas() == 0
    idle = run.idle(run.first)
    assert (
        idle["evidence"]["scale_to_zero_from"]
        == f"{OPT_IN}=true on its pod template (ReplicaSet serving/opted-in-5d8f7b9c6)"
    )
    assert "Opted in to scale-to-zero by" in idle["summary"]
    # The sweep's arming census kept the opt-in as read from the template, as costguard first saw it.
    key = f"123456789012/us-east-1/eks_workload/{run.id}"
    assert DynamoArmingRecords(TABLE).read([key])[key].tags == {OPT_IN: "true"}
