"""GPUs on EKS: pods holding GPUs they do not use or under-feed, GPU nodes no GPU pod needs. Pure.

The cluster comes in as the Kubernetes API lists it (nodes, pods, the owners of pods, namespaces), the GPU series as
Container Insights publishes them (read by flows/eks.py). Each pod is judged by detect/gpu.read_gpus, the EC2
sweep's own rules: every GPU under the idle threshold for the idle window is idle; a GPU that publishes nothing
makes the reading partial, never idle; a pod that has not run for the window yet is not judged.

Findings are per workload (the Deployment, StatefulSet, Job, notebook or bare pod that owns the GPU pods): that is
what a person restores and what costguard scales. A workload is idle when every one of its GPU pods is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from costguard.detect.gpu import MIN_COVERAGE, GpuReading, Thresholds, Verdict, numbers
from costguard.detect.hyperpod import provider_instance_id
from costguard.events.common import to_datetime
from costguard.model import MARK_TAG_KEY, Finding, Reason, Resource, ResourceKind
from costguard.policy import SNOOZE_TAG_KEY

GPU_RESOURCE = "nvidia.com/gpu"
# Opt-in to scale-to-zero, on the workload's pod template (a StatefulSet's own labels too) or on its namespace: what
# the workload's owner wrote. Never read from a pod's own labels (anyone allowed `kubectl label pod` writes those).
# Nothing else is ever scaled.
SCALE_TO_ZERO_LABEL = "costguard.io/scale-to-zero"
# A Kubernetes label key cannot hold a colon: costguard's tags are read from these. Protect counts from any source:
# a pod, the workload's template or own labels, its namespace.
PROTECT_LABEL = "costguard.io/protect"
# costguard's own labels: a pod whose value of one differs from its template's was relabelled since it was made.
COSTGUARD_LABELS = (SCALE_TO_ZERO_LABEL, PROTECT_LABEL)
SNOOZE_ANNOTATION = "costguard.io/snooze-until"
SCALABLE_KINDS = ("Deployment", "StatefulSet")
_TRUE = {"true", "yes", "1", "on"}
_KARPENTER_POOL = "karpenter.sh/nodepool"
_NODE_GROUP = "eks.amazonaws.com/nodegroup"
_INSTANCE_TYPE = "node.kubernetes.io/instance-type"

METRICS_HELP = (
    "Install the Amazon CloudWatch Observability EKS add-on (Container Insights with enhanced observability; its "
    "accelerated compute metrics are on by default, accelerated_compute_metrics in its configuration) and the "
    "NVIDIA device plugin: docs/eks.md, 'What the cluster needs'."
)


@dataclass(frozen=True)
class Node:
    name: str
    instance_id: str | None
    instance_type: str | None
    gpus: int  # allocatable nvidia.com/gpu, else the instance type's GPU count
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def managed_by(self) -> str:
        """What launches and removes it: a Karpenter NodePool, a managed node group, or neither."""
        if pool := self.labels.get(_KARPENTER_POOL):
            return f"Karpenter NodePool {pool}"
        if group := self.labels.get(_NODE_GROUP):
            return f"managed node group {group}"
        return "a self-managed node group"


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    node: str | None
    phase: str
    ready: bool
    gpus: int
    started: datetime | None = None
    owner_kind: str | None = None
    owner_name: str | None = None
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True)
class Controller:
    """A ReplicaSet or StatefulSet: what owns pods, and what owns it."""

    kind: str
    namespace: str
    name: str
    replicas: int | None = None
    owner_kind: str | None = None
    owner_name: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    # Its pod template's labels (spec.template.metadata.labels), what each pod it makes carries; None: not listed.
    template_labels: dict[str, str] | None = None
    # metadata.creationTimestamp (a Deployment makes a new ReplicaSet for each template it is given)
    created: datetime | None = None

    @property
    def template(self) -> dict[str, str]:
        """Its pod template's labels; for a listing without the template, its own (a Deployment's controller
        copies the template's labels to the ReplicaSet's)."""
        return self.template_labels if self.template_labels is not None else self.labels


@dataclass(frozen=True)
class Workload:
    """The top owner of GPU pods: what a finding is about."""

    kind: str  # Deployment, StatefulSet, Job, CronJob, a notebook CR's kind, DaemonSet or Pod
    namespace: str
    name: str
    replicas: int | None = None
    managed_by: str | None = None  # a controller above it that would undo a scale (a notebook CR, say)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    # What its owner wrote for its pods (the pod template's labels) and where it was read ("ReplicaSet ns/name"):
    # None when no controller of it was listed (a bare pod, a Job, an owner not read).
    template: dict[str, str] | None = None
    template_from: str | None = None
    # When its controller (ReplicaSet or StatefulSet) was created: what costguard's arming census compares.
    created: datetime | None = None


@dataclass(frozen=True)
class ClusterView:
    """One cluster as its API lists it."""

    name: str
    account: str
    region: str
    arn: str
    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...]
    controllers: dict[tuple[str, str, str], Controller]  # (kind, namespace, name)
    namespaces: dict[str, dict[str, str]]  # name -> labels

    @property
    def gpu_pods(self) -> list[Pod]:
        """Running pods that request GPUs."""
        return [p for p in self.pods if p.gpus > 0 and p.phase == "Running" and p.node]

    def node(self, name: str | None) -> Node | None:
        return next((n for n in self.nodes if n.name == name), None)

    def workload_of(self, pod: Pod) -> Workload:
        """The pod's top owner: ReplicaSet -> Deployment, StatefulSet (-> a notebook CR), Job, or the pod."""
        if pod.owner_kind is None or pod.owner_name is None:
            return Workload("Pod", pod.namespace, pod.name, labels=pod.labels)
        if pod.owner_kind in ("ReplicaSet", "StatefulSet"):
            own = self.controllers.get((pod.owner_kind, pod.namespace, pod.owner_name))
            if own is None:
                return Workload(pod.owner_kind, pod.namespace, pod.owner_name)
            where = f"{own.kind} {own.namespace}/{own.name}"
            if own.kind == "ReplicaSet" and own.owner_kind == "Deployment" and own.owner_name:
                return Workload(
                    "Deployment",
                    pod.namespace,
                    own.owner_name,
                    own.replicas,
                    labels=own.labels,
                    annotations=own.annotations,
                    template=own.template,
                    template_from=where,
                    created=own.created,
                )
            if own.kind == "StatefulSet" and own.owner_kind and own.owner_name:
                # A notebook CR (Kubeflow's Notebook, say) owns its StatefulSet: the notebook is the workload,
                # and only its controller may stop it.
                return Workload(
                    own.owner_kind,
                    pod.namespace,
                    own.owner_name,
                    labels=own.labels,
                    template=own.template,
                    template_from=where,
                    created=own.created,
                )
            return Workload(
                own.kind,
                pod.namespace,
                own.name,
                own.replicas,
                None,
                own.labels,
                own.annotations,
                template=own.template,
                template_from=where,
                created=own.created,
            )
        return Workload(pod.owner_kind, pod.namespace, pod.owner_name)


