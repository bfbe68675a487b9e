"""What a message calls each finding (its title, by reason) and each kind of resource (one, several)."""

from __future__ import annotations

from costguard.model import Reason, ResourceKind

TITLES: dict[Reason, str] = {
    Reason.TRAINING_JOB_FAILED: "Training job failed",
    Reason.GPU_IDLE: "Idle GPU instance",
    Reason.GPU_STARVED: "Data-starved GPUs",
    Reason.GPU_METRICS_MISSING: "No GPU metrics",
    Reason.MEMBER_UNREACHABLE: "Member account not reachable",
    Reason.JOB_STALLED: "Training job stalled",
    Reason.NOTEBOOK_IDLE: "Idle GPU notebook",
    Reason.ENDPOINT_IDLE: "GPU endpoint with no traffic",
    Reason.ENDPOINT_UNDERUSED: "GPU endpoint serving a trickle",
    Reason.BATCH_RETRY_LOOP: "Batch job failing in a retry loop",
    Reason.SPOT_INTERRUPTION: "Spot instance being interrupted",
    Reason.JOB_FAILURE_LOOP: "Training job failing in a loop",
    Reason.JOB_COST_WARNING: "Training job nearing its cost ceiling",
    Reason.JOB_COST_CEILING: "Training job over its cost ceiling",
    Reason.TRAINING_DIVERGED: "Training run diverged",
    Reason.JOB_HUNG: "Training job hung",
    Reason.JOB_HANG_UNKNOWN: "Training job silent: hang cannot be told",
    Reason.CHECKPOINT_STALE: "Checkpoints stopped",
    Reason.JOB_NO_MAX_RUNTIME: "Training job without a sane max runtime",
    Reason.SPOT_WITHOUT_CHECKPOINT: "Spot training job without checkpoints",
    Reason.SPOT_RECOMMENDED: "Long on-demand training job: spot recommended",
    Reason.DATA_CROSS_REGION: "Training input read from another region",
    Reason.UNTAGGED_GPU_SPEND: "GPU launched without cost-allocation tags",
    Reason.TRAINING_DIGEST: "Daily training digest",
    Reason.CAPACITY_RESERVATION_IDLE: "Capacity reservation paid for but unused",
    Reason.BEDROCK_THROUGHPUT_IDLE: "Bedrock Provisioned Throughput nobody invokes",
    Reason.CAPACITY_BLOCK_EXPIRING: "Capacity Block ending: checkpoint now",
    Reason.CAPACITY_BLOCK_UNUSED: "Capacity Block paid for with nothing running",
    Reason.CAPACITY_RESERVATION_STATE: "Capacity reservation state change",
    Reason.BUDGET_BREACH: "Budget breached: what is burning money now",
    Reason.COST_ANOMALY: "Cost anomaly",
    Reason.COSTGUARD_ALARM: "costguard itself needs attention",
    Reason.POD_GPU_IDLE: "Kubernetes pods holding idle GPUs",
    Reason.POD_GPU_STARVED: "Kubernetes pods with data-starved GPUs",
    Reason.GPU_NODE_UNUSED: "GPU node kept alive with no GPU pod",
    Reason.EKS_CLUSTER_UNREACHABLE: "EKS cluster costguard cannot reach",
    Reason.HYPERPOD_NODE_UNHEALTHY: "HyperPod node that cannot work",
    Reason.HYPERPOD_CLUSTER_FAILED: "HyperPod cluster failed or stuck creating",
    Reason.HYPERPOD_PROVISIONING_FAILED: "HyperPod could not provision a node",
    Reason.HYPERPOD_IDLE: "HyperPod instance group with idle GPUs",
    Reason.GPU_METRICS_PARTIAL: "GPU metrics missing for some GPUs",
    Reason.GPU_ALARM_UNMATCHED: "GPU-idle alarm for an instance that is gone",
    Reason.GPU_ACTIVE_AGAIN: "GPU instance at work again",
    Reason.RIGHTSIZE_IDLE: "Idle all window: stop it",
    Reason.RIGHTSIZE_DOWNSIZE: "Fewer GPUs would do",
    Reason.RIGHTSIZE_FAMILY: "A cheaper GPU family would do",
    Reason.RIGHTSIZE_MODEL_SIZE: "Sized above its model's needs",
    Reason.RIGHTSIZE_SPOT: "Checkpointed work on on-demand: spot would do",
    Reason.TRAINIUM_CANDIDATE: "Transformer training Trainium could take",
    Reason.COMMITMENT_CANDIDATE: "Steady GPU use a Savings Plan could cover",
    Reason.ORPHANED_STORAGE: "Storage GPU work left behind",
    Reason.LEDGER_WEEKLY: "What costguard saved this week",
    Reason.LEDGER_DAILY: "What costguard saved yesterday",
}


TITLE_OF_CODE = {reason.value: title for reason, title in TITLES.items()}  # a group counts by reason code


# What a resource of each kind is called in a sentence: one, and several.
_KIND_NOUNS: dict[ResourceKind, tuple[str, str]] = {
    ResourceKind.EC2_INSTANCE: ("EC2 instance", "EC2 instances"),
    ResourceKind.TRAINING_JOB: ("training job", "training jobs"),
    ResourceKind.NOTEBOOK: ("notebook instance", "notebook instances"),
    ResourceKind.ENDPOINT: ("endpoint", "endpoints"),
    ResourceKind.CAPACITY_RESERVATION: ("capacity reservation", "capacity reservations"),
    ResourceKind.PROVISIONED_THROUGHPUT: ("Provisioned Throughput", "Provisioned Throughputs"),
    ResourceKind.BATCH_JOB: ("Batch job", "Batch jobs"),
    ResourceKind.BATCH_QUEUE: ("Batch queue", "Batch queues"),
    ResourceKind.JOB_FAMILY: ("job family", "job families"),
    ResourceKind.TRAINING_DIGEST: ("training digest", "training digests"),
    ResourceKind.BUDGET: ("budget", "budgets"),
    ResourceKind.COST_ANOMALY: ("cost anomaly", "cost anomalies"),
    ResourceKind.COSTGUARD_ALARM: ("costguard alarm", "costguard alarms"),
    ResourceKind.MEMBER_REGION: ("member account and region", "member accounts and regions"),
    ResourceKind.EKS_WORKLOAD: ("Kubernetes workload", "Kubernetes workloads"),
    ResourceKind.EKS_NODE: ("GPU node", "GPU nodes"),
    ResourceKind.EKS_CLUSTER: ("EKS cluster", "EKS clusters"),
    ResourceKind.HYPERPOD_CLUSTER: ("HyperPod cluster", "HyperPod clusters"),
    ResourceKind.HYPERPOD_NODE: ("HyperPod node", "HyperPod nodes"),
    ResourceKind.HYPERPOD_GROUP: ("HyperPod instance group", "HyperPod instance groups"),
    ResourceKind.SAVINGS_LEDGER: ("savings report", "savings reports"),
}


def kind_noun(kind: ResourceKind | None, count: int = 1) -> str:
    one, several = _KIND_NOUNS.get(kind, ("resource", "resources")) if kind else ("resource", "resources")
    return one if count == 1 else several
