"""The world file: a YAML description of one account (or an organization's accounts and regions) that seeds the
embedded AWS."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from costguard.events.common import AwsTime
from costguard.local.eks_world import EksCluster

Pattern = Literal["idle", "busy", "starved", "spinning", "none"]
AwsTimeAdapter: TypeAdapter[datetime] = TypeAdapter(AwsTime)

# Mean utilization and swing of each pattern: deterministic, so tests can recompute figures.
PATTERN_LEVELS: dict[str, tuple[float, float]] = {
    "idle": (1.0, 1.0),
    "busy": (92.0, 5.0),
    "starved": (45.0, 8.0),
    "spinning": (98.5, 1.5),  # a wait in a collective (NCCL): every GPU reads 97-100%
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Segment(_Strict):
    """A pattern over a span of time (open ends mean the whole series)."""

    pattern: Pattern
    start: AwsTime | None = None
    end: AwsTime | None = None


class Run(_Strict):
    """Explicit points in a row: ``values[n]`` is the percent at ``start + n * step_minutes``; null publishes
    nothing at that time. A week of five-minute points is one list of 2016 numbers, not 2016 keys."""

    start: AwsTime
    step_minutes: int = Field(default=5, ge=1, le=24 * 60)
    values: list[Annotated[float, Field(ge=0, le=100)] | None] = Field(min_length=1)

    def points(self) -> dict[datetime, float | None]:
        step = timedelta(minutes=self.step_minutes)
        at = self.start
        points: dict[datetime, float | None] = {}
        for value in self.values:
            points[at] = value
            at += step
        return points


class GpuSeries(_Strict):
    """One GPU's series: a pattern, time segments, or explicit points and runs (which win, runs last)."""

    index: int = Field(ge=0, le=63)
    pattern: Pattern | None = None
    segments: list[Segment] = Field(default_factory=list)
    points: dict[str, float] = Field(default_factory=dict, description="ISO time -> percent")
    runs: list[Run] = Field(default_factory=list)

    @model_validator(mode="after")
    def _segments_in_order(self) -> GpuSeries:
        for seg in self.segments:
            if seg.start is not None and seg.end is not None and seg.end <= seg.start:
                raise ValueError(
                    f"GPU {self.index}: a segment ends ({seg.end}) before it starts ({seg.start})"
                )
        return self


class GpuMetrics(_Strict):
    """The CloudWatch agent's NVIDIA series for an instance; ``pattern: none`` publishes nothing."""

    pattern: Pattern = "busy"
    lookback_minutes: int = Field(default=180, ge=5, le=14 * 24 * 60)
    period_seconds: int = Field(default=60, ge=60)
    memory_used_percent: float = Field(default=50.0, ge=0, le=100)
    gpus: list[GpuSeries] = Field(default_factory=list, description="per-GPU overrides")
    segments: list[Segment] = Field(
        default_factory=list, description="patterns over spans of time for every GPU (a GPU's own win)"
    )


class UsageHistory(_Strict):
    """Hourly history for the right-sizing audit: GPU utilization and memory per GPU, and CPU, from ``days``
    before now (or launch) up to where ``gpu_metrics``' own recent series starts."""

    days: int = Field(default=14, ge=1, le=63)
    gpu_percent: float = Field(ge=0, le=100, description="mean utilization of each busy GPU")
    swing: float = Field(default=5.0, ge=0, le=50)
    busy_gpus: int | None = Field(default=None, ge=0, description="GPUs 0..n-1 carry the load; default all")
    memory_used_gib: float = Field(default=0.0, ge=0, description="memory in use on each busy GPU")
    cpu_percent: float | None = Field(default=None, ge=0, le=100, description="default: the instance's")


class TimelinePeriod(_Strict):
    """A span of an instance's own timeline, [start, end): running, or stopped by its owner.

    An open ``start`` (first period only) means since before the world's series begin (or since ``launched``);
    an open ``end`` (last period only) means until the world's now."""

    state: Literal["running", "stopped"]
    start: AwsTime | None = None
    end: AwsTime | None = None


# EC2's own CPU and network of an instance whose world gives none, in the minutes its GPUs are not all idle.
DEFAULT_CPU_PERCENT = 20.0
DEFAULT_NETWORK_MB_PER_MINUTE = 50.0