# -- from the Kubernetes API's JSON ----------------------------------------------------------------


def gpu_count(value: Any) -> int:
    """A quantity of nvidia.com/gpu (whole devices: "1", 2, "1000m")."""
    text = str(value or "0").strip()
    try:
        return int(text[:-1]) // 1000 if text.endswith("m") else int(float(text))
    except ValueError:
        return 0


def node_of(item: Mapping[str, Any], gpus_of_type: Callable[[str | None], int]) -> Node:
    meta, status = item.get("metadata") or {}, item.get("status") or {}
    labels = dict(meta.get("labels") or {})
    instance_type = labels.get(_INSTANCE_TYPE)
    # An EC2 node's instance, or a HyperPod node's (aws:///<az>/sagemaker/cluster/hyperpod-<id>-<instance>)
    instance_id = provider_instance_id((item.get("spec") or {}).get("providerID"))
    gpus = gpu_count((status.get("allocatable") or {}).get(GPU_RESOURCE)) or gpus_of_type(instance_type)
    return Node(str(meta.get("name", "")), instance_id, instance_type, gpus, labels)


def pod_of(item: Mapping[str, Any]) -> Pod:
    meta, spec, status = item.get("metadata") or {}, item.get("spec") or {}, item.get("status") or {}
    gpus = 0
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        asked = (resources.get("requests") or {}).get(GPU_RESOURCE) or (resources.get("limits") or {}).get(
            GPU_RESOURCE
        )
        gpus += gpu_count(asked)
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    owner = owner or next(iter(meta.get("ownerReferences") or []), None)
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    started = status.get("startTime")
    return Pod(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        node=spec.get("nodeName"),
        phase=str(status.get("phase", "")),
        ready=ready,
        gpus=gpus,
        started=to_datetime(started) if started else None,
        owner_kind=owner.get("kind") if owner else None,
        owner_name=owner.get("name") if owner else None,
        labels=dict(meta.get("labels") or {}),
    )


