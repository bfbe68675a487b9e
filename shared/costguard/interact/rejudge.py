"""Stop now, judged again at the click: the resource must still be what costguard marked it for.

A mark may be minutes old when someone clicks; the GPUs may have gone back to work since. Before a person's
stop, the resource is read as the sweep reads it: an instance's GPU series (per-minute Maximum, the idle
window), a training job's hosts, a notebook's GPUs. The stop goes ahead only when that reading is still idle
for an idleness reason, and, whatever the reason, only while the mark still says the same reason. A reading
that fails refuses the stop: costguard never stops what it could not look at.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from costguard.aws import clients, inventory, metrics
from costguard.aws import sagemaker as sagemaker_api
from costguard.aws.inventory import catalog
from costguard.aws.sagemaker import NOTEBOOK_DIMENSION, account_of
from costguard.aws.sagemaker_metrics import gpu_queries as sagemaker_gpu_queries
from costguard.aws.sagemaker_metrics import job_key, notebook_key
from costguard.detect.gpu import PERIOD, GpuReading, Thresholds, Verdict, read_gpus
from costguard.detect.sagemaker import read_training_job
from costguard.model import NotebookInstance, Reason, Resource, ResourceKind, TrainingJob, mark_reason
from costguard.observability import logger
from costguard.permissions import needs

# The reads of a re-judgement: the GPU series as the sweeps list and read them, the job or notebook described.
PERMISSIONS = (
    metrics.READ_PERMISSIONS
    | metrics.LIST_PERMISSIONS
    | inventory.PERMISSIONS
    | needs("sagemaker:DescribeTrainingJob", "sagemaker:DescribeNotebookInstance")
)

# The reasons a reading of the GPUs answers: idle then, idle now?
IDLENESS = frozenset({Reason.GPU_IDLE, Reason.JOB_STALLED, Reason.NOTEBOOK_IDLE})
_RUNNING = {
    ResourceKind.EC2_INSTANCE: "running",
    ResourceKind.TRAINING_JOB: "InProgress",
    ResourceKind.NOTEBOOK: "InService",
}


class Rejudge(Protocol):
    def refusal(self, reason: Reason, resource: Resource, now: datetime) -> str | None:
        """Why a person's stop must not go ahead now (None: the reason still stands)."""
        ...


def mark_refusal(reason: Reason, resource: Resource) -> str | None:
    """A mark that says why (model.mark_text) must say this click's reason: one marked for a cost ceiling is
    not stopped from a stale idle card, nor the reverse."""
    marked_for = mark_reason(resource.tags)
    if marked_for is not None and marked_for != reason.value:
        return f"its mark is for {marked_for}, not {reason.value}: that finding has been cleared"
    return None


