"""Where an EKS workload's protect and scale-to-zero labels are read (detect/eks.py), from the Kubernetes API's
JSON: protect from any source, the opt-in only from what the owner wrote (pod template, a StatefulSet's own labels,
namespace), never from a pod's own labels; ``armed_by`` names the opt-in as read there."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from costguard.detect import eks
from costguard.detect.gpu import Thresholds, read_gpus
from costguard.model import Finding, Reason

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
T = Thresholds()
NODE = eks.Node("gpu-a", "i-0123456789abcdef0", "g5.12xlarge", 4)
OPT_IN, PROTECT = eks.SCALE_TO_ZERO_LABEL, eks.PROTECT_LABEL


def replica_set(template: dict[str, str], own: dict[str, str] | None = None) -> eks.Controller:
    """A Deployment's ReplicaSet as the API lists it: its own labels (copied from the template) and the template."""
    return eks.controller_of(
        "ReplicaSet",
        {
            "metadata": {
                "name": "llm-5d8",
                "namespace": "serving",
                "labels": template if own is None else own,
                "creationTimestamp": "2026-11-20T02:00:00Z",
                "ownerReferences": [{"kind": "Deployment", "name": "llm", "controller": True}],
            },
            "spec": {"replicas": 1, "template": {"metadata": {"labels": template}}},
        },
    )


def pod(name: str, labels: dict[str, str], owner: tuple[str, str] = ("ReplicaSet", "llm-5d8")) -> eks.Pod:
    return eks.Pod("serving", name, "gpu-a", "Running", True, 1, NOW - timedelta(hours=10), *owner, labels)


def idle(
    controllers: dict[tuple[str, str, str], eks.Controller],
    *pods: eks.Pod,
    namespace: dict[str, str] | None = None,
) -> Finding:
    view = eks.ClusterView(
        "c", "123456789012", "us-east-1", "arn", (NODE,), pods, controllers, {"serving": namespace or {}}
    )
    readings: dict[tuple[str, str], Any] = {
        p.key: read_gpus({0: [(NOW - timedelta(minutes=m), 1.0) for m in range(179, -1, -1)]}, NOW, T, 1)
        for p in pods
    }
    [found] = eks.workload_findings(
        view,
        readings,
        price_of=lambda t: 5.0,
        thresholds=T,
        now=NOW,
        team_label="team",
        protect_tag_key="cg:p",
    )
    assert found.reason is Reason.POD_GPU_IDLE
    return found


def rs(
    template: dict[str, str], own: dict[str, str] | None = None
) -> dict[tuple[str, str, str], eks.Controller]:
    return {("ReplicaSet", "serving", "llm-5d8"): replica_set(template, own)}


def test_the_template_is_read_from_the_replica_sets_spec_with_its_creation_time() -> None:
    made = replica_set({OPT_IN: "true"}, own={"app": "llm"})
    assert made.template_labels == {OPT_IN: "true"}
    assert made.template == {OPT_IN: "true"}
    assert made.created == datetime(2026, 11, 20, 2, 0, tzinfo=UTC)


def test_one_pod_relabelled_protect_false_and_opted_in_stays_protected_and_arms_nothing() -> None:
    found = idle(rs({PROTECT: "true"}), pod("llm-5d8-a", {PROTECT: "false", OPT_IN: "true"}))
    assert found.resource.tags["cg:p"] == "true"
    assert (
        found.resource.stop_blocker
        == f"protected by {PROTECT}=true on its pod template (ReplicaSet serving/llm-5d8)"
    )
    assert found.armed_by == {}
    assert "Protected by" in found.summary and "disagree" in found.summary
    assert found.evidence["labels_disagree"] == [
        f"pod llm-5d8-a has {OPT_IN}=true, its template none",
        f"pod llm-5d8-a has {PROTECT}=false, its template {PROTECT}=true",
    ]


def test_a_pod_label_alone_never_opts_in_and_is_named_as_disagreeing() -> None:
    found = idle(rs({}), pod("llm-5d8-a", {OPT_IN: "true"}))
    assert "not opted in" in (found.resource.stop_blocker or "")
    assert "disagree" in (found.resource.stop_blocker or "")
    assert found.armed_by == {}
    assert "scale_to_zero_from" not in found.evidence