def controller_of(kind: str, item: Mapping[str, Any]) -> Controller:
    meta, spec = item.get("metadata") or {}, item.get("spec") or {}
    owner = next(iter(meta.get("ownerReferences") or []), None)
    template = spec.get("template")
    created = meta.get("creationTimestamp")
    return Controller(
        kind=kind,
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        replicas=spec.get("replicas"),
        owner_kind=owner.get("kind") if owner else None,
        owner_name=owner.get("name") if owner else None,
        # A ReplicaSet carries its pod template's labels (copied by the Deployment's controller) and the template
        # itself: the template is what its owner wrote for its pods, read for the opt-in and protect labels.
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        created=to_datetime(created) if created else None,
        template_labels=(
            dict((template.get("metadata") or {}).get("labels") or {})
            if isinstance(template, Mapping)
            else None
        ),
    )


# -- verdicts ------------------------------------------------------------------------------------------


def pod_starting(pod: Pod, thresholds: Thresholds, now: datetime) -> bool:
    """A pod not ready yet, or not running for the idle window: never judged (a Job still starting is not idle)."""
    return not pod.ready or pod.started is None or now - pod.started < thresholds.idle_window


def _true(value: str | None) -> bool:
    return value is not None and value.strip().lower() in _TRUE


def workload_id(cluster: str, namespace: str, kind: str, name: str) -> str:
    """A workload's resource id (its key, and the key of its mark in the state table): one spelling for both."""
    return f"{cluster}/{namespace}/{kind}/{name}"


@dataclass(frozen=True)
class Provenance:
    """Where a workload's protect and scale-to-zero labels were read, as said in its message.

    ``protected_by``: each source that says protect=true (a pod counts only where it differs from its template:
    the others repeat the template). ``opt_in``: the scale-to-zero value as its owner wrote it (the pod template,
    a StatefulSet's own labels, else the namespace), ``opt_in_from`` where. ``disagreements``: pods whose
    costguard labels differ from their template's (relabelled since they were made): they arm nothing.
    ``template_known``: the workload's pod template was listed (else nothing about it can be compared)."""

    protected_by: tuple[str, ...] = ()
    opt_in: str | None = None
    opt_in_from: str | None = None
    disagreements: tuple[str, ...] = ()
    template_known: bool = True

    @property
    def opted_in(self) -> bool:
        return _true(self.opt_in)


def _some(items: Sequence[str], most: int = 3) -> str:
    shown = "; ".join(items[:most])
    return shown + (f"; and {len(items) - most} more" if len(items) > most else "")


