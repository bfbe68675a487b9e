"""The EKS verdicts (detect/eks.py) on plain data, and the EKS bearer token (aws/eks.py)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from costguard.aws.eks import bearer_token
from costguard.detect import eks
from costguard.detect.gpu import Thresholds, read_gpus
from costguard.local.kube_responder import valid_token
from costguard.model import Reason

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
T = Thresholds()
NODE = eks.Node("gpu-a", "i-0123456789abcdef0", "g5.12xlarge", 4, {"karpenter.sh/nodepool": "gpu"})


def series(level: float, minutes: int = 180) -> list[tuple[datetime, float]]:
    return [(NOW - timedelta(minutes=m), level) for m in range(minutes - 1, -1, -1)]


def pod(
    name: str, owner: tuple[str, str] | None = None, *, gpus: int = 1, ready: bool = True, age: int = 600
) -> eks.Pod:
    return eks.Pod(
        "serving",
        name,
        "gpu-a",
        "Running",
        ready,
        gpus,
        NOW - timedelta(minutes=age),
        owner[0] if owner else None,
        owner[1] if owner else None,
        {"team": "ml-serving"},
    )


def view(*pods: eks.Pod, namespace_labels: dict[str, str] | None = None) -> eks.ClusterView:
    rs = eks.Controller("ReplicaSet", "serving", "llm-5d8", 2, "Deployment", "llm", {"app": "llm"})
    return eks.ClusterView(
        "c",
        "123456789012",
        "us-east-1",
        "arn:aws:eks:us-east-1:123456789012:cluster/c",
        (NODE,),
        pods,
        {("ReplicaSet", "serving", "llm-5d8"): rs},
        {"serving": namespace_labels or {}},
    )


def judge(v: eks.ClusterView, readings: dict[tuple[str, str], object]) -> list:  # type: ignore[type-arg]
    return eks.workload_findings(
        v,
        readings,
        price_of=lambda t: 5.672,
        thresholds=T,
        now=NOW,
        team_label="team",  # type: ignore[arg-type]
        protect_tag_key="costguard:protect",
    )


def test_a_deployments_idle_pods_are_one_finding_priced_at_their_share_of_the_node() -> None:
    pods = (pod("llm-5d8-a", ("ReplicaSet", "llm-5d8")), pod("llm-5d8-b", ("ReplicaSet", "llm-5d8")))
    readings = {p.key: read_gpus({0: series(1.0)}, NOW, T, 1) for p in pods}
    [finding] = judge(view(*pods), readings)
    assert finding.reason is Reason.POD_GPU_IDLE
    assert finding.resource.id == "c/serving/Deployment/llm"
    assert finding.resource.tags["team"] == "ml-serving"
    assert finding.hourly_usd == pytest.approx(5.672 / 2)
    assert "not opted in" in (finding.resource.stop_blocker or "")


def test_a_workload_opted_in_through_its_namespace_may_be_scaled() -> None:
    pods = (pod("llm-5d8-a", ("ReplicaSet", "llm-5d8")),)
    readings = {p.key: read_gpus({0: series(1.0)}, NOW, T, 1) for p in pods}
    [finding] = judge(view(*pods, namespace_labels={eks.SCALE_TO_ZERO_LABEL: "true"}), readings)
    assert finding.resource.stop_blocker is None
    assert finding.evidence["restore"] == "kubectl -n serving scale deployment/llm --replicas=2"


@pytest.mark.parametrize(
    "starting", [pod("train-0", ("Job", "train"), age=10), pod("train-0", ("Job", "train"), ready=False)]
)
def test_a_job_still_starting_is_not_judged(starting: eks.Pod) -> None:
    readings = {starting.key: read_gpus({0: series(1.0, 10)}, NOW, T, 1)}
    assert judge(view(starting), readings) == []


def test_a_pod_with_a_silent_gpu_is_partial_never_idle() -> None:
    two = pod("solo", gpus=2)
    readings = {two.key: read_gpus({0: series(1.0)}, NOW, T, 2)}
    [finding] = judge(view(two), readings)
    assert finding.reason is Reason.GPU_METRICS_PARTIAL
    assert not finding.remediable


def test_a_job_is_reported_never_scaled() -> None:
    job = pod("train-0", ("Job", "train"))
    [finding] = judge(view(job), {job.key: read_gpus({0: series(1.0)}, NOW, T, 1)})
    assert "never scaled or deleted" in (finding.resource.stop_blocker or "")


def test_a_gpu_node_with_daemonsets_only_is_unused_and_one_with_a_request_in_the_window_is_not() -> None:
    daemon = eks.Pod("kube-system", "dp-gpu-a", "gpu-a", "Running", True, 0, NOW, "DaemonSet", "dp")
    [finding] = eks.node_findings(
        view(daemon), {"gpu-a": series(0.0)}, price_of=lambda t: 5.672, thresholds=T, now=NOW
    )
    assert finding.reason is Reason.GPU_NODE_UNUSED
    assert "empty but for 1 daemonset pod" in finding.summary
    assert finding.evidence["managed_by"] == "Karpenter NodePool gpu"
    requested_lately = series(0.0)[:-5] + [(NOW - timedelta(minutes=m), 25.0) for m in range(4, -1, -1)]
    assert (
        eks.node_findings(
            view(daemon), {"gpu-a": requested_lately}, price_of=lambda t: 1.0, thresholds=T, now=NOW
        )
        == []
    )
    assert eks.node_findings(view(daemon), {}, price_of=lambda t: 1.0, thresholds=T, now=NOW) == []  # no data


def test_pod_json_is_read_with_its_gpu_request_and_controller() -> None:
    item = {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "ownerReferences": [{"kind": "Job", "name": "j", "controller": True}],
        },
        "spec": {
            "nodeName": "n",
            "containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}, {"resources": {}}],
        },
        "status": {
            "phase": "Running",
            "startTime": "2026-11-20T10:00:00Z",
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    read = eks.pod_of(item)
    assert (read.gpus, read.owner_kind, read.owner_name, read.ready) == (2, "Job", "j", True)


def test_the_bearer_token_is_a_presigned_get_caller_identity_signing_the_cluster_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    token = bearer_token("ml-platform", "us-east-1")
    assert token.startswith("k8s-aws-v1.") and "=" not in token
    encoded = token.removeprefix("k8s-aws-v1.")
    url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
    query = parse_qs(urlsplit(url).query)
    assert urlsplit(url).netloc == "sts.us-east-1.amazonaws.com"
    assert query["Action"] == ["GetCallerIdentity"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0].split(";")
    assert query["X-Amz-Expires"] == ["60"]
    assert valid_token(f"Bearer {token}")
    assert not valid_token("Bearer k8s-aws-v1.bm90IGEgdXJs")


def test_the_kubernetes_client_stays_out_of_the_sweeps_cold_import() -> None:
    import subprocess
    import sys

    code = "import sys, costguard.flows.eks; print('kubernetes' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
