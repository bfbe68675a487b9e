"""EC2 GPU instances: alarms follow instance state; alarms and the sweep lead to GPU verdicts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from costguard.act.aws import permissions_for
from costguard.aws import alarms, budgets, inventory, metrics
from costguard.aws.idle_history import PERMISSIONS as IDLE_HISTORY_PERMISSIONS
from costguard.aws.idle_history import history_key
from costguard.aws.metrics import MetricSet, metric_queries
from costguard.detect import adaptive
from costguard.detect.budgets import keep_budget_marks
from costguard.detect.gpu import (
    PERIOD,
    Thresholds,
    gpu_instance_findings,
    mean_of,
    read_gpus,
    thresholds_from,
    unmatched_alarm_finding,
)
from costguard.events.cloudwatch import AlarmStateChange
from costguard.events.ec2 import InstanceStateChange
from costguard.model import Ec2Instance, Finding, Reason, ResourceKind
from costguard.observability import logger
from costguard.observability import metrics as emf
from costguard.pipeline import Report
from costguard.reads import Metrics
from costguard.runtime import ACT_PERMISSIONS, PRICES_PERMISSIONS, Runtime
from costguard.settings import Settings

# handle_state_change and reconcile keep the alarms.
ALARMS_PERMISSIONS = inventory.PERMISSIONS | alarms.PERMISSIONS
# handle_alarm and handle_sweep: verdicts, marks and stops of EC2 instances.
VERDICT_PERMISSIONS = (
    inventory.PERMISSIONS
    | metrics.READ_PERMISSIONS
    | metrics.LIST_PERMISSIONS
    | budgets.BREACH_LOG_PERMISSIONS
    | ACT_PERMISSIONS
    | PRICES_PERMISSIONS
    | permissions_for(ResourceKind.EC2_INSTANCE)
    | IDLE_HISTORY_PERMISSIONS  # the adaptive idle policy (COSTGUARD_IDLE_POLICY=adaptive)
)
# The sweep's period: what each sweep observes for the adaptive policy's histories.
SWEEP_STEP = timedelta(minutes=5)

_GONE = {"stopping", "stopped", "shutting-down", "terminated"}


def gpu_instances(
    region: str, runtime: Runtime, instance_ids: Sequence[str] | None = None
) -> list[Ec2Instance]:
    """The running GPU and accelerator instances (of these ids), read through the runtime's inventory."""
    return runtime.reads.inventory.describe_gpu_instances(region, instance_ids=instance_ids)


def read_fleet(
    region: str, instances: Sequence[Ec2Instance], thresholds: Thresholds, now: datetime, reads: Metrics
) -> MetricSet:
    """Every series the verdicts need, over the longer of the two windows."""
    if not instances:
        return MetricSet()
    series = reads.list_gpu_series(region, [i.id for i in instances])
    window = max(thresholds.idle_window, thresholds.starved_window)
    return reads.get_metric_data(
        region, metric_queries(instances, series), now - window, now, int(PERIOD.total_seconds())
    )


def findings_for(
    instances: Sequence[Ec2Instance],
    data: MetricSet,
    runtime: Runtime,
    thresholds: Thresholds,
    now: datetime,
    event_id: str | None,
) -> list[Finding]:
    findings: list[Finding] = []
    start = now - thresholds.starved_window
    for instance in instances:
        if instance.accelerators is None or not instance.accelerators.is_nvidia:
            continue  # Neuron and other accelerators publish other metrics: not judged here
        reading = read_gpus(data.gpus(instance.id), now, thresholds, instance.accelerators.count)
        network = mean_of(data.measure(instance.id, "network_in"), start, now)
        findings += gpu_instance_findings(
            instance,
            reading,
            price=runtime.prices.hourly(instance.type, instance.region),
            thresholds=thresholds,
            now=now,
            cpu_percent=mean_of(data.measure(instance.id, "cpu"), start, now),
            network_in_mb=round(network / 1e6, 2) if network is not None else None,
            event_id=event_id,
        )
    return findings


def evaluate(
    region: str,
    runtime: Runtime,
    now: datetime,
    *,
    instance_ids: Sequence[str] | None = None,
    event_id: str | None = None,
) -> Report:
    """Re-read the instances and their metrics, then decide. The same path for an alarm and the sweep."""
    return judge(region, runtime, now, gpu_instances(region, runtime, instance_ids), event_id)


def judge(
    region: str, runtime: Runtime, now: datetime, instances: Sequence[Ec2Instance], event_id: str | None
) -> Report:
    """Read the metrics of these instances, then decide."""
    thresholds = thresholds_from(runtime.settings)
    nvidia = [i for i in instances if i.accelerators and i.accelerators.is_nvidia]
    data = read_fleet(region, nvidia, thresholds, now, runtime.reads.metrics)
    findings = findings_for(instances, data, runtime, thresholds, now, event_id)
    if runtime.settings.idle_policy == "adaptive" and runtime.idle_histories is not None:
        findings = adapted(instances, data, findings, runtime, thresholds, now)
    # A budget breach at stop_all marks busy instances on purpose: their marks are not cancelled here.
    scopes = budgets.stop_all_scopes_for(findings, runtime.settings.state_table, now)
    return runtime.act(keep_budget_marks(findings, scopes), now)