def provenance(workload: Workload, pods: Sequence[Pod], namespace_labels: Mapping[str, str]) -> Provenance:
    """Where the workload's protect and opt-in labels come from. Pure.

    Protect counts from any source: any of its pods, its pod template, its own labels, its namespace. The opt-in
    counts only from what its owner wrote: the pod template (a StatefulSet's own labels too), else the namespace;
    never from a pod's own labels, which anyone allowed ``kubectl label pod`` can write."""
    template = workload.template
    in_template = (
        f"its pod template ({workload.template_from})" if workload.template_from else "its pod template"
    )
    own_from = f"the {workload.kind}'s own labels"
    namespace_from = f"namespace {workload.namespace}"
    protected: list[str] = []
    disagreements: list[str] = []
    if template is not None and _true(template.get(PROTECT_LABEL)):
        protected.append(f"{PROTECT_LABEL}={template[PROTECT_LABEL]} on {in_template}")
    own = workload.labels
    repeated = workload.kind == "Pod" or (
        template is not None and own.get(PROTECT_LABEL) == template.get(PROTECT_LABEL)
    )
    if _true(own.get(PROTECT_LABEL)) and not repeated:
        protected.append(f"{PROTECT_LABEL}={own[PROTECT_LABEL]} on {own_from}")
    if _true(namespace_labels.get(PROTECT_LABEL)):
        protected.append(f"{PROTECT_LABEL}={namespace_labels[PROTECT_LABEL]} on {namespace_from}")
    for pod in pods:
        value = pod.labels.get(PROTECT_LABEL)
        if _true(value) and (template is None or value != template.get(PROTECT_LABEL)):
            protected.append(f"{PROTECT_LABEL}={value} on pod {pod.name}")
        if template is None:
            continue
        for key in COSTGUARD_LABELS:
            if pod.labels.get(key) != template.get(key):
                disagreements.append(
                    f"pod {pod.name} has "
                    + (f"{key}={pod.labels[key]}" if key in pod.labels else f"no {key}")
                    + ", its template "
                    + (f"{key}={template[key]}" if key in template else "none")
                )
    opt_in: str | None = None
    opt_in_from: str | None = None
    sources: list[tuple[str, Mapping[str, str]]] = [(in_template, template or {})]
    if workload.kind == "StatefulSet":
        sources.append((own_from, own))
    sources.append((namespace_from, namespace_labels))
    for where, labels in sources:
        if SCALE_TO_ZERO_LABEL in labels:
            opt_in = labels[SCALE_TO_ZERO_LABEL]
            opt_in_from = f"{SCALE_TO_ZERO_LABEL}={opt_in} on {where}"
            break
    return Provenance(tuple(protected), opt_in, opt_in_from, tuple(disagreements), template is not None)


def provenance_said(said: Provenance) -> str:
    """The sentence of a workload's message that says where its protect or opt-in was read."""
    if said.protected_by:
        text = f" Protected by {_some(said.protected_by)}: never scaled."
    elif said.opted_in and said.opt_in_from:
        text = f" Opted in to scale-to-zero by {said.opt_in_from}."
    else:
        text = ""
    if said.disagreements:
        text += (
            f" Its pods' costguard labels disagree with its pod template's ({_some(said.disagreements)}): a pod's "
            "own labels never opt it in or arm anything."
        )
    return text


def gpu_workloads(view: ClusterView) -> list[tuple[Workload, list[Pod]]]:
    """The workloads of the cluster's running GPU pods, each with its pods."""
    grouped: dict[tuple[str, str, str], tuple[Workload, list[Pod]]] = {}
    for pod in view.gpu_pods:
        workload = view.workload_of(pod)
        grouped.setdefault((workload.kind, workload.namespace, workload.name), (workload, []))[1].append(pod)
    return list(grouped.values())


def arming_labels(view: ClusterView, workload: Workload, pods: Sequence[Pod]) -> dict[str, str]:
    """The owner's labels that arm a scale to zero, as read from its pod template or namespace (never a pod's):
    what the arming census records (act/arming.py), whatever their value; a finding's ``armed_by`` names it when
    it opts in."""
    said = provenance(workload, pods, view.namespaces.get(workload.namespace, {}))
    return {SCALE_TO_ZERO_LABEL: said.opt_in} if said.opt_in is not None else {}