class Instance(_Strict):
    id: Annotated[str, Field(pattern=r"^i-[0-9a-f]{8,17}$")]
    type: str
    name: str | None = None
    state: Literal["pending", "running", "stopping", "stopped", "terminated"] = "running"
    launched: AwsTime | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    gpu_metrics: GpuMetrics = Field(default_factory=GpuMetrics)
    cpu_percent: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description="EC2's CPUUtilization; default: an idle host's in the minutes every GPU idles, else "
        "DEFAULT_CPU_PERCENT",
    )
    network_in_mb_per_minute: float | None = Field(
        default=None,
        ge=0,
        description="EC2's NetworkIn (NetworkOut: a tenth of it); default: an idle host's in the minutes every "
        "GPU idles, else DEFAULT_NETWORK_MB_PER_MINUTE",
    )
    lifecycle: Literal["on-demand", "spot"] = "on-demand"
    capacity_reservation_id: str | None = Field(
        default=None, description="the capacity reservation or Capacity Block it runs in"
    )
    stopped_at: AwsTime | None = Field(
        default=None, description="when its owner stopped it (backtests): it ran from launched until then"
    )
    usage: UsageHistory | None = Field(default=None, description="hourly history for the audit")
    timeline: list[TimelinePeriod] = Field(
        default_factory=list,
        description="backtests: its owner's own running and stopped periods, in order; when given, the "
        "instance ran during its running periods and at no other time",
    )

    @model_validator(mode="after")
    def _timeline_in_order(self) -> Instance:
        if self.stopped_at is not None and self.launched is not None and self.stopped_at <= self.launched:
            raise ValueError(f"instance {self.id}: stopped_at ({self.stopped_at}) is not after launched")
        if not self.timeline:
            return self
        if self.stopped_at is not None:
            raise ValueError(
                f"instance {self.id}: give either stopped_at or a timeline (its last period says when it stopped)"
            )
        last = len(self.timeline) - 1
        previous: TimelinePeriod | None = None
        for n, period in enumerate(self.timeline):
            name = f"instance {self.id}: timeline period {n + 1} ({period.state})"
            if period.start is None and n > 0:
                raise ValueError(f"{name} has no start: only the first period may leave it out")
            if period.end is None and n < last:
                raise ValueError(f"{name} has no end: only the last period may leave it out")
            if period.start is not None and period.end is not None and period.end <= period.start:
                raise ValueError(f"{name} ends ({period.end}) before it starts ({period.start})")
            before = previous.end if previous is not None else None
            if before is not None and period.start is not None and period.start < before:
                raise ValueError(
                    f"{name} starts at {period.start}, before period {n} ends ({before}): "
                    "periods must be in order and must not overlap"
                )
            launched = self.launched
            if period.state == "running" and launched and period.start and period.start < launched:
                raise ValueError(f"{name} starts at {period.start}, before it was launched ({launched})")
            previous = period
        return self

    def timeline_bounds(self) -> list[datetime]:
        """Every time its timeline names, for the world's checks."""
        return [t for p in self.timeline for t in (p.start, p.end) if t is not None]

    def running_periods(self, since: datetime, now: datetime) -> list[tuple[datetime, datetime]]:
        """When its owner had it running within [since, now): the running periods of its timeline, else from
        ``launched`` (or ``since``) until ``stopped_at`` (or ``now`` when it is running at ``now``)."""
        spans: list[tuple[datetime | None, datetime | None]]
        if self.timeline:
            spans = [(p.start or self.launched, p.end) for p in self.timeline if p.state == "running"]
        elif self.state == "running" or self.stopped_at is not None:
            spans = [(self.launched, self.stopped_at)]
        else:
            spans = []  # stopped or gone at now, and nothing says when it ran
        clipped = []
        for start, end in spans:
            lo, hi = max(start or since, since), min(end or now, now)
            if lo < hi:
                clipped.append((lo, hi))
        return clipped


