"""The audit's plain data: what runs (subjects), how it was used, instance type facts and findings."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from costguard.model import Reason, ResourceKind

NO_TEAM = "(untagged)"  # the team of a resource without the routing tag, as the report says it


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class TypeFacts(_Frozen):
    """An instance type's accelerators and size, from DescribeInstanceTypes."""

    name: str
    accelerator_kind: str | None = None  # nvidia_gpu | gpu | neuron | None
    accelerator_count: int = 0
    accelerator_model: str | None = None
    accelerator_memory_mib: int = 0  # per device
    vcpus: int = 0

    @property
    def family(self) -> str:
        return family_of(self.name)

    @property
    def total_accelerator_memory_mib(self) -> int:
        return self.accelerator_count * self.accelerator_memory_mib


class TypeOption(_Frozen):
    """A type a recommendation may point at: offered in the region, with known facts and an hourly price."""

    facts: TypeFacts
    instance_type: str  # as priced: "g5.xlarge", or "ml.g5.xlarge" for SageMaker
    hourly_usd: float


class Subject(_Frozen):
    """One running resource the audit judges."""

    kind: ResourceKind
    id: str
    name: str | None = None
    account: str
    region: str
    instance_type: str
    instance_count: int = 1
    spot: bool = False
    checkpointed: bool = False  # SageMaker CheckpointConfig, or the checkpoint tag
    running_hours: float = 0.0  # since launch or start
    tags: dict[str, str] = Field(default_factory=dict)
    facts: TypeFacts | None = None
    # An endpoint variant: how its requests are published (SageMaker's documented metrics by endpoint kind):
    # "realtime" Invocations per variant; "async" InvocationsProcessed per variant; "components" Invocations per
    # inference component the endpoint hosts (``components``).
    serving: str = "realtime"
    components: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.account}/{self.region}/{self.kind}/{self.id}"


class Usage(_Frozen):
    """A subject's utilization over the window, per period of ``period_hours``.

    GPU percentages are per GPU; ``busiest`` is the busiest GPU of each period. Percentiles are taken over the
    periods' maxima, so a recommendation holds even for the peaks inside a period.
    """

    window_hours: float
    period_hours: float
    hours_observed: float = 0.0
    gpu_p50: float | None = None
    gpu_p95: float | None = None
    gpu_max: float | None = None
    per_gpu_p95: tuple[float, ...] = ()
    memory_peak_mib: float | None = None  # the fullest GPU's peak memory use
    memory_total_peak_mib: float | None = None  # the peak of the sum over GPUs
    cpu_p95: float | None = None
    chart: tuple[float | None, ...] = ()  # the busiest GPU over the window, a few points a day; None: no data
    # An endpoint variant's requests over the window (AWS/SageMaker Invocations, Sum); None: no datapoint at all,
    # which SageMaker's per-minute metric means no traffic; always None for what serves no requests.
    invocations: float | None = None
    # The GPUs (by index) that published any utilization datapoint; None: not known (a usage written before it was
    # recorded). A machine with fewer than its type's GPUs here is not judged: the silent ones may carry the work.
    gpus_reporting: tuple[int, ...] | None = None

    @property
    def coverage(self) -> float:
        return min(1.0, self.hours_observed / self.window_hours) if self.window_hours else 0.0


class AuditFinding(_Frozen):
    """One recommendation: what runs, what it should run on, and what that saves per month."""

    reason: Reason
    subject: Subject
    summary: str
    current_hourly_usd: float | None  # None: no price known for the type in the region ("cost unknown")
    recommended_type: str | None  # None: stop it
    recommended_market: str = "on-demand"  # or "spot"
    recommended_hourly_usd: float | None = None
    # Over ``cost_hours``: a month (hours_per_month) for what runs continuously, the hours it ran in the window for
    # a job or anything that did not run the whole window (``cost_basis`` "month" or "window"). None: cost unknown.
    monthly_cost_usd: float | None
    monthly_saving_usd: float | None
    cost_basis: str = "month"
    cost_hours: float = 730.0
    confidence: str  # high | medium | low
    risk: str = "high"  # performance risk on the target: low | medium | high (Compute Optimizer's sense)
    projected_gpu_percent: float | None = (
        None  # projected p95 per GPU on the target; None: unknown or stopped
    )
    evidence: dict[str, Any] = Field(default_factory=dict)
    alternatives: tuple[dict[str, Any], ...] = ()
    chart: tuple[float | None, ...] = ()


def family_of(instance_type: str) -> str:
    return instance_type.removeprefix("ml.").split(".", 1)[0]
