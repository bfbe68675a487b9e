"""The domain: resources, findings, decisions and their stable reason codes."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

MARK_TAG_KEY = "costguard:marked-at"
# Beside a notify-mode (shadow) mark, on a resource whose stop a dry run has decided (act/shadow.py; never written
# on a resource itself): a live run has stopped it, so the read schedule reads it as a standing finding.
DRY_RUN_STOPPED_TAG_KEY = "costguard:dry-run-stopped-at"


def mark_text(at: datetime, reason: str | None = None) -> str:
    """The mark tag's value: when the resource was marked and, for a training job marked for something other
    than idleness (a cost ceiling, a diverged run), why, after a space. The SageMaker idle sweep cancels a mark
    when the job works again: only the marks that working again answers (an idle one, or one that says nothing)."""
    return at.isoformat() if reason is None else f"{at.isoformat()} {reason}"


def mark_reason(tags: Mapping[str, str]) -> str | None:
    """Why a resource was marked, when its mark says (``mark_text``)."""
    parts = tags.get(MARK_TAG_KEY, "").split(maxsplit=1)
    return parts[1] if len(parts) == 2 else None


class ResourceKind(StrEnum):
    EC2_INSTANCE = "ec2_instance"
    TRAINING_JOB = "training_job"
    NOTEBOOK = "notebook_instance"
    ENDPOINT = "endpoint"
    CAPACITY_RESERVATION = "capacity_reservation"
    BATCH_JOB = "batch_job"
    BATCH_QUEUE = "batch_queue"
    JOB_FAMILY = "job_family"  # the runs of one retrying workload (detect/job_families.py)
    TRAINING_DIGEST = "training_digest"  # one account and region's completed training jobs of a day
    BUDGET = "budget"  # an AWS Budgets budget, at one alert type and threshold
    COST_ANOMALY = "cost_anomaly"  # one Cost Anomaly Detection anomaly
    COSTGUARD_ALARM = "costguard_alarm"  # one of costguard's own CloudWatch alarms (template.yaml, ops)
    MEMBER_REGION = "member_region"  # one member account and region of an organization deployment
    PROVISIONED_THROUGHPUT = "provisioned_throughput"  # a Bedrock Provisioned Throughput (model units)
    # EKS (flows/eks.py): the workload that owns GPU pods (a Deployment, StatefulSet, Job, notebook or bare pod),
    # a GPU node, a cluster.
    EKS_WORKLOAD = "eks_workload"
    EKS_NODE = "eks_node"
    EKS_CLUSTER = "eks_cluster"
    # SageMaker HyperPod (detect/hyperpod.py): a cluster, one of its nodes; one of its instance groups
    # (detect/hyperpod_idle.py), ``<cluster>/<group>``.
    HYPERPOD_CLUSTER = "hyperpod_cluster"
    HYPERPOD_NODE = "hyperpod_node"
    HYPERPOD_GROUP = "hyperpod_group"
    # The savings ledger's reports (detect/ledger_summary.py): a team's week, the deployment's day.
    SAVINGS_LEDGER = "savings_ledger"

    @property
    def has_own_rate(self) -> bool:
        """Whether a finding's ``hourly_usd`` on this kind is what the resource itself costs to run. On a budget,
        an anomaly, a job family or a digest it is the sum over other resources (what runs in its scope), never
        a rate to add up with theirs."""
        return self in _OWN_RATE_KINDS


# The kinds that run on instances of their own, and so have an hourly price of their own.
_OWN_RATE_KINDS = frozenset(
    {
        ResourceKind.EC2_INSTANCE,
        ResourceKind.TRAINING_JOB,
        ResourceKind.NOTEBOOK,
        ResourceKind.ENDPOINT,
        ResourceKind.CAPACITY_RESERVATION,
        ResourceKind.BATCH_JOB,
        ResourceKind.PROVISIONED_THROUGHPUT,
        ResourceKind.EKS_WORKLOAD,  # its pods' share of their nodes' price
        ResourceKind.EKS_NODE,
        ResourceKind.HYPERPOD_CLUSTER,  # its instance groups' nodes
        ResourceKind.HYPERPOD_NODE,
        ResourceKind.HYPERPOD_GROUP,  # its idle nodes
    }
)


class Reason(StrEnum):
    """Stable reason codes: they appear in alerts, metrics and the catalogue in docs/reasons.md."""

    TRAINING_JOB_FAILED = "training_job_failed"
    GPU_IDLE = "gpu_idle"
    GPU_STARVED = "gpu_starved"
    GPU_METRICS_MISSING = "gpu_metrics_missing"
    GPU_METRICS_PARTIAL = "gpu_metrics_partial"  # some of a resource's GPUs report, others publish nothing
    GPU_ALARM_UNMATCHED = "gpu_alarm_unmatched"  # a GPU-idle alarm fired that names no running GPU instance
    MEMBER_UNREACHABLE = "member_unreachable"  # a sweep could not reach a member account and region
    JOB_STALLED = "job_stalled"
    GPU_ACTIVE_AGAIN = "gpu_active_again"
    NOTEBOOK_IDLE = "notebook_idle"
    ENDPOINT_IDLE = "endpoint_idle"
    # A GPU endpoint serving a trickle on GPUs it barely uses, priced per 1,000 invocations (detect/sagemaker.py).
    ENDPOINT_UNDERUSED = "endpoint_underused"
    BATCH_RETRY_LOOP = "batch_retry_loop"
    SPOT_INTERRUPTION = "spot_interruption"
    JOB_FAILURE_LOOP = "job_failure_loop"
    JOB_COST_WARNING = "job_cost_warning"
    JOB_COST_CEILING = "job_cost_ceiling"
    JOB_NO_MAX_RUNTIME = "job_no_max_runtime"
    SPOT_WITHOUT_CHECKPOINT = "spot_without_checkpoint"
    SPOT_RECOMMENDED = "spot_recommended"
    # A training job reading its S3 input from a bucket in another region (detect/placement.py).
    DATA_CROSS_REGION = "data_cross_region"
    TRAINING_DIGEST = "training_digest"
    # A run's own loss NaN, rising or flat; a checkpoint location with no new object (detect/training_health.py).
    TRAINING_DIVERGED = "training_diverged"
    # A run whose GPUs read busy while it writes nothing (detect/training_hang.py), and one costguard cannot judge.
    JOB_HUNG = "job_hung"
    JOB_HANG_UNKNOWN = "job_hang_unknown"
    CHECKPOINT_STALE = "checkpoint_stale"
    CAPACITY_RESERVATION_IDLE = "capacity_reservation_idle"
    CAPACITY_BLOCK_EXPIRING = "capacity_block_expiring"
    CAPACITY_BLOCK_UNUSED = "capacity_block_unused"
    CAPACITY_RESERVATION_STATE = "capacity_reservation_state"
    # The right-sizing audit (audit/): recommendations with a monthly saving, never acted on.
    RIGHTSIZE_IDLE = "rightsize_idle"
    RIGHTSIZE_DOWNSIZE = "rightsize_downsize"
    RIGHTSIZE_FAMILY = "rightsize_family"
    RIGHTSIZE_MODEL_SIZE = "rightsize_model_size"
    RIGHTSIZE_SPOT = "rightsize_spot"
    TRAINIUM_CANDIDATE = "trainium_candidate"
    # The audit's holdings (audit/holdings.py): steady usage a Savings Plan would cover, storage left behind by GPU
    # work, GPU spend without the account's cost-allocation tags.
    COMMITMENT_CANDIDATE = "commitment_candidate"
    ORPHANED_STORAGE = "orphaned_storage"
    UNTAGGED_GPU_SPEND = "untagged_gpu_spend"  # also alerted at launch (detect/tagging.py)
    # costguard's own health (template.yaml OpsAlarmRule): a function failing or throttled, work in a queue.
    COSTGUARD_ALARM = "costguard_alarm"
    BUDGET_BREACH = "budget_breach"
    COST_ANOMALY = "cost_anomaly"
    # A Bedrock Provisioned Throughput nobody invoked over the window (detect/bedrock.py).
    BEDROCK_THROUGHPUT_IDLE = "bedrock_throughput_idle"
    # The savings ledger (ledger.py): a team's week, in its channel; the deployment's day, in the default one.
    LEDGER_WEEKLY = "ledger_weekly"
    LEDGER_DAILY = "ledger_daily"
    # GPUs on EKS (detect/eks.py): pods holding GPUs they do not use or under-feed, GPU nodes kept for nothing,
    # a cluster the sweep cannot reach.
    POD_GPU_IDLE = "pod_gpu_idle"
    POD_GPU_STARVED = "pod_gpu_starved"
    GPU_NODE_UNUSED = "gpu_node_unused"
    EKS_CLUSTER_UNREACHABLE = "eks_cluster_unreachable"
    # SageMaker HyperPod events (detect/hyperpod.py): a node that cannot work, a cluster that failed or is stuck
    # creating, a node or group HyperPod could not provision.
    HYPERPOD_NODE_UNHEALTHY = "hyperpod_node_unhealthy"
    HYPERPOD_CLUSTER_FAILED = "hyperpod_cluster_failed"
    HYPERPOD_PROVISIONING_FAILED = "hyperpod_provisioning_failed"
    # A HyperPod instance group whose nodes' GPUs stayed idle for the window (detect/hyperpod_idle.py): the
    # scale-down to make, never made.
    HYPERPOD_IDLE = "hyperpod_idle"


class Action(StrEnum):
    NONE = "none"
    NOTIFY = "notify"
    MARK = "mark"
    UNMARK = "unmark"
    STOP = "stop"


@dataclass(frozen=True)
class Accelerators:
    """The accelerators of an instance type, from DescribeInstanceTypes."""

    kind: str  # nvidia_gpu | neuron | inferentia | gpu
    count: int
    model: str
    memory_mib: int | None = None

    @property
    def is_nvidia(self) -> bool:
        return self.kind == "nvidia_gpu"


@dataclass(frozen=True)
class Ec2Instance:
    id: str
    type: str
    state: str
    account: str
    region: str
    launch_time: datetime | None
    tags: dict[str, str] = field(default_factory=dict)
    lifecycle: str | None = None  # spot | capacity-block | None (on-demand)
    accelerators: Accelerators | None = None

    @property
    def name(self) -> str | None:
        return self.tags.get("Name")

    @property
    def auto_scaling_group(self) -> str | None:
        return self.tags.get("aws:autoscaling:groupName")


@dataclass(frozen=True)
class TrainingJob:
    """An in-progress SageMaker training job (homogeneous cluster: one instance type)."""

    name: str
    arn: str
    account: str
    region: str
    instance_type: str
    instance_count: int
    started: datetime | None = None
    tags: dict[str, str] = field(default_factory=dict)
    accelerators: Accelerators | None = None  # per instance


@dataclass(frozen=True)
class CapacityReservation:
    """An EC2 capacity reservation (an ODCR, or a Capacity Block when reservation_type is capacity-block)."""

    id: str
    account: str
    region: str
    instance_type: str
    total: int
    available: int
    state: str = "active"
    reservation_type: str = "default"
    availability_zone: str | None = None
    arn: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    start: datetime | None = None  # StartDate: when it became (or becomes) active
    created: datetime | None = None  # CreateDate: when it was created (act/arming.py: first seen since)
    end: datetime | None = None  # EndDate: None for an open-ended ODCR

    @property
    def is_capacity_block(self) -> bool:
        return self.reservation_type == "capacity-block"


@dataclass(frozen=True)
class NotebookInstance:
    name: str
    arn: str
    account: str
    region: str
    instance_type: str
    status: str
    tags: dict[str, str] = field(default_factory=dict)
    accelerators: Accelerators | None = None


@dataclass(frozen=True)
class EndpointVariant:
    name: str
    instance_type: str | None  # None: a serverless variant
    instance_count: int
    accelerators: Accelerators | None = None

    @property
    def has_gpu(self) -> bool:
        return self.accelerators is not None and self.accelerators.kind in ("nvidia_gpu", "gpu")


@dataclass(frozen=True)
class Endpoint:
    name: str
    arn: str
    account: str
    region: str
    created: datetime | None
    variants: tuple[EndpointVariant, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)
    # Its endpoint configuration has an AsyncInferenceConfig: it publishes InvocationsProcessed and
    # ApproximateBacklogSize, never Invocations.
    asynchronous: bool = False
    # The inference components it hosts (ListInferenceComponents): their Invocations are published per
    # InferenceComponentName, not per endpoint and variant.
    inference_components: tuple[str, ...] = ()

    @property
    def has_gpu(self) -> bool:
        return any(v.has_gpu and v.instance_count > 0 for v in self.variants)


class Resource(BaseModel):
    """A billable thing costguard looks at; account and region are always explicit."""

    model_config = ConfigDict(frozen=True)

    kind: ResourceKind
    id: str
    account: str
    region: str
    name: str | None = None
    arn: str | None = None
    instance_type: str | None = None
    instance_count: int = 1
    tags: dict[str, str] = Field(default_factory=dict)
    account_name: str | None = Field(default=None, description="The account's name in the organization")
    account_ou: str | None = Field(default=None, description="The OU (or root) id the account sits in")
    stop_blocker: str | None = Field(
        default=None,
        description="Why stopping it is not safe or not possible (an Auto Scaling group would replace it, say)",
    )
    started: datetime | None = Field(
        default=None,
        description="When its current run began (an instance's LaunchTime, a job's start): a mark older than it "
        "was about an earlier run (act/marks.py)",
    )
    grace_ends: datetime | None = Field(
        default=None,
        description="When its grace period ends, where a policy ends it before the mark's own grace period "
        "(detect/adaptive.py): the mark stays as costguard wrote it",
    )
    mark_void: str | None = Field(
        default=None,
        description="What mark tag it carried that costguard could not vouch for, and why (act/marks.py): "
        "decided as unmarked",
    )

    @property
    def key(self) -> str:
        return f"{self.account}/{self.region}/{self.kind}/{self.id}"

    @property
    def display_name(self) -> str:
        return self.name or self.id


class Finding(BaseModel):
    """What a detector saw on one resource, with its evidence and the money at stake."""

    model_config = ConfigDict(frozen=True)

    reason: Reason
    resource: Resource
    summary: str
    observed_at: datetime
    evidence: dict[str, Any] = Field(default_factory=dict)
    hourly_usd: float | None = Field(
        default=None, description="What the resource costs per hour; None if unknown"
    )
    cost_usd: float | None = Field(default=None, description="What was already spent, where it is known")
    remediable: bool = Field(
        default=False, description="Whether the detector allows the resource to be stopped"
    )
    cancels_mark: bool = Field(
        default=False, description="The resource is working again: any pending stop is off"
    )
    armed_by: dict[str, str] = Field(
        default_factory=dict,
        description="The owner's tags or labels that armed this finding's action (a ceiling, an opt-in), as read "
        "now: it acts only when costguard's record of them as first seen agrees (act/arming.py)",
    )
    repeat_scope: str | None = Field(
        default=None,
        description="Distinct news about the same resource and reason (a new state, say): not a repeat",
    )
    folded: bool = Field(
        default=False,
        description="Told in the message of the finding it belongs to (a budget breach's summary), not on its "
        "own; a failed or capped action is still its own message",
    )
    report_note: str | None = Field(
        default=None,
        description="What follows from a finding that only reports, said in place of 'no action' (a budget "
        "breach whose resources are marked in their own messages, say)",
    )
    thread: str | None = Field(
        default=None,
        description="The conversation it is told in, when not its resource's own: a budget's, a job family's "
        "(a resource key)",
    )
    event_id: str | None = None

    @property
    def conversation(self) -> str:
        """The key of the conversation (a Slack thread) this finding belongs to."""
        return self.thread or self.resource.key


class Decision(BaseModel):
    """What costguard does (or, dry, would do) about one finding."""

    model_config = ConfigDict(frozen=True)

    action: Action
    reason: Reason
    finding: Finding
    dry_run: bool
    note: str = ""
    decided_at: datetime
    stop_after: datetime | None = None
    held: str | None = Field(
        default=None,
        description="Why this decision is a dry run where costguard acts on others: its reason in notify "
        "(ReasonModes), its resource outside RemediateScope",
    )

    @property
    def resource(self) -> Resource:
        return self.finding.resource

    @property
    def hourly_usd(self) -> float | None:
        return self.finding.hourly_usd

    @property
    def id(self) -> str:
        """Stable across redeliveries of the same event: used to deliver each decision once."""
        basis = "|".join(
            [
                self.finding.event_id or self.decided_at.isoformat(),
                self.resource.key,
                self.reason,
                self.action,
            ]
        )
        return hashlib.sha256(basis.encode()).hexdigest()[:32]

    def summary(self) -> dict[str, Any]:
        """The flat view used by `costguard replay --json` and the logs."""
        return {
            "id": self.id,
            "action": self.action.value,
            "resource_id": self.resource.id,
            "resource_name": self.resource.display_name,
            "resource_kind": self.resource.kind.value,
            "account": self.resource.account,
            "region": self.resource.region,
            "reason": self.reason.value,
            "dry_run": self.dry_run,
            "hourly_usd": self.hourly_usd,
            "cost_usd": self.finding.cost_usd,
            "note": self.note,
            "stop_after": self.stop_after.isoformat() if self.stop_after else None,
        }


@dataclass(frozen=True)
class ProvisionedThroughput:
    """A Bedrock Provisioned Throughput: model units billed every hour until it is deleted."""

    arn: str
    name: str
    account: str
    region: str
    model_arn: str
    foundation_model_arn: str
    model_units: int
    status: str
    created: datetime | None
    commitment: str | None = None  # OneMonth | SixMonths | None (no commitment: deletable at any time)
    commitment_expires: datetime | None = None
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """The id costguard keys it by: its name is unique in the account and region, and names it in alerts."""
        return self.name

    @property
    def base_model(self) -> str:
        """The foundation model's id (the part of its ARN after ``foundation-model/``)."""
        return self.foundation_model_arn.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class HyperPodGroup:
    """One instance group of a SageMaker HyperPod cluster: its type and how many of its instances run and are wanted."""

    name: str
    instance_type: str | None
    current: int
    target: int
    status: str | None = None
    slurm_node_type: str | None = (
        None  # Controller | Login | Compute on a Slurm cluster that says (SlurmConfig)
    )


@dataclass(frozen=True)
class HyperPodNode:
    """One node of a SageMaker HyperPod cluster, as DescribeClusterNode or ListClusterNodes tells it."""

    instance_id: str
    group: str
    instance_type: str | None
    status: str | None = None
    launched: datetime | None = None


@dataclass(frozen=True)
class HyperPodCluster:
    name: str
    status: str
    groups: tuple[HyperPodGroup, ...]
    arn: str | None = None
    created: datetime | None = None
    # The EKS cluster orchestrating it (the name its Container Insights series carry); None: Slurm.
    eks_cluster: str | None = None