class TrainingMetric(_Strict):
    """One of a training job's MetricDefinitions and the values SageMaker publishes for it (every
    ``step_minutes`` from the job's start while it runs): ``falling`` (2 / (1 + minutes / 60), a loss that
    keeps improving), ``rising`` (0.5 + minutes / 100), ``flat`` (1.2); NaN from ``nan_from`` on."""

    name: str = Field(default="train:loss", min_length=1, max_length=255)
    shape: Literal["falling", "rising", "flat"] = "falling"
    step_minutes: int = Field(default=5, ge=1, le=24 * 60)
    nan_from: AwsTime | None = None


class TrainingJob(_Strict):
    name: str
    instance_type: str
    instance_count: int = Field(default=1, ge=1)
    status: Literal["InProgress", "Completed", "Failed", "Stopping", "Stopped"] = "InProgress"
    started: AwsTime | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    gpu_pattern: Pattern = Field(
        default="busy", description="GPUUtilization of every host while InProgress (summed over its GPUs)"
    )
    max_runtime_seconds: int | None = Field(
        default=5 * 24 * 3600, ge=1, description="StoppingCondition.MaxRuntimeInSeconds; null: none set"
    )
    managed_spot: bool = False
    checkpoint_s3_uri: str | None = None
    ended: AwsTime | None = Field(
        default=None,
        description="TrainingEndTime of a Completed, Failed or Stopped job (the audit's storage)",
    )
    metrics: list[TrainingMetric] = Field(default_factory=list, description="its MetricDefinitions")
    checkpoints_written: list[AwsTime] = Field(
        default_factory=list,
        description="when an object was written under its checkpoint location (checkpoint_s3_uri, or the "
        "costguard:checkpoint tag's URI)",
    )
    log_every_minutes: int | None = Field(
        default=5, ge=1, le=24 * 60, description="each host writes a log line this often; null: no log stream"
    )
    silent_from: AwsTime | None = Field(
        default=None,
        description="from then the run writes nothing: no metric datapoint, no log line (a hang)",
    )
    metrics_paused_from: AwsTime | None = Field(
        default=None, description="from then its metrics pause while its logs go on (an evaluation pass)"
    )


class Notebook(_Strict):
    name: str
    instance_type: str
    status: Literal["Pending", "InService", "Stopping", "Stopped", "Failed"] = "InService"
    tags: dict[str, str] = Field(default_factory=dict)
    gpu_pattern: Pattern = Field(
        default="busy", description="CWAgent nvidia_smi_utilization_gpu per GPU while InService"
    )


