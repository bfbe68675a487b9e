"""EKS clusters in a world file: nodes with instance types, workloads whose pods request GPUs (or not), namespaces
with labels, and the GPU series their pods publish. Turned here into what the Kubernetes API lists
(local/kube_responder.py serves it) and what Container Insights publishes."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Pattern = Literal["idle", "busy", "starved", "none"]
# What a world cluster's API does with costguard: answers it, is private (DescribeCluster says so), or refuses its
# token (no access entry).
Reach = Literal["yes", "private", "no_access"]
LOCAL_GPUS = {"p4d.24xlarge": 8, "p5.48xlarge": 8, "g5.xlarge": 1, "g5.12xlarge": 4, "g5.48xlarge": 8}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EksNode(_Strict):
    name: str
    instance_type: str
    instance_id: str = Field(pattern=r"^i-[0-9a-f]{8,17}$")
    gpus: int | None = Field(default=None, ge=0, description="allocatable nvidia.com/gpu; default by type")
    managed_by: Literal["karpenter", "nodegroup", "self"] = "nodegroup"
    pool: str = "gpu"
    labels: dict[str, str] = Field(default_factory=dict)

    @property
    def gpu_count(self) -> int:
        if self.gpus is not None:
            return self.gpus
        return LOCAL_GPUS.get(self.instance_type, 8 if self.instance_type.startswith("p") else 0)


class EksWorkload(_Strict):
    """A workload's pods: ``replicas`` of them, placed on ``nodes`` in turn."""

    kind: Literal["Deployment", "StatefulSet", "Job", "Notebook", "Pod", "DaemonSet"]
    name: str
    namespace: str = "default"
    replicas: int = Field(default=1, ge=0)
    gpus_per_pod: int = Field(default=1, ge=0)
    nodes: list[str] = Field(min_length=1)
    # Its pod template's labels (a StatefulSet's own labels too): what its owner wrote, on each of its pods.
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    pod_labels: dict[int, dict[str, str]] = Field(
        default_factory=dict,
        description="labels set on one of its pods since (kubectl label pod --overwrite), by the pod's index: "
        "over its template's on that pod alone",
    )
    gpu_pattern: Pattern = "busy"
    running_minutes: int = Field(default=600, ge=0, description="how long its pods have run")
    ready: bool = True


class EksNamespace(_Strict):
    name: str
    labels: dict[str, str] = Field(default_factory=dict)


class EksCluster(_Strict):
    name: str
    reachable: Reach = "yes"
    nodes: list[EksNode] = Field(default_factory=list)
    namespaces: list[EksNamespace] = Field(default_factory=list)
    workloads: list[EksWorkload] = Field(default_factory=list)


def _rs_name(workload: EksWorkload) -> str:
    return f"{workload.name}-5d8f7b9c6"


def pods_of(workload: EksWorkload) -> list[tuple[str, str, str, str]]:
    """(pod name, node, owner kind, owner name) of each of its pods."""
    out = []
    for n in range(workload.replicas):
        node = workload.nodes[n % len(workload.nodes)]
        if workload.kind == "Deployment":
            out.append((f"{_rs_name(workload)}-{n:05d}"[:63], node, "ReplicaSet", _rs_name(workload)))
        elif workload.kind in ("StatefulSet", "Notebook"):
            out.append((f"{workload.name}-{n}", node, "StatefulSet", workload.name))
        elif workload.kind == "Job":
            out.append((f"{workload.name}-{n:05d}", node, "Job", workload.name))
        elif workload.kind == "DaemonSet":
            for each in workload.nodes:
                out.append((f"{workload.name}-{each}"[:63], each, "DaemonSet", workload.name))
            break
        else:
            out.append((workload.name if workload.replicas == 1 else f"{workload.name}-{n}", node, "", ""))
    return out


