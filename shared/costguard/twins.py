"""In-memory twins of the flows' reads (costguard/reads.py) and a recording remediator: a flow run on them in a
unit test, in milliseconds, without moto. For tests only: no Lambda function and no flow imports this module.

Each twin answers from plain model objects (what the adapters return) and records the calls made to it
(``calls``), so a test can say what was read as well as what was decided.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from costguard.aws.budgets import BreachLog, end_of_month
from costguard.aws.metrics import GPU_METRIC, GPU_NAMESPACE, Dimensions, MetricSet, Query, Series
from costguard.detect.budgets import BudgetAlert, Scope
from costguard.detect.escalation import Escalation
from costguard.model import Accelerators, Ec2Instance, Endpoint, NotebookInstance, Resource, TrainingJob
from costguard.reads import Reads

Call = tuple[Any, ...]


class MemoryInventory:
    """EC2 instances, of any state and type; ``describe_gpu_instances`` returns the running ones with
    accelerators, as DescribeInstances filtered by state and the accelerator catalog do."""

    def __init__(self, instances: Iterable[Ec2Instance] = ()) -> None:
        self.instances = list(instances)
        self.calls: list[Call] = []

    def describe_gpu_instances(
        self, region: str, *, instance_ids: Sequence[str] | None = None
    ) -> list[Ec2Instance]:
        self.calls.append(("describe_gpu_instances", region, tuple(instance_ids or ())))
        return [
            i
            for i in self.instances
            if i.region == region
            and i.state == "running"
            and i.accelerators is not None
            and (not instance_ids or i.id in instance_ids)
        ]

    def describe_instance(self, region: str, instance_id: str) -> Ec2Instance | None:
        self.calls.append(("describe_instance", region, instance_id))
        return next((i for i in self.instances if i.region == region and i.id == instance_id), None)


class MemoryMetrics:
    """CloudWatch series by (region, namespace, metric, dimensions), each a list of (time, value) already at the
    query's period and statistic (the twin neither aggregates nor resamples). ``get_metric_data`` returns the
    points of each query's series within [start, end), oldest first; a ``SampleCount`` query counts 1 for each
    (one sample a period)."""

    def __init__(self) -> None:
        self.series: dict[tuple[str, str, str, Dimensions], Series] = {}
        self.calls: list[Call] = []

    def put(
        self, region: str, namespace: str, metric: str, dimensions: Mapping[str, str], points: Series
    ) -> None:
        key = (region, namespace, metric, tuple(sorted(dimensions.items())))
        self.series.setdefault(key, []).extend(points)

    def put_gpu(self, region: str, dimensions: Mapping[str, str], points: Series) -> None:
        """One per-GPU series as the CloudWatch agent publishes it (CWAgent, nvidia_smi_utilization_gpu)."""
        self.put(region, GPU_NAMESPACE, GPU_METRIC, dimensions, points)

    def list_gpu_series(
        self, region: str, instance_ids: Sequence[str], dimension: str = "InstanceId"
    ) -> dict[str, list[Dimensions]]:
        self.calls.append(("list_gpu_series", region, tuple(instance_ids), dimension))
        found: dict[str, list[Dimensions]] = {}
        for where, namespace, metric, dims in self.series:
            owner = dict(dims).get(dimension)
            if (where, namespace, metric) != (region, GPU_NAMESPACE, GPU_METRIC):
                continue
            if owner is not None and owner in instance_ids:
                found.setdefault(owner, []).append(dims)
        return found

    def get_metric_data(
        self, region: str, queries: Sequence[Query], start: datetime, end: datetime, period: int
    ) -> MetricSet:
        self.calls.append(("get_metric_data", region, len(queries), start, end, period))
        result = MetricSet()
        for query in queries:
            points = self.series.get((region, query.namespace, query.metric, tuple(sorted(query.dimensions))))
            resource, measure, sub = query.key
            merged = result.series[resource].setdefault((measure, sub), [])
            within = [p for p in points or [] if start <= p[0] < end]
            counted = query.stat == "SampleCount"
            merged.extend([(at, 1.0) for at, _ in within] if counted else within)
        for by_measure in result.series.values():
            for points in by_measure.values():
                points.sort(key=lambda p: p[0])
        return result


class MemorySageMaker:
    """Training jobs (all in progress), notebooks (InService ones listed) and endpoints (all in service)."""

    def __init__(
        self,
        jobs: Iterable[TrainingJob] = (),
        notebooks: Iterable[NotebookInstance] = (),
        endpoints: Iterable[Endpoint] = (),
        catalog: Mapping[str, Accelerators | None] | None = None,
    ) -> None:
        self.jobs, self.notebooks, self.endpoints = list(jobs), list(notebooks), list(endpoints)
        self.catalog = dict(catalog or {})
        self.calls: list[Call] = []

    def in_progress_training_jobs(self, region: str) -> list[TrainingJob]:
        self.calls.append(("in_progress_training_jobs", region))
        return [j for j in self.jobs if j.region == region]

    def in_service_notebooks(self, region: str) -> list[NotebookInstance]:
        self.calls.append(("in_service_notebooks", region))
        return [n for n in self.notebooks if n.region == region and n.status == "InService"]

    def in_service_endpoints(self, region: str) -> list[Endpoint]:
        self.calls.append(("in_service_endpoints", region))
        return [e for e in self.endpoints if e.region == region]

    def inference_components(self, region: str) -> dict[str, tuple[str, ...]]:
        """The endpoints' own ``inference_components``."""
        self.calls.append(("inference_components", region))
        return {e.name: e.inference_components for e in self.endpoints if e.region == region}

    def instance_accelerators(
        self, region: str, instance_types: Sequence[str]
    ) -> dict[str, Accelerators | None]:
        """The types the endpoints' variants run on, and those given as ``catalog``."""
        self.calls.append(("instance_accelerators", region))
        known = {
            v.instance_type: v.accelerators for e in self.endpoints for v in e.variants if v.instance_type
        }
        known |= self.catalog
        return {t: known.get(t) for t in instance_types}