class Endpoint(_Strict):
    name: str
    instance_type: str
    instance_count: int = Field(default=1, ge=1)
    tags: dict[str, str] = Field(default_factory=dict)
    variant: str = "AllTraffic"
    kind: Literal["realtime", "async", "inference_components"] = Field(
        default="realtime",
        description="realtime: Invocations per endpoint and variant; async (an AsyncInferenceConfig): "
        "InvocationsProcessed per endpoint and variant and ApproximateBacklogSize, never Invocations; "
        "inference_components: Invocations per InferenceComponentName, shared evenly among its components",
    )
    inference_components: list[Annotated[str, Field(pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")]] = Field(
        default_factory=list,
        description="the components a kind: inference_components endpoint hosts; default: <name>-ic",
    )
    invocations_per_hour: float = Field(
        default=0.0, ge=0, description="its traffic, published as its kind publishes it (AWS/SageMaker)"
    )
    gpu_percent: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description="per GPU; published as SageMaker does, summed over the type's GPUs "
        "(/aws/sagemaker/Endpoints GPUUtilization). None: no GPU metrics",
    )
    gpu_memory_percent: float | None = Field(
        default=None, ge=0, le=100, description="per GPU, as gpu_percent (GPUMemoryUtilization)"
    )
    created: AwsTime | None = Field(default=None, description="default: 30 days before the world's now")
    history_days: float = Field(
        default=0,
        ge=0,
        le=63,
        description="hourly Invocations, GPUUtilization and GPUMemoryUtilization for this many days before the "
        "per-minute series (at most back to its creation): what the right-sizing audit reads",
    )

    def components(self) -> list[str]:
        """The inference components it hosts (none unless its kind is inference_components)."""
        if self.kind != "inference_components":
            return []
        return self.inference_components or [f"{self.name}-ic"]


class ProvisionedThroughput(_Strict):
    """A Bedrock Provisioned Throughput (served to costguard's adapter from the world: moto has none)."""

    name: Annotated[str, Field(pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9_])*$")]
    model: str = Field(description="the foundation model id, e.g. amazon.titan-text-express-v1")
    custom_model: str | None = Field(default=None, description="a custom model's name, when it serves one")
    model_units: int = Field(default=1, ge=1)
    commitment: Literal["none", "OneMonth", "SixMonths"] = "none"
    created: AwsTime | None = Field(default=None, description="default: 30 days before the world's now")
    commitment_expires: AwsTime | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    id: Annotated[str, Field(pattern=r"^[a-z0-9]{12}$")] | None = Field(
        default=None,
        description="the 12-character id its ARN ends in (provisioned-model/<id>, as AWS makes them); default: "
        "derived from its name",
    )
    invocations_per_hour: float = Field(default=0.0, ge=0, description="AWS/Bedrock Invocations")
    invocations_model_id: Literal["arn", "unstated"] = Field(
        default="unstated",
        description="the ModelId its Invocations are published under. AWS does not document it for a "
        "provisioned model: 'unstated' (the default) publishes under a spelling costguard does not read "
        "(provisioned/<id>), 'arn' under its ARN, a world's stated assumption",
    )
    invoked_until: AwsTime | None = Field(
        default=None,
        description="its traffic stops here (its series exists, with no datapoints after); default: it goes on",
    )


class HyperPodGroup(_Strict):
    """One instance group of a HyperPod cluster; its nodes' ids (DescribeClusterNode and ListClusterNodes answer
    for them) and what their GPUs publish (local/hyperpod.py)."""

    name: Annotated[str, Field(pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")]
    instance_type: Annotated[str, Field(pattern=r"^ml\.[a-z0-9-]+\.[a-z0-9-]+$")]
    count: int = Field(default=1, ge=0)
    target: int | None = Field(default=None, ge=0, description="TargetCount; default: count")
    node_ids: list[Annotated[str, Field(pattern=r"^i-[0-9a-f]+$")]] = Field(default_factory=list)
    slurm_node_type: Literal["Controller", "Login", "Compute"] | None = Field(
        default=None, description="SlurmConfig.NodeType (a Slurm cluster's controller is never judged)"
    )
    launched: AwsTime | None = Field(
        default=None, description="the nodes' LaunchTime; default: the cluster's"
    )
    gpu_percent: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description="each GPU of each node, every 15 minutes over the last 48 hours: Container Insights' "
        "node_gpu_utilization per GpuDevice on an EKS-orchestrated cluster, else the CloudWatch agent's per-GPU "
        "series by InstanceId. None: no GPU series",
    )
    node_gpu_percent: dict[Annotated[str, Field(pattern=r"^i-[0-9a-f]+$")], float] = Field(
        default_factory=dict, description="a node's own gpu_percent, by node id"
    )


class HyperPodCluster(_Strict):
    """A SageMaker HyperPod cluster (served to costguard's adapter from the world: moto has none)."""

    name: Annotated[str, Field(pattern=r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")]
    status: Literal[
        "Creating", "Deleting", "Failed", "InService", "RollingBack", "SystemUpdating", "Updating"
    ] = "InService"
    instance_groups: list[HyperPodGroup] = Field(min_length=1)
    eks_cluster: str | None = Field(
        default=None, description="the EKS cluster orchestrating it (Orchestrator.Eks); None: Slurm"
    )
    created: AwsTime | None = Field(default=None, description="default: 30 days before the world's now")
    tags: dict[str, str] = Field(default_factory=dict)


class CapacityReservation(_Strict):
    id: Annotated[str, Field(pattern=r"^cr-[0-9a-zA-Z]+$")]
    instance_type: str
    total: int = Field(ge=1)
    used: int = Field(default=0, ge=0)
    kind: Literal["odcr", "capacity_block"] = "odcr"
    state: Literal["active", "scheduled", "expired", "cancelled", "pending", "failed"] = "active"
    availability_zone: str = "us-east-1a"
    tags: dict[str, str] = Field(default_factory=dict)
    start: AwsTime | None = Field(default=None, description="StartDate; metrics start here (<= 48 h back)")
    end: AwsTime | None = Field(default=None, description="EndDate (a Capacity Block's end)")
    utilization_percent: float | None = Field(
        default=None, ge=0, le=100, description="InstanceUtilization published; default used / total"
    )

    @property
    def utilization(self) -> float:
        if self.utilization_percent is not None:
            return self.utilization_percent
        return round(100.0 * min(self.used, self.total) / self.total, 2)


class Budget(_Strict):
    """A monthly cost budget, seeded into the embedded AWS Budgets; its alerts come from events/."""

    name: str
    limit_usd: float = Field(gt=0)
    actual_usd: float = Field(default=0, ge=0)
    forecast_usd: float = Field(default=0, ge=0)
    scope_tags: dict[str, str] = Field(
        default_factory=dict,
        description="the budget's cost filter on tags (TagKeyValue user:<key>$<value>): its resources",
    )
    linked_accounts: list[Annotated[str, Field(pattern=r"^[0-9]{12}$")]] = Field(
        default_factory=list,
        description="an organization's budget: its LinkedAccount cost filter (empty: every account)",
    )


class Volume(_Strict):
    """An EBS volume attached to nothing (status available), e.g. left by a terminated GPU instance."""

    id: Annotated[str, Field(pattern=r"^vol-[0-9a-f]{8,17}$")]
    size_gib: int = Field(ge=1, le=65536)
    type: Literal["gp3", "gp2", "io1", "io2", "st1", "sc1", "standard"] = "gp3"
    created: AwsTime | None = Field(default=None, description="default: the world's now")
    availability_zone: str | None = Field(default=None, description="default: the region's first zone")
    tags: dict[str, str] = Field(default_factory=dict)


class StoredObject(_Strict):
    """An S3 object (a checkpoint shard, a model artifact): its bucket is created if the world has none."""

    uri: Annotated[str, Field(pattern=r"^s3://[a-z0-9.-]{3,63}/.+")]
    size_gib: float = Field(gt=0, le=5 * 1024)
    modified: AwsTime | None = Field(default=None, description="LastModified; default: the world's now")


class OptimizerRecommendation(_Strict):
    """What AWS Compute Optimizer says of one of the world's EC2 instances (GetEC2InstanceRecommendations)."""

    instance: Annotated[str, Field(pattern=r"^i-[0-9a-f]{8,17}$")]
    finding: Literal["Underprovisioned", "Overprovisioned", "Optimized", "NotOptimized"]
    recommended_type: str | None = None
    monthly_saving_usd: float = Field(default=0.0, ge=0)
    idle: bool = False


AccountId = Annotated[str, Field(pattern=r"^[0-9]{12}$")]
RegionName = Annotated[str, Field(pattern=r"^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$")]


class Bucket(_Strict):
    """An S3 bucket in a region of its own (where a training job's input lives, say), with its objects."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")]
    region: RegionName
    objects: dict[str, Annotated[float, Field(gt=0, le=5 * 1024)]] = Field(
        default_factory=dict, description="key -> size in GiB"
    )


class OrgAccount(_Strict):
    """An account of the organization: its id, name and the OU it sits in (an OU id, ``ou-<root>-<suffix>``)."""

    id: AccountId
    name: str | None = None
    ou: Annotated[str, Field(pattern=r"^ou-[a-z0-9]{4,32}-[a-z0-9]{8,32}$")] | None = None


class Organization(_Strict):
    """An organization deployment: the world's ``account`` is the hub (and the management account)."""

    id: Annotated[str, Field(pattern=r"^o-[a-z0-9]{10,32}$")] = "o-exampleorg01"
    role: Annotated[str, Field(pattern=r"^[A-Za-z0-9+=,.@_-]{1,40}$")] = "costguard-member"
    accounts: list[OrgAccount] = Field(min_length=1)


class Resources(_Strict):
    """What runs in one account and region."""

    instances: list[Instance] = Field(default_factory=list)
    training_jobs: list[TrainingJob] = Field(default_factory=list)
    notebooks: list[Notebook] = Field(default_factory=list)
    endpoints: list[Endpoint] = Field(default_factory=list)
    capacity_reservations: list[CapacityReservation] = Field(default_factory=list)
    provisioned_throughputs: list[ProvisionedThroughput] = Field(default_factory=list)
    hyperpod_clusters: list[HyperPodCluster] = Field(default_factory=list)
    # What the right-sizing audit reads beside running resources.
    volumes: list[Volume] = Field(default_factory=list)
    objects: list[StoredObject] = Field(default_factory=list)
    savings_plans_coverage: dict[str, Annotated[float, Field(ge=0, le=100)]] = Field(
        default_factory=dict, description="instance family -> percent of its spend Savings Plans cover"
    )
    compute_optimizer: list[OptimizerRecommendation] = Field(default_factory=list)
    buckets: list[Bucket] = Field(
        default_factory=list, description="buckets with a region of their own (GetBucketLocation answers it)"
    )
    eks_clusters: list[EksCluster] = Field(
        default_factory=list,
        description="EKS clusters: their nodes, GPU workloads and namespaces (local/eks_world.py)",
    )


class Member(Resources):
    """Another account and region of the organization, with member.yaml deployed there (``role: present``) or
    not (``missing``: the hub's AssumeRole is refused)."""

    account: AccountId
    region: RegionName
    role: Literal["present", "missing"] = "present"


class World(Resources):
    """One account in one region at one moment; with ``organization`` and ``members``, an organization's
    accounts and regions, the top level being the hub's own account and region."""

    account: AccountId = "123456789012"
    region: str = "us-east-1"
    now: AwsTime
    budgets: list[Budget] = Field(default_factory=list)
    organization: Organization | None = None
    members: list[Member] = Field(default_factory=list)
    required_tags: list[str] = Field(
        default_factory=list,
        description="the account's cost-allocation tags (COSTGUARD_REQUIRED_TAGS locally)",
    )
    bedrock_throughput_prices: str = Field(
        default="",
        description="the operator's Provisioned Throughput rates (COSTGUARD_BEDROCK_THROUGHPUT_PRICES locally)",
    )

    def places(self) -> list[World]:
        """Each account and region as a world of its own (the hub's first), for seeding."""
        out = [self.model_copy(update={"members": []})]
        for m in self.members:
            resources = {name: getattr(m, name) for name in Resources.model_fields}
            out.append(World(account=m.account, region=m.region, now=self.now, **resources))
        return out

    @property
    def regions(self) -> list[str]:
        """Every region the world names, the hub's first."""
        return list(dict.fromkeys([self.region, *(m.region for m in self.members)]))

    @property
    def account_ids(self) -> list[str]:
        if self.organization is None:
            return [self.account]
        return [a.id for a in self.organization.accounts]

    @model_validator(mode="after")
    def _members_in_the_organization(self) -> World:
        if self.members and self.organization is None:
            raise ValueError("members need an organization (its accounts, names and OUs)")
        if self.organization is not None:
            known = {a.id for a in self.organization.accounts}
            if self.account not in known:
                raise ValueError(f"the hub account {self.account} is not among the organization's accounts")
            places = [(self.account, self.region)]
            for m in self.members:
                if m.account not in known:
                    raise ValueError(f"member account {m.account} is not among the organization's accounts")
                places.append((m.account, m.region))
            if len(places) != len(set(places)):
                raise ValueError("each (account, region) may appear once (the top level is the hub's)")
            ids = [i.id for place in [self, *self.members] for i in place.instances]
            if len(ids) != len(set(ids)):
                raise ValueError("instance ids must be unique across the organization")
        return self

    @property
    def series_start(self) -> datetime:
        """Where the world's series begin: its now less the longest ``lookback_minutes`` of its instances."""
        lookback = max((i.gpu_metrics.lookback_minutes for i in self.instances), default=180)
        return self.now - timedelta(minutes=lookback)

    @model_validator(mode="after")
    def _unique_ids(self) -> World:
        ids = [i.id for i in self.instances]
        if len(ids) != len(set(ids)):
            raise ValueError("instance ids must be unique")
        for kind, items in (
            ("training job", self.training_jobs),
            ("notebook", self.notebooks),
            ("endpoint", self.endpoints),
        ):
            names = [item.name for item in items]
            if len(names) != len(set(names)):
                raise ValueError(f"{kind} names must be unique")
        return self

    @model_validator(mode="after")
    def _timelines_in_the_span(self) -> World:
        begin = self.series_start
        for instance in self.instances:
            for at in instance.timeline_bounds():
                if not begin <= at <= self.now:
                    raise ValueError(
                        f"instance {instance.id}: timeline time {at.isoformat()} is outside the world's span "
                        f"({begin.isoformat()} to now, {self.now.isoformat()}); leave the first start or the "
                        "last end out to mean before or after it"
                    )
            if instance.timeline:
                last = instance.timeline[-1]
                running_now = last.state == "running" and (last.end is None or last.end >= self.now)
                if running_now != (instance.state in ("pending", "running")):
                    said = "running" if running_now else "stopped"
                    raise ValueError(
                        f"instance {instance.id}: its timeline has it {said} at now but its state is "
                        f"{instance.state} (it runs during its running periods only)"
                    )
        return self


class WorldFileError(ValueError):
    """The world file cannot be read; the message names the file and the problem."""


# libyaml's loader where PyYAML was built with it: a week of explicit per-GPU points for a fleet is millions of
# scalars, several times faster to parse in C. The same safe subset of YAML either way.
YamlLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_world(path: str | Path) -> World:
    path = Path(path)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=YamlLoader)  # noqa: S506 (a safe loader)
        return World.model_validate(data)
    except (OSError, yaml.YAMLError, ValueError) as error:
        raise WorldFileError(f"{path}: {error}") from None


def utilization(pattern: Pattern, minute: int, gpu_index: int) -> float | None:
    """The value a pattern gives at a minute; None where nothing is published."""
    if pattern == "none":
        return None
    mean, swing = PATTERN_LEVELS[pattern]
    wave = math.sin((minute + 7 * gpu_index) / 5.0)
    return round(max(0.0, min(100.0, mean + swing * wave)), 2)


def gpu_series(
    metrics: GpuMetrics, gpu_index: int, now: datetime, until: datetime | None = None
) -> list[tuple[datetime, float]]:
    """The datapoints one GPU publishes from ``now - lookback`` to ``until`` (default ``now``), oldest first."""
    override = next((g for g in metrics.gpus if g.index == gpu_index), None)
    # Times as whole epoch seconds inside (a week of a fleet is millions of points: aware datetimes are slow to
    # hash and compare), datetimes only for the points returned.
    explicit: dict[int, float | None] = {}
    # The pattern at a time: the GPU's own pattern (else the instance's, changed by the instance's segments),
    # then the GPU's own segments; the last segment that covers the time wins.
    base: Pattern = metrics.pattern
    segments: list[Segment] = list(metrics.segments)
    if override:
        explicit = {_epoch(AwsTimeAdapter.validate_python(t)): v for t, v in override.points.items()}
        for run in override.runs:
            run_s, run_step = _epoch(run.start), run.step_minutes * 60
            for value in run.values:
                explicit[run_s] = value
                run_s += run_step
        if override.pattern:
            base, segments = override.pattern, []
        segments += override.segments
    spans = [
        (_epoch(seg.start) if seg.start else None, _epoch(seg.end) if seg.end else None, seg.pattern)
        for seg in segments
    ]
    end = max(until or now, now)
    step = timedelta(seconds=metrics.period_seconds)
    start_s = _epoch(now) - metrics.lookback_minutes * 60
    at_s, step_s = _epoch(end) - metrics.period_seconds, metrics.period_seconds
    at = end - step
    points: list[tuple[datetime, float]] = []
    while at_s > start_s:
        if at_s in explicit:
            value = explicit[at_s]
        else:
            pattern = base
            for lo, hi, seg_pattern in spans:
                if (lo is None or lo <= at_s) and (hi is None or at_s < hi):
                    pattern = seg_pattern
            value = utilization(pattern, at_s // 60, gpu_index)
        if value is not None:
            points.append((at, value))
        at -= step
        at_s -= step_s
    points.reverse()
    return points


def _epoch(at: datetime) -> int:
    """Whole seconds since the epoch (world times are whole seconds: sub-second parts are dropped)."""
    return int(at.timestamp() // 1)