def adaptive_params(settings: Settings) -> adaptive.AdaptiveParams:
    return adaptive.AdaptiveParams(
        idle_window=timedelta(minutes=settings.idle_window_minutes),
        grace=timedelta(minutes=settings.grace_minutes),
        floor=timedelta(minutes=settings.adaptive_floor_minutes),
        horizon=timedelta(minutes=settings.adaptive_horizon_minutes),
        interruption_cost_usd=settings.interruption_cost_usd,
    )


def adapted(
    instances: Sequence[Ec2Instance],
    data: MetricSet,
    findings: list[Finding],
    runtime: Runtime,
    thresholds: Thresholds,
    now: datetime,
) -> list[Finding]:
    """The adaptive idle policy (detect/adaptive.py), the same code the backtest runs: each instance's history
    observes the sweep period just ended, then its idle finding is advised. One batched read of the histories
    and one batched write of those that changed (aws/idle_history.py)."""
    store, params = runtime.idle_histories, adaptive_params(runtime.settings)
    assert store is not None
    judged = [i for i in instances if i.accelerators and i.accelerators.is_nvidia]
    keys = {i.id: history_key(i.account, i.region, i.id) for i in judged}
    known = store.read(keys.values())
    changed: dict[str, adaptive.IdleHistory] = {}
    histories: dict[str, adaptive.IdleHistory] = {}
    for instance in judged:
        history = known.get(keys[instance.id]) or adaptive.IdleHistory()
        seen = history.last_seen
        # Running since before it was last seen (EC2 sets LaunchTime at each start): no stop in between, however
        # long ago the history was last written (it is written only when it changes).
        if seen is not None and instance.launch_time is not None and instance.launch_time < seen:
            history.last_seen = max(seen, now - SWEEP_STEP)
        status = adaptive.period_status(
            data.gpus(instance.id),
            instance.accelerators.count if instance.accelerators else 1,
            now - SWEEP_STEP,
            now,
            thresholds.idle_percent,
        )
        cpu = mean_of(data.measure(instance.id, "cpu"), now - SWEEP_STEP, now)
        if history.observe(now, status, cpu, params) or keys[instance.id] not in known:
            changed[keys[instance.id]] = history
        histories[instance.id] = history
    store.write(changed, now)
    out = []
    for finding in findings:
        learned = histories.get(finding.resource.id)
        if finding.reason is Reason.GPU_IDLE and learned is not None:
            advice = adaptive.advise(learned, now, finding.hourly_usd, params)
            finding = adaptive.adapt(finding, advice, now, params)
        out.append(finding)
    return out


def handle_alarm(event: AlarmStateChange, runtime: Runtime, now: datetime) -> Report:
    """Re-read the alarm's instance and judge it. An alarm costguard cannot match to a running NVIDIA GPU
    instance (its name names none, or the instance is gone, stopped or has no NVIDIA GPU) is logged, counted
    and reported: never dropped without a word."""
    if event.detail.state.value != "ALARM":
        return Report()  # leaving ALARM: the sweep takes care of cancelled marks
    name = event.detail.alarm_name
    instance_id = alarms.alarm_instance(name)
    # One DescribeInstances, any state and any type: what became of it is what the report says.
    inventory_reads = runtime.reads.inventory
    found = inventory_reads.describe_instance(event.region, instance_id) if instance_id is not None else None
    if found and found.state == "running" and found.accelerators and found.accelerators.is_nvidia:
        return judge(event.region, runtime, now, [found], event.id)
    logger.warning(
        "GPU alarm matches no running NVIDIA GPU instance",
        extra={
            "event_id": event.id,
            "alarm": name,
            "instance_id": instance_id,
            "instance_state": found.state if found else None,
        },
    )
    emf.add_metric(name="UnmatchedGpuAlarms", unit=MetricUnit.Count, value=1)
    finding = unmatched_alarm_finding(
        name,
        account=event.account,
        region=event.region,
        now=now,
        instance_id=instance_id,
        instance=found,
        event_id=event.id,
    )
    return runtime.act([finding], now)


def handle_sweep(runtime: Runtime, now: datetime, default_region: str, event_id: str | None) -> Report:
    combined = Report()
    for region in runtime.settings.regions or (default_region,):
        combined.extend(evaluate(region, runtime, now, event_id=event_id))
    return combined


def handle_state_change(event: InstanceStateChange, runtime: Runtime) -> dict[str, Any]:
    """Running GPU instance: create its alarm. Stopped or gone: delete it."""
    instance_id, state = event.detail.instance_id, event.detail.state
    if state in _GONE:
        return {"alarms_deleted": alarms.delete_alarms(event.region, [instance_id])}
    if state != "running":
        return {"ignored": state}
    gpu = [
        i
        for i in gpu_instances(event.region, runtime, [instance_id])
        if i.accelerators and i.accelerators.is_nvidia
    ]
    made = alarms.put_alarms(event.region, [i.id for i in gpu], thresholds_from(runtime.settings))
    return {"alarms_created": made}


def reconcile(runtime: Runtime, default_region: str) -> dict[str, Any]:
    """Repair drift: alarms for running GPU instances that lack one, none for instances that are gone."""
    summary: dict[str, Any] = {}
    for region in runtime.settings.regions or (default_region,):
        running = {
            i.id for i in gpu_instances(region, runtime) if i.accelerators and i.accelerators.is_nvidia
        }
        alarmed = alarms.alarmed_instances(region)
        summary[region] = {
            "alarms_created": alarms.put_alarms(
                region, sorted(running - alarmed), thresholds_from(runtime.settings)
            ),
            "alarms_deleted": alarms.delete_alarms(region, sorted(alarmed - running)),
        }
    return summary