def workload_resource(
    view: ClusterView,
    workload: Workload,
    pods: Sequence[Pod],
    *,
    team_label: str,
    protect_tag_key: str,
    marks: Mapping[str, str],
) -> Resource:
    """The workload as costguard's decisions see it: its team as the routing tag, its protect label (from any
    source) and snooze annotation as costguard's tags, its mark (kept in the state table) as the mark tag, and why
    it may not be scaled, if it may not."""
    namespace_labels = view.namespaces.get(workload.namespace, {})
    labels = {**namespace_labels, **workload.labels, **(pods[0].labels if pods else {})}
    tags: dict[str, str] = {}
    team = (pods[0].labels if pods else {}).get(team_label) or workload.labels.get(team_label)
    team = team or namespace_labels.get(team_label)
    if team:
        tags[team_label] = team
    if owner := labels.get("owner"):
        tags["owner"] = owner
    said = provenance(workload, pods, namespace_labels)
    if said.protected_by:
        tags[protect_tag_key] = "true"
    if snooze := workload.annotations.get(SNOOZE_ANNOTATION):
        tags[SNOOZE_TAG_KEY] = snooze
    key_id = workload_id(view.name, workload.namespace, workload.kind, workload.name)
    resource = Resource(
        kind=ResourceKind.EKS_WORKLOAD,
        id=key_id,
        account=view.account,
        region=view.region,
        name=f"{workload.kind} {workload.namespace}/{workload.name} (cluster {view.name})",
        arn=view.arn,
        instance_type=next((n.instance_type for p in pods if (n := view.node(p.node))), None),
        instance_count=max(1, len(pods)),
        tags=tags,
        stop_blocker=scale_blocker(workload, said),
        # Its current run: since its oldest pod started (a mark from before a scale to zero and back up is void).
        started=min((p.started for p in pods if p.started is not None), default=None),
    )
    if mark := marks.get(resource.key):
        resource = resource.model_copy(update={"tags": {**tags, MARK_TAG_KEY: mark}})
    return resource


def scale_blocker(workload: Workload, said: Provenance) -> str | None:
    """Why costguard may not scale this workload to zero: it scales Deployments and StatefulSets that no other
    controller manages, that nothing protects, whose owner opted them in (template or namespace) and whose pods'
    costguard labels agree with their template's; nothing else."""
    if workload.kind == "Notebook":
        return (
            "a notebook is stopped by its own controller, never by costguard (Kubeflow: annotate the Notebook "
            "kubeflow-resource-stopped=true)"
        )
    if workload.kind not in SCALABLE_KINDS:
        return (
            f"a {workload.kind} is never scaled or deleted by costguard (it scales opted-in Deployments and "
            "StatefulSets only)"
        )
    if workload.managed_by:
        return f"managed by {workload.managed_by}, which would scale it back: stop it there"
    if said.protected_by:
        return f"protected by {_some(said.protected_by)}"
    if not said.template_known:
        return f"its {workload.kind}'s pod template could not be read, so neither could its opt-in"
    disagree = (
        f"its pods' costguard labels disagree with its pod template's ({_some(said.disagreements)}): costguard "
        "scales only on what its owner wrote, in the pod template or the namespace"
    )
    if not said.opted_in:
        return (
            f"not opted in to scale-to-zero (label the {workload.kind}'s pod template or its namespace "
            f"{SCALE_TO_ZERO_LABEL}=true; a pod's own labels do not count)"
            + (f"; {disagree}" if said.disagreements else "")
        )
    if said.disagreements:
        return disagree
    return None


def restore_command(workload: Workload) -> str | None:
    if workload.kind not in SCALABLE_KINDS or workload.replicas is None:
        return None
    return (
        f"kubectl -n {workload.namespace} scale {workload.kind.lower()}/{workload.name} "
        f"--replicas={workload.replicas}"
    )


def pod_share_usd(
    view: ClusterView, pod: Pod, price_of: Callable[[str | None], float | None]
) -> float | None:
    """The node's hourly price times the share of its GPUs the pod requests."""
    node = view.node(pod.node)
    if node is None or not node.gpus:
        return None
    price = price_of(node.instance_type)
    return None if price is None else price * min(pod.gpus, node.gpus) / node.gpus