def reading_refusal(reading: GpuReading, thresholds: Thresholds, what: str) -> str | None:
    if reading.verdict is Verdict.IDLE:
        return None
    minutes = int(thresholds.idle_window.total_seconds() // 60)
    if reading.verdict in (Verdict.BUSY, Verdict.STARVED):
        busiest = reading.busiest_gpu_percent
        level = f" (busiest GPU at {busiest:.0f}%)" if busiest is not None else ""
        return f"{what} is working now{level}: it is not idle over the last {minutes} minutes"
    if reading.verdict is Verdict.PARTIAL:
        return f"not every GPU of {what} reports now: costguard cannot confirm it is idle"
    return f"{what} has no GPU metrics over the last {minutes} minutes: costguard cannot confirm it is idle"


@dataclass(frozen=True)
class SweepRejudge:
    """The sweep's own reads, for one resource (AWS; the member account's through clients.acting_in)."""

    thresholds: Thresholds

    def refusal(self, reason: Reason, resource: Resource, now: datetime) -> str | None:
        if (why := mark_refusal(reason, resource)) is not None:
            return why
        if reason not in IDLENESS:
            return None
        try:
            return self._reading_refusal(resource, now)
        except Exception as error:  # unreadable now: never stop what was not looked at
            logger.warning(
                "re-judgement failed", extra={"resource": resource.key, "cause": type(error).__name__}
            )
            return f"costguard could not read its GPU metrics now ({type(error).__name__})"

    def _reading_refusal(self, resource: Resource, now: datetime) -> str | None:
        region = resource.region
        window = max(self.thresholds.idle_window, self.thresholds.starved_window)
        period = int(PERIOD.total_seconds())
        what = resource.display_name
        if resource.kind is ResourceKind.EC2_INSTANCE:
            instance = inventory.describe_instance(region, resource.id)
            if instance is None or instance.state != _RUNNING[resource.kind]:
                return f"{what} is not running"
            if instance.accelerators is None or not instance.accelerators.is_nvidia:
                return f"{what} has no NVIDIA GPUs costguard can read"
            series = metrics.list_gpu_series(region, [instance.id])
            data = metrics.get_metric_data(
                region, metrics.gpu_queries([instance], series), now - window, now, period
            )
            reading = read_gpus(data.gpus(instance.id), now, self.thresholds, instance.accelerators.count)
            return reading_refusal(reading, self.thresholds, what)
        if resource.kind is ResourceKind.TRAINING_JOB:
            job = _training_job(region, resource.id)
            if job is None:
                return f"{what} is no longer in progress"
            data = metrics.get_metric_data(
                region, sagemaker_gpu_queries([job], [], {}), now - window, now, period
            )
            reading = read_training_job(data.gpus(job_key(job)), job, now, self.thresholds)
            return reading_refusal(reading, self.thresholds, what)
        if resource.kind is ResourceKind.NOTEBOOK:
            notebook = _notebook(region, resource.id)
            if notebook is None or notebook.accelerators is None:
                return f"{what} is not in service on a GPU"
            series = metrics.list_gpu_series(region, [notebook.name], NOTEBOOK_DIMENSION)
            data = metrics.get_metric_data(
                region, sagemaker_gpu_queries([], [notebook], series), now - window, now, period
            )
            reading = read_gpus(
                data.gpus(notebook_key(notebook)), now, self.thresholds, notebook.accelerators.count
            )
            return reading_refusal(reading, self.thresholds, what)
        return f"costguard does not stop a {resource.kind.replace('_', ' ')}"


def _training_job(region: str, name: str) -> TrainingJob | None:
    described = sagemaker_api.described_training_job(region, name, tags={})
    if described is None or described.get("TrainingJobStatus") != _RUNNING[ResourceKind.TRAINING_JOB]:
        return None
    config = described.get("ResourceConfig") or {}
    instance_type = config.get("InstanceType")
    if not instance_type:
        return None
    accelerators = catalog.lookup(region, [instance_type])[instance_type]
    if accelerators is None or not accelerators.is_nvidia:
        return None
    return TrainingJob(
        name=name,
        arn=described["TrainingJobArn"],
        account=account_of(described["TrainingJobArn"]),
        region=region,
        instance_type=instance_type,
        instance_count=int(config.get("InstanceCount") or 1),
        started=described.get("TrainingStartTime"),
        accelerators=accelerators,
    )


def _notebook(region: str, name: str) -> NotebookInstance | None:
    sagemaker = clients.sagemaker(region)
    described = sagemaker.describe_notebook_instance(NotebookInstanceName=name)
    status = str(described.get("NotebookInstanceStatus") or "")
    instance_type = str(described.get("InstanceType") or "")
    if status != _RUNNING[ResourceKind.NOTEBOOK] or not instance_type:
        return None
    accelerators = catalog.lookup(region, [instance_type])[instance_type]
    if accelerators is None or not accelerators.is_nvidia:
        return None
    return NotebookInstance(
        name=name,
        arn=described["NotebookInstanceArn"],
        account=account_of(described["NotebookInstanceArn"]),
        region=region,
        instance_type=instance_type,
        status=status,
        accelerators=accelerators,
    )