class MemoryBudgets:
    """DescribeBudget answers (their ``Budget``) by account and name; an unknown one does not exist."""

    def __init__(self, budgets: Mapping[tuple[str, str], dict[str, Any]] | None = None) -> None:
        self.budgets = dict(budgets or {})
        self.calls: list[Call] = []

    def describe_budget(self, account: str, name: str) -> dict[str, Any] | None:
        self.calls.append(("describe_budget", account, name))
        return self.budgets.get((account, name))


class MemoryBreachLog(BreachLog):
    """The breach log in memory: the same records and the same reading of them, without the state table."""

    def __init__(self) -> None:
        super().__init__(table="")
        self.records: list[dict[str, Any]] = []

    def remember(
        self,
        alert: BudgetAlert,
        account: str,
        region: str,
        now: datetime,
        *,
        escalation: Escalation,
        scope: Scope,
    ) -> None:
        self.records.append(self.record_of(alert, account, region, now, escalation=escalation, scope=scope))

    def _records(self, now: datetime) -> list[dict[str, Any]]:
        """The records whose budget period has not ended, as the state table's expiration keeps them."""
        return [r for r in self.records if end_of_month(datetime.fromisoformat(r["at"])) > now]


class RecordingRemediator:
    """Changes nothing; records each call as (verb, resource id)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def stop(self, resource: Resource) -> None:
        self.calls.append(("stop", resource.id))

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        self.calls.append(("mark", resource.id))

    def unmark(self, resource: Resource) -> None:
        self.calls.append(("unmark", resource.id))


def memory_reads(
    inventory: MemoryInventory | None = None,
    metrics: MemoryMetrics | None = None,
    sagemaker: MemorySageMaker | None = None,
    budgets: MemoryBudgets | None = None,
) -> Reads:
    """Every read in memory (an empty twin for any not given)."""
    return Reads(
        inventory=inventory or MemoryInventory(),
        metrics=metrics or MemoryMetrics(),
        sagemaker=sagemaker or MemorySageMaker(),
        budgets=budgets or MemoryBudgets(),
    )