def test_any_one_pod_labelled_protect_protects_the_workload() -> None:
    found = idle(
        rs({}), pod("llm-5d8-a", {}), pod("llm-5d8-b", {PROTECT: "true"}), namespace={OPT_IN: "true"}
    )
    assert found.resource.tags["cg:p"] == "true"
    assert found.evidence["protected_by"] == [f"{PROTECT}=true on pod llm-5d8-b"]


def test_a_protected_namespace_wins_over_a_template_opted_in() -> None:
    found = idle(rs({OPT_IN: "true"}), pod("llm-5d8-a", {OPT_IN: "true"}), namespace={PROTECT: "yes"})
    assert found.resource.tags["cg:p"] == "true"
    assert found.evidence["protected_by"] == [f"{PROTECT}=yes on namespace serving"]


def test_an_opt_in_from_the_template_arms_the_scale_and_is_named() -> None:
    found = idle(rs({OPT_IN: "true"}), pod("llm-5d8-a", {OPT_IN: "true"}))
    assert found.resource.stop_blocker is None
    assert found.remediable
    assert found.armed_by == {OPT_IN: "true"}
    assert (
        found.evidence["scale_to_zero_from"]
        == f"{OPT_IN}=true on its pod template (ReplicaSet serving/llm-5d8)"
    )
    assert "Opted in to scale-to-zero by" in found.summary


def test_an_opt_in_from_the_namespace_is_named_with_its_value() -> None:
    found = idle(rs({}), pod("llm-5d8-a", {}), namespace={OPT_IN: "yes"})
    assert found.resource.stop_blocker is None
    assert found.armed_by == {OPT_IN: "yes"}
    assert found.evidence["scale_to_zero_from"] == f"{OPT_IN}=yes on namespace serving"


def test_the_template_says_no_over_a_namespace_that_says_yes() -> None:
    found = idle(rs({OPT_IN: "false"}), pod("llm-5d8-a", {OPT_IN: "false"}), namespace={OPT_IN: "true"})
    assert "not opted in" in (found.resource.stop_blocker or "")
    assert found.armed_by == {}


def test_a_pod_relabelled_scale_to_zero_false_against_an_opted_in_template_arms_nothing() -> None:
    found = idle(rs({OPT_IN: "true"}), pod("llm-5d8-a", {OPT_IN: "false"}))
    assert "disagree" in (found.resource.stop_blocker or "")


def test_a_replica_sets_own_labels_edited_after_the_template_do_not_opt_it_in() -> None:
    found = idle(rs({}, own={OPT_IN: "true"}), pod("llm-5d8-a", {}))
    assert "not opted in" in (found.resource.stop_blocker or "")
    assert found.armed_by == {}


def test_a_statefulsets_own_labels_opt_it_in() -> None:
    sts = eks.controller_of(
        "StatefulSet",
        {
            "metadata": {"name": "db", "namespace": "serving", "labels": {OPT_IN: "true"}},
            "spec": {"replicas": 1, "template": {"metadata": {"labels": {"app": "db"}}}},
        },
    )
    found = idle({("StatefulSet", "serving", "db"): sts}, pod("db-0", {"app": "db"}, ("StatefulSet", "db")))
    assert found.resource.stop_blocker is None
    assert found.evidence["scale_to_zero_from"] == f"{OPT_IN}=true on the StatefulSet's own labels"


def test_a_statefulset_not_listed_is_never_scaled_on_its_pods_labels() -> None:
    found = idle({}, pod("db-0", {OPT_IN: "true"}, ("StatefulSet", "db")), namespace={OPT_IN: "true"})
    assert "pod template could not be read" in (found.resource.stop_blocker or "")


def test_the_census_reads_the_owners_labels_never_a_pods() -> None:
    view = eks.ClusterView(
        "c", "1", "us-east-1", "arn", (NODE,), (pod("llm-5d8-a", {OPT_IN: "true"}),), rs({}), {"serving": {}}
    )
    [(workload, pods)] = eks.gpu_workloads(view)
    assert eks.arming_labels(view, workload, pods) == {}
    assert workload.created == datetime(2026, 11, 20, 2, 0, tzinfo=UTC)
