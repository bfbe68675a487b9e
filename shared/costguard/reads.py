"""What the GPU, SageMaker and budget flows read from AWS, as Protocols, and the AWS reads behind them.

The writes already go through Protocols with an in-memory twin each (notify/dedupe.RepeatGate,
notify/queue.NoticeQueue, act/executor.StopLimiter and Remediator); the reads get the same treatment here, so a
flow can be run on in-memory twins (costguard/twins.py, for tests only) and a flow test takes milliseconds.

``AwsReads()`` is what a deployed function reads with: each method calls the adapter function of the same name
(aws/inventory.py, aws/metrics.py, aws/sagemaker.py, aws/budgets.py), imported and looked up when called: nothing
changes in what is called or how, and a function loads only the adapters its flows call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from costguard.model import Accelerators, Ec2Instance, Endpoint, NotebookInstance, TrainingJob

if TYPE_CHECKING:
    from costguard.aws.metrics import Dimensions, MetricSet, Query


class Inventory(Protocol):
    """EC2 instances (aws/inventory.py)."""

    def describe_gpu_instances(
        self, region: str, *, instance_ids: Sequence[str] | None = None
    ) -> list[Ec2Instance]:
        """Running instances that carry accelerators (of these ids, when given)."""
        ...

    def describe_instance(self, region: str, instance_id: str) -> Ec2Instance | None:
        """One instance of any state and type; None when it is gone."""
        ...


class Metrics(Protocol):
    """CloudWatch (aws/metrics.py)."""

    def list_gpu_series(
        self, region: str, instance_ids: Sequence[str], dimension: str = "InstanceId"
    ) -> dict[str, list[Dimensions]]:
        """The per-GPU series published for these resources, with their exact dimensions, by resource."""
        ...

    def get_metric_data(
        self, region: str, queries: Sequence[Query], start: datetime, end: datetime, period: int
    ) -> MetricSet:
        """Every query's series over [start, end), oldest first."""
        ...


class SageMakerReads(Protocol):
    """SageMaker listings (aws/sagemaker.py)."""

    def in_progress_training_jobs(self, region: str) -> list[TrainingJob]: ...

    def in_service_notebooks(self, region: str) -> list[NotebookInstance]: ...

    def in_service_endpoints(self, region: str) -> list[Endpoint]: ...

    def inference_components(self, region: str) -> dict[str, tuple[str, ...]]:
        """The InService inference components, by the name of the endpoint hosting them."""
        ...

    def instance_accelerators(
        self, region: str, instance_types: Sequence[str]
    ) -> dict[str, Accelerators | None]:
        """The accelerators of these (ml.) types; None for a type without any."""
        ...


class Budgets(Protocol):
    """AWS Budgets (aws/budgets.py)."""

    def describe_budget(self, account: str, name: str) -> dict[str, Any] | None:
        """A DescribeBudget answer's ``Budget``; None when it does not exist."""
        ...


class AwsInventory:
    def describe_gpu_instances(
        self, region: str, *, instance_ids: Sequence[str] | None = None
    ) -> list[Ec2Instance]:
        from costguard.aws import inventory

        return inventory.describe_gpu_instances(region, instance_ids=instance_ids)

    def describe_instance(self, region: str, instance_id: str) -> Ec2Instance | None:
        from costguard.aws import inventory

        return inventory.describe_instance(region, instance_id)


class AwsMetrics:
    def list_gpu_series(
        self, region: str, instance_ids: Sequence[str], dimension: str = "InstanceId"
    ) -> dict[str, list[Dimensions]]:
        from costguard.aws import metrics

        return metrics.list_gpu_series(region, instance_ids, dimension)

    def get_metric_data(
        self, region: str, queries: Sequence[Query], start: datetime, end: datetime, period: int
    ) -> MetricSet:
        from costguard.aws import metrics

        return metrics.get_metric_data(region, queries, start, end, period)


class AwsSageMaker:
    def in_progress_training_jobs(self, region: str) -> list[TrainingJob]:
        from costguard.aws import sagemaker

        return sagemaker.in_progress_training_jobs(region)

    def in_service_notebooks(self, region: str) -> list[NotebookInstance]:
        from costguard.aws import sagemaker

        return sagemaker.in_service_notebooks(region)

    def in_service_endpoints(self, region: str) -> list[Endpoint]:
        from costguard.aws import sagemaker

        return sagemaker.in_service_endpoints(region)

    def inference_components(self, region: str) -> dict[str, tuple[str, ...]]:
        from costguard.aws import inference_components

        return inference_components.in_service(region)

    def instance_accelerators(
        self, region: str, instance_types: Sequence[str]
    ) -> dict[str, Accelerators | None]:
        from costguard.aws.inventory import catalog

        return catalog.lookup(region, instance_types)


class AwsBudgets:
    def describe_budget(self, account: str, name: str) -> dict[str, Any] | None:
        from costguard.aws import budgets

        return budgets.describe_budget(account, name)


@dataclass(frozen=True)
class Reads:
    """Every read the flows make, one object per service. The default is AWS."""

    inventory: Inventory = field(default_factory=AwsInventory)
    metrics: Metrics = field(default_factory=AwsMetrics)
    sagemaker: SageMakerReads = field(default_factory=AwsSageMaker)
    budgets: Budgets = field(default_factory=AwsBudgets)


def aws_reads() -> Reads:
    """The reads a deployed function makes: all of them from AWS."""
    return Reads()