def workload_findings(
    view: ClusterView,
    readings: Mapping[tuple[str, str], GpuReading],
    *,
    price_of: Callable[[str | None], float | None],
    thresholds: Thresholds,
    now: datetime,
    team_label: str,
    protect_tag_key: str,
    marks: Mapping[str, str] | None = None,
    event_id: str | None = None,
) -> list[Finding]:
    """At most one verdict per workload of GPU pods (idle, starved, partial), plus a cancelled mark when a marked
    one works again."""
    findings: list[Finding] = []
    for workload, pods in gpu_workloads(view):
        resource = workload_resource(
            view, workload, pods, team_label=team_label, protect_tag_key=protect_tag_key, marks=marks or {}
        )
        judged = [readings.get(p.key) for p in pods if not pod_starting(p, thresholds, now)]
        if len(judged) < len(pods) or any(r is None for r in judged):
            continue  # a pod still starting, or one read no series for: the workload is not judged this time
        said = provenance(workload, pods, view.namespaces.get(workload.namespace, {}))
        found = _verdict(
            view, workload, pods, [r for r in judged if r is not None], resource, said, price_of, thresholds
        )
        shares = [pod_share_usd(view, p, price_of) for p in pods]
        hourly = (
            round(sum(s for s in shares if s is not None), 4) if any(s is not None for s in shares) else None
        )
        evidence: dict[str, object] = {
            "cluster": view.name,
            "namespace": workload.namespace,
            "workload": f"{workload.kind}/{workload.name}",
            "team": resource.tags.get(team_label),
            "pods": [p.name for p in pods],
            "gpus_requested": sum(p.gpus for p in pods),
            "nodes": sorted(
                {f"{p.node} ({n.instance_type}, {n.gpus} GPUs)" for p in pods if (n := view.node(p.node))}
            ),
        }
        if found is not None:
            reason, summary, extra, remediable = found
            findings.append(
                Finding(
                    reason=reason,
                    resource=resource,
                    summary=summary,
                    observed_at=now,
                    event_id=event_id,
                    hourly_usd=hourly,
                    remediable=remediable,
                    # The owner's label that arms a scale to zero, as read from the template or the namespace
                    # (act/arming.py vouches for it against its value as costguard first saw it).
                    armed_by=(
                        {SCALE_TO_ZERO_LABEL: said.opt_in}
                        if reason is Reason.POD_GPU_IDLE and remediable and said.opted_in and said.opt_in
                        else {}
                    ),
                    repeat_scope=str(extra.pop("repeat_scope")) if "repeat_scope" in extra else None,
                    evidence=evidence | extra,
                )
            )
        verdicts = {r.verdict for r in judged if r is not None}
        if MARK_TAG_KEY in resource.tags and verdicts & {Verdict.BUSY, Verdict.STARVED, Verdict.PARTIAL}:
            findings.append(
                Finding(
                    reason=Reason.GPU_ACTIVE_AGAIN,
                    resource=resource,
                    summary=f"{resource.display_name} uses its GPUs again: its pending scale-to-zero is cancelled.",
                    observed_at=now,
                    event_id=event_id,
                    hourly_usd=hourly,
                    cancels_mark=True,
                    evidence=evidence,
                )
            )
    return findings


_Verdict = tuple[Reason, str, dict[str, object], bool]