def _meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **{k: v for k, v in extra.items() if v}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def api_objects(cluster: EksCluster, now: datetime) -> dict[str, list[dict[str, Any]]]:
    """The cluster's objects as the Kubernetes API lists them, by resource (nodes, pods, namespaces,
    replicasets, statefulsets, deployments)."""
    objects: dict[str, list[dict[str, Any]]] = {
        "nodes": [],
        "pods": [],
        "namespaces": [],
        "replicasets": [],
        "statefulsets": [],
        "deployments": [],
    }
    for node in cluster.nodes:
        labels = {"node.kubernetes.io/instance-type": node.instance_type, **node.labels}
        if node.managed_by == "karpenter":
            labels["karpenter.sh/nodepool"] = node.pool
        elif node.managed_by == "nodegroup":
            labels["eks.amazonaws.com/nodegroup"] = node.pool
        objects["nodes"].append(
            {
                "metadata": _meta(node.name, labels=labels),
                "spec": {"providerID": f"aws:///us-east-1a/{node.instance_id}"},
                "status": {"allocatable": {"nvidia.com/gpu": str(node.gpu_count), "cpu": "96"}},
            }
        )
    names = {ns.name for ns in cluster.namespaces} | {w.namespace for w in cluster.workloads}
    given = {ns.name: ns.labels for ns in cluster.namespaces}
    for name in sorted(names):
        objects["namespaces"].append({"metadata": _meta(name, labels=given.get(name, {}))})
    for workload in cluster.workloads:
        objects["pods"] += [pod for pod in _pods(workload, now)]
        owner = {"kind": workload.kind, "name": workload.name, "controller": True}
        # The pod template (spec.template.metadata.labels): what each new pod is labelled with.
        template = {"metadata": {"labels": dict(workload.labels)}}
        created = (now - timedelta(minutes=workload.running_minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
        if workload.kind == "Deployment":
            objects["deployments"].append(
                {
                    "metadata": _meta(workload.name, workload.namespace, labels=workload.labels),
                    "spec": {"replicas": workload.replicas, "template": template},
                }
            )
            objects["replicasets"].append(
                {
                    "metadata": _meta(
                        _rs_name(workload),
                        workload.namespace,
                        labels=workload.labels,
                        annotations=workload.annotations,
                        ownerReferences=[owner],
                        creationTimestamp=created,
                    ),
                    "spec": {"replicas": workload.replicas, "template": template},
                }
            )
        elif workload.kind in ("StatefulSet", "Notebook"):
            notebook = {
                "kind": "Notebook",
                "name": workload.name,
                "apiVersion": "kubeflow.org/v1",
                "controller": True,
            }
            objects["statefulsets"].append(
                {
                    "metadata": _meta(
                        workload.name,
                        workload.namespace,
                        labels=workload.labels,
                        annotations=workload.annotations,
                        ownerReferences=[notebook] if workload.kind == "Notebook" else None,
                        creationTimestamp=created,
                    ),
                    "spec": {"replicas": workload.replicas, "template": template},
                }
            )
    return objects


def _pods(workload: EksWorkload, now: datetime) -> list[dict[str, Any]]:
    started = (now - timedelta(minutes=workload.running_minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
    gpus = {"nvidia.com/gpu": str(workload.gpus_per_pod)} if workload.gpus_per_pod else {}
    out = []
    for n, (name, node, owner_kind, owner_name) in enumerate(pods_of(workload)):
        owners = [{"kind": owner_kind, "name": owner_name, "controller": True}] if owner_kind else None
        labels = {**workload.labels, **workload.pod_labels.get(n, {})}
        out.append(
            {
                "metadata": _meta(name, workload.namespace, labels=labels, ownerReferences=owners),
                "spec": {
                    "nodeName": node,
                    "containers": [{"name": "main", "resources": {"requests": gpus, "limits": gpus}}],
                },
                "status": {
                    "phase": "Running",
                    "startTime": started,
                    "conditions": [{"type": "Ready", "status": "True" if workload.ready else "False"}],
                },
            }
        )
    return out