def _verdict(
    view: ClusterView,
    workload: Workload,
    pods: Sequence[Pod],
    readings: Sequence[GpuReading],
    resource: Resource,
    said: Provenance,
    price_of: Callable[[str | None], float | None],
    thresholds: Thresholds,
) -> _Verdict | None:
    verdicts = [r.verdict for r in readings]
    window = int(thresholds.idle_window.total_seconds() // 60)
    gpus = sum(p.gpus for p in pods)
    pod_names = ", ".join(p.name for p in pods[:5]) + (f" and {len(pods) - 5} more" if len(pods) > 5 else "")
    restore = restore_command(workload)
    if all(v is Verdict.IDLE for v in verdicts):
        busiest = max(r.busiest_gpu_percent or 0.0 for r in readings)
        after = (
            f" Scaled to zero after the grace period if still idle; restore it with `{restore}`."
            if restore and resource.stop_blocker is None
            else ""
        )
        return (
            Reason.POD_GPU_IDLE,
            f"{resource.display_name} holds {gpus} GPU(s) in pod(s) {pod_names}, and every one stayed under "
            f"{thresholds.idle_percent:g}% for {window} minutes (busiest peaked at {busiest:.1f}%). Its requests "
            "keep its node(s) alive: Karpenter and the cluster autoscaler consolidate on requests, never on "
            f"use.{provenance_said(said)}{after}",
            {
                "busiest_gpu_percent": busiest,
                "window_minutes": window,
                "replicas": workload.replicas,
                "restore": restore,
                **({"protected_by": list(said.protected_by)} if said.protected_by else {}),
                **({"scale_to_zero_from": said.opt_in_from} if said.opt_in_from else {}),
                **({"labels_disagree": list(said.disagreements)} if said.disagreements else {}),
            },
            True,
        )
    if all(v is Verdict.STARVED for v in verdicts):
        mean = round(sum(r.working_mean_percent or 0.0 for r in readings) / len(readings), 1)
        starved_window = int(thresholds.starved_window.total_seconds() // 60)
        return (
            Reason.POD_GPU_STARVED,
            f"The {gpus} GPU(s) of {resource.display_name} (pod(s) {pod_names}) worked through the last "
            f"{starved_window} minutes but averaged only {mean:.1f}% while working: they wait for data. The "
            "input pipeline (data loader workers, storage throughput, CPU requests of the pod) is the likely "
            "cause.",
            {"mean_gpu_percent_while_working": mean, "window_minutes": starved_window},
            False,
        )
    partial = [r for r in readings if r.verdict is Verdict.PARTIAL]
    if partial and not any(v in (Verdict.BUSY, Verdict.STARVED) for v in verdicts):
        silent = sorted({i for r in partial for i in r.silent})
        return (
            Reason.GPU_METRICS_PARTIAL,
            f"Some GPUs {resource.display_name} requests publish no utilization in the last {window} minutes "
            f"(GPU {numbers(silent)} of a pod): costguard cannot tell whether it is idle, and will not call it "
            "idle.",
            {"silent_gpus": numbers(silent), "repeat_scope": f"silent:{numbers(silent)}"},
            False,
        )
    return None


def node_findings(
    view: ClusterView,
    reserved: Mapping[str, Sequence[tuple[datetime, float]]],
    *,
    price_of: Callable[[str | None], float | None],
    thresholds: Thresholds,
    now: datetime,
    event_id: str | None = None,
) -> list[Finding]:
    """GPU nodes on which no running pod requests a GPU now, and none did in the idle window (Container Insights'
    ``node_gpu_reserved_capacity`` stayed at 0): reported with what keeps them, never acted on."""
    requested = {p.node for p in view.gpu_pods}
    start = now - thresholds.idle_window
    findings = []
    for node in view.nodes:
        if node.gpus <= 0 or node.name in requested:
            continue
        points = [v for t, v in reserved.get(node.name, ()) if start < t <= now]
        if len(points) < MIN_COVERAGE * thresholds.idle_periods or max(points) > 0:
            continue  # no data (never unused without it), or a GPU was requested in the window
        keepers = [
            p for p in view.pods if p.node == node.name and p.phase in ("Running", "Pending") and p.gpus == 0
        ]
        kept_by = [p for p in keepers if p.owner_kind != "DaemonSet"]
        names = sorted(
            {f"{w.kind} {w.namespace}/{w.name}" for p in kept_by if (w := view.workload_of(p)) is not None}
        )
        window = int(thresholds.idle_window.total_seconds() // 60)
        what = (
            f"kept alive by {len(kept_by)} pod(s) that use no GPU ({', '.join(names[:5])})"
            if kept_by
            else f"empty but for {len(keepers)} daemonset pod(s), and not consolidated"
        )
        price = price_of(node.instance_type)
        findings.append(
            Finding(
                reason=Reason.GPU_NODE_UNUSED,
                resource=Resource(
                    kind=ResourceKind.EKS_NODE,
                    id=f"{view.name}/{node.name}",
                    account=view.account,
                    region=view.region,
                    name=f"{node.name} (cluster {view.name})",
                    arn=(
                        f"arn:aws:ec2:{view.region}:{view.account}:instance/{node.instance_id}"
                        if node.instance_id
                        else None
                    ),
                    instance_type=node.instance_type,
                ),
                summary=(
                    f"GPU node {node.name} ({node.instance_type}, {node.gpus} GPUs, from {node.managed_by}) has "
                    f"had no pod requesting a GPU for {window} minutes: it is {what}. "
                    + node_advice(node, bool(kept_by))
                ),
                observed_at=now,
                event_id=event_id,
                hourly_usd=price,
                remediable=False,
                report_note="reported, never acted on: costguard does not drain or remove nodes",
                evidence={
                    "cluster": view.name,
                    "node": node.name,
                    "instance_id": node.instance_id,
                    "managed_by": node.managed_by,
                    "kept_by": names,
                    "daemonset_pods": len(keepers) - len(kept_by),
                    "window_minutes": window,
                },
            )
        )
    return findings


def node_advice(node: Node, kept: bool) -> str:
    if node.labels.get(_KARPENTER_POOL):
        fix = (
            "Give the GPU NodePool the taint nvidia.com/gpu=true:NoSchedule so that only pods tolerating it (GPU "
            "pods) land there, and disruption.consolidationPolicy: WhenEmptyOrUnderutilized"
        )
    elif node.labels.get(_NODE_GROUP):
        fix = (
            "Taint the GPU node group nvidia.com/gpu=true:NoSchedule so that only GPU pods land there, let its "
            "minimum size be 0, and let the cluster autoscaler remove unneeded nodes"
        )
    else:
        fix = "Taint GPU nodes nvidia.com/gpu=true:NoSchedule and let the autoscaler remove unneeded ones"
    blocked = (
        "" if kept else " (or look for a karpenter.sh/do-not-disrupt annotation or a PodDisruptionBudget)"
    )
    return f"{fix}{blocked}."


def metrics_missing_finding(
    view: ClusterView, pods_without: Iterable[Pod], *, now: datetime, event_id: str | None = None
) -> Finding:
    """A cluster with GPU pods but no GPU series from Container Insights: told once, never called idle."""
    silent = list(pods_without)
    return Finding(
        reason=Reason.GPU_METRICS_MISSING,
        resource=Resource(
            kind=ResourceKind.EKS_CLUSTER,
            id=view.name,
            account=view.account,
            region=view.region,
            name=f"EKS cluster {view.name}",
            arn=view.arn,
        ),
        summary=(
            f"EKS cluster {view.name} runs {len(silent)} pod(s) that request GPUs but publishes no GPU "
            "utilization (Container Insights, ContainerInsights namespace): costguard cannot tell whether they "
            "are idle, and will not call them idle."
        ),
        observed_at=now,
        event_id=event_id,
        evidence={"pods": [f"{p.namespace}/{p.name}" for p in silent[:20]], "how_to_fix": METRICS_HELP},
    )


def unreachable_finding(
    *,
    cluster: str,
    account: str,
    region: str,
    arn: str | None,
    cause: str,
    detail: str,
    role_arn: str | None,
    now: datetime,
    event_id: str | None = None,
) -> Finding:
    """A cluster the sweep could not read: what to add, told once (pipeline.ALERT_ONCE); the others are swept."""
    role = role_arn or "costguard's EKS sweep role (stack output EksGpuFunctionRoleArn)"
    fixes = {
        "private_endpoint": (
            "deploy with EksSubnetIds and EksSecurityGroupIds (subnets of its VPC, docs/eks.md 'Private endpoints') "
            "so the sweep runs in its VPC"
        ),
        "unauthorized": (
            f"add an EKS access entry for {role} with the Kubernetes group costguard-readers "
            "(aws eks create-access-entry, docs/eks.md 'Access') and set the cluster's authentication mode to "
            "API or API_AND_CONFIG_MAP"
        ),
        "forbidden": "apply the ClusterRole and binding in docs/eks.md 'Kubernetes permissions'",
        "unreachable": "check that its API endpoint answers from the function (security groups, public access CIDRs)",
        "not_active": "nothing: it is swept once it is ACTIVE again",
    }
    return Finding(
        reason=Reason.EKS_CLUSTER_UNREACHABLE,
        resource=Resource(
            kind=ResourceKind.EKS_CLUSTER,
            id=cluster,
            account=account,
            region=region,
            name=f"EKS cluster {cluster}",
            arn=arn,
        ),
        summary=(
            f"costguard cannot read EKS cluster {cluster} ({detail}), so its GPU pods and nodes are not judged. "
            f"To let it: {fixes.get(cause, fixes['unreachable'])}. The region's other clusters were swept."
        ),
        observed_at=now,
        event_id=event_id,
        repeat_scope=cause,
        evidence={"cluster": cluster, "cause": cause, "detail": detail},
    )
