"""EC2 GPU instances: alarms follow instance state; alarms and the sweep lead to GPU verdicts."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from costguard.act.aws import permissions_for
from costguard.act.shadow import key_of, overlay
from costguard.aws import alarms, budgets, inventory, metrics
from costguard.aws.idle_history import PERMISSIONS as IDLE_HISTORY_PERMISSIONS
from costguard.aws.metrics import Dimensions, MetricSet, evidence_queries, gpu_queries
from costguard.aws.read_plan import PERMISSIONS as READ_PLAN_PERMISSIONS
from costguard.aws.read_plan import ReadPlans
from costguard.detect import read_schedule
from costguard.detect.budgets import keep_budget_marks
from costguard.detect.gpu import (
    PERIOD,
    GpuReading,
    Thresholds,
    Verdict,
    gpu_instance_findings,
    mean_of,
    read_gpus,
    thresholds_from,
    unmatched_alarm_finding,
)
from costguard.detect.host_evidence import corroborated, read_host
from costguard.events.cloudwatch import AlarmStateChange
from costguard.events.ec2 import InstanceStateChange
from costguard.model import Ec2Instance, Finding, Reason, ResourceKind
from costguard.observability import logger
from costguard.observability import metrics as emf
from costguard.pipeline import Report
from costguard.policy import marked_at
from costguard.reads import Metrics
from costguard.runtime import ACT_PERMISSIONS, PRICES_PERMISSIONS, Runtime

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
    | READ_PLAN_PERMISSIONS  # the read schedule (COSTGUARD_READ_SCHEDULE)
)
# The sweep's period: what each sweep observes for the adaptive policy's histories, and the read schedule's step.
SWEEP_STEP = timedelta(minutes=5)
# The GPU series read and judged at a time (4 GetMetricData calls): a sweep's memory stays flat at any fleet size.
CHUNK_SERIES = 2000
# The verdicts whose message states the instance's CPU and network: read for those only.
_EVIDENCE_VERDICTS = (Verdict.IDLE, Verdict.STARVED)
# An idle reading of the GPU series, which anyone allowed cloudwatch:PutMetricData can write, stops nothing unless
# EC2's own metrics agree (detect/host_evidence.py): its CPU, network in and network out are read at every sweep.
_HOST_EVIDENCE_METRICS = 3

_GONE = {"stopping", "stopped", "shutting-down", "terminated"}


def gpu_instances(
    region: str, runtime: Runtime, instance_ids: Sequence[str] | None = None
) -> list[Ec2Instance]:
    """The running GPU and accelerator instances (of these ids), read through the runtime's inventory."""
    return runtime.reads.inventory.describe_gpu_instances(region, instance_ids=instance_ids)


def with_marks(instances: Sequence[Ec2Instance], runtime: Runtime, now: datetime) -> list[Ec2Instance]:
    """The instances as a live run would read them: in notify mode, with the marks it keeps in the state table
    as the mark tag (act/shadow.py), so that an instance working again has its mark cancelled and a marked one
    is read at every sweep, in both modes."""
    return overlay(
        instances,
        runtime.shadow_marks,
        now,
        lambda i: key_of(i.account, i.region, ResourceKind.EC2_INSTANCE, i.id),
        dry=runtime.dry_for(Reason.GPU_IDLE),
    )


def read_fleet(
    region: str,
    instances: Sequence[Ec2Instance],
    thresholds: Thresholds,
    now: datetime,
    reads: Metrics,
    series: dict[str, list[Dimensions]],
) -> MetricSet:
    """Every GPU series of these instances over the longer of the two windows (``series``: their published
    GPU series, as listed)."""
    if not instances:
        return MetricSet()
    window = max(thresholds.idle_window, thresholds.starved_window)
    return reads.get_metric_data(
        region, gpu_queries(instances, series), now - window, now, int(PERIOD.total_seconds())
    )


def read_evidence(
    region: str,
    instances: Sequence[Ec2Instance],
    thresholds: Thresholds,
    now: datetime,
    reads: Metrics,
    *,
    network: frozenset[str] | None = None,
    outbound: frozenset[str] = frozenset(),
) -> MetricSet:
    """CPU of these instances over the starved window, network in of those in ``network`` (all when None) and
    network out of those in ``outbound``: read only for the verdicts that state or need them, in one batched read
    (ceil(queries / 500) GetMetricData calls)."""
    if not instances:
        return MetricSet()
    queries = evidence_queries(instances, network=network, outbound=outbound)
    return reads.get_metric_data(
        region, queries, now - thresholds.starved_window, now, int(PERIOD.total_seconds())
    )


def evidence_wanted(
    chunk: Sequence[Ec2Instance],
    readings: dict[str, GpuReading],
    runtime: Runtime,
    thresholds: Thresholds,
    now: datetime,
    planner: Planner | None,
) -> tuple[list[Ec2Instance], frozenset[str], frozenset[str]]:
    """The instances whose CPU is read, of those the ones whose network in is read too, and the ones whose network
    out is read too: a message's figures (``read_schedule.evidence_metrics``), and for every idle reading, news or
    not, what EC2 itself says over the idle window (``_HOST_EVIDENCE_METRICS``), without which it stops nothing."""
    counts: dict[str, int] = {}
    for instance in chunk:
        reading = readings.get(instance.id)
        standing = planner is not None and planner.standing(instance)
        if (
            reading is not None
            and reading.verdict is Verdict.IDLE
            and _may_change(instance, runtime, standing, now)
        ):
            counts[instance.id] = _HOST_EVIDENCE_METRICS
            continue
        if reading is None or reading.verdict not in _EVIDENCE_VERDICTS or standing:
            continue  # nothing new to state: no finding built
        found = gpu_instance_findings(instance, reading, price=None, thresholds=thresholds, now=now)
        counts[instance.id] = read_schedule.evidence_metrics(
            reading.verdict,
            found,
            standing=standing,
            tags=instance.tags,
            policy=runtime.policy,
            now=now,
        )
    wanted = [i for i in chunk if counts.get(i.id, 0) > 0]
    network = frozenset(i.id for i in wanted if counts[i.id] > 1)
    return wanted, network, frozenset(i.id for i in wanted if counts[i.id] > 2)


def _may_change(instance: Ec2Instance, runtime: Runtime, standing: bool, now: datetime) -> bool:
    """Whether this sweep's decision on an idle instance may mark or stop it, so that EC2's own metrics must be
    read: news (a first idle reading), an instance not marked, a grace period over (or ending before the next
    sweep), or the adaptive policy (which may end a grace period early). A marked instance in its grace period is
    decided by waiting: nothing read for it."""
    mark = marked_at(instance.tags)
    if not standing or mark is None or runtime.settings.idle_policy != "fixed":
        return True
    return mark + runtime.policy.grace <= now + SWEEP_STEP


def readings_of(
    instances: Sequence[Ec2Instance], data: MetricSet, thresholds: Thresholds, now: datetime
) -> dict[str, GpuReading]:
    """Each NVIDIA instance's GPU reading (other accelerators publish other metrics: not judged here)."""
    return {
        i.id: read_gpus(data.gpus(i.id), now, thresholds, i.accelerators.count)
        for i in instances
        if i.accelerators is not None and i.accelerators.is_nvidia
    }


def findings_for(
    instances: Sequence[Ec2Instance],
    data: MetricSet,
    runtime: Runtime,
    thresholds: Thresholds,
    now: datetime,
    event_id: str | None,
    readings: dict[str, GpuReading],
) -> list[Finding]:
    findings: list[Finding] = []
    start = now - thresholds.starved_window
    for instance in instances:
        reading = readings.get(instance.id)
        if reading is None:
            continue
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
    """Re-read the instances and their metrics, then decide. The same path for an alarm and the sweep; a sweep
    (every instance of the region) reads by the read schedule when it is on."""
    instances = with_marks(gpu_instances(region, runtime, instance_ids), runtime, now)
    plans = runtime.read_plans if instance_ids is None and runtime.settings.reads_by_schedule else None
    return judge(region, runtime, now, instances, event_id, plans=plans)


def judge(
    region: str,
    runtime: Runtime,
    now: datetime,
    instances: Sequence[Ec2Instance],
    event_id: str | None,
    *,
    plans: ReadPlans | None = None,
) -> Report:
    """Read the metrics of these instances (those due, with ``plans``), a chunk at a time, then decide."""
    thresholds = thresholds_from(runtime.settings)
    nvidia = [i for i in instances if i.accelerators and i.accelerators.is_nvidia]
    slots = runtime.repeat_window >= thresholds.idle_window
    planner = Planner.load(plans, nvidia, now, thresholds, slots) if plans is not None and nvidia else None
    due = planner.due(nvidia) if planner is not None else nvidia
    findings: list[Finding] = []
    if due:
        series = runtime.reads.metrics.list_gpu_series(region, [i.id for i in due])
        for chunk in chunks(due, series):
            findings += judge_chunk(region, chunk, series, runtime, thresholds, now, event_id, planner)
    if planner is not None:
        planner.save()
    # A budget breach at stop_all marks busy instances on purpose: their marks are not cancelled here.
    scopes = budgets.stop_all_scopes_for(findings, runtime.settings.state_table, now)
    return runtime.act(keep_budget_marks(findings, scopes), now)


def chunks(
    instances: Sequence[Ec2Instance], series: dict[str, list[Dimensions]], most: int = CHUNK_SERIES
) -> Iterator[list[Ec2Instance]]:
    """The instances in runs of at most ``most`` GPU series (an instance is never split): each run is read,
    judged and let go before the next, so a sweep's memory stays flat whatever the fleet."""
    chunk: list[Ec2Instance] = []
    count = 0
    for instance in instances:
        size = len(series.get(instance.id, []))
        if chunk and count + size > most:
            yield chunk
            chunk, count = [], 0
        chunk.append(instance)
        count += size
    if chunk:
        yield chunk


def judge_chunk(
    region: str,
    chunk: Sequence[Ec2Instance],
    series: dict[str, list[Dimensions]],
    runtime: Runtime,
    thresholds: Thresholds,
    now: datetime,
    event_id: str | None,
    planner: Planner | None,
) -> list[Finding]:
    """One run of instances: their GPU series, the evidence of the verdicts that state it, the findings."""
    reads = runtime.reads.metrics
    data = read_fleet(region, chunk, thresholds, now, reads, series)
    readings = readings_of(chunk, data, thresholds, now)
    adaptive_on = runtime.settings.idle_policy == "adaptive" and runtime.idle_histories is not None
    unreadable(chunk, readings)
    wanted, network, outbound = evidence_wanted(chunk, readings, runtime, thresholds, now, planner)
    if adaptive_on:  # the adaptive policy learns from every instance's CPU (the network only messages state)
        wanted = list(chunk)
    data.add(read_evidence(region, wanted, thresholds, now, reads, network=network, outbound=outbound))
    found = findings_for(chunk, data, runtime, thresholds, now, event_id, readings)
    if adaptive_on:
        found = adapted(chunk, data, found, runtime, thresholds, now)
    found = with_host_evidence(found, data, thresholds, now, frozenset(i.id for i in wanted))
    if planner is not None:
        planner.read(chunk, data, found)
    return found


def with_host_evidence(
    findings: Sequence[Finding],
    data: MetricSet,
    thresholds: Thresholds,
    now: datetime,
    read: Collection[str] | None = None,
) -> list[Finding]:
    """Each GPU-idle finding held against EC2's own CPU and network over the idle window: it stays remediable
    only when they agree (detect/host_evidence.py). The last word on the finding: nothing after it makes one
    remediable again. ``read``: the instances whose EC2 metrics were read (evidence_wanted); another (marked, in
    its grace period) is decided by waiting this sweep, and is held to them when its stop is due."""
    window = int(thresholds.idle_window.total_seconds() // 60)
    held = []
    for finding in findings:
        waits = read is not None and finding.resource.id not in read
        if finding.reason is Reason.GPU_IDLE and finding.remediable and not waits:
            instance_id = finding.resource.id
            host = read_host(
                data.measure(instance_id, "cpu"),
                data.measure(instance_id, "network_in"),
                data.measure(instance_id, "network_out"),
                now,
                thresholds.idle_window,
            )
            finding = corroborated(finding, host, window)
            if not finding.remediable:
                logger.warning(
                    "GPU series read idle, EC2's own metrics do not agree: told, not acted on",
                    extra={"instance_id": instance_id, "ec2_metrics": finding.evidence.get("ec2_metrics")},
                )
                emf.add_metric(name="UncorroboratedGpuIdle", unit=MetricUnit.Count, value=1)
        held.append(finding)
    return held


def unreadable(chunk: Sequence[Ec2Instance], readings: dict[str, GpuReading]) -> None:
    """Log and count each instance whose GPU series hold a reading outside 0-100%: no verdict is built on it."""
    for instance in chunk:
        reading = readings.get(instance.id)
        if reading is not None and reading.verdict is Verdict.OUT_OF_RANGE:
            logger.warning(
                "GPU reading out of range: no verdict",
                extra={
                    "instance_id": instance.id,
                    "readings": [(i, v, at.isoformat()) for i, v, at in reading.out_of_range[:10]],
                },
            )
            emf.add_metric(name="OutOfRangeGpuReadings", unit=MetricUnit.Count, value=1)


@dataclass
class Planner:
    """The read schedule of one account and region during a sweep: who is due, and what comes next."""

    plans: ReadPlans
    account: str
    region: str
    now: datetime
    thresholds: Thresholds
    before: dict[str, read_schedule.Entry]
    after: dict[str, read_schedule.Entry]
    slots: bool = True  # standing findings read on slots: the repeat window is at least the idle window

    @classmethod
    def load(
        cls,
        plans: ReadPlans,
        instances: Sequence[Ec2Instance],
        now: datetime,
        thresholds: Thresholds,
        slots: bool = True,
    ) -> Planner:
        account, region = instances[0].account, instances[0].region
        try:
            before = plans.read(account, region)
        except Exception:  # the state table is unreadable: every instance is read, as without the schedule
            logger.warning("read schedule unreadable: reading every instance", extra={"region": region})
            before = {}
        # Entries of the instances running now only: those of instances gone are dropped at the write.
        kept = {i.id: before[i.id] for i in instances if i.id in before}
        return cls(plans, account, region, now, thresholds, before, kept, slots)

    def due(self, instances: Sequence[Ec2Instance]) -> list[Ec2Instance]:
        return [
            i
            for i in instances
            if read_schedule.is_due(self.before.get(i.id), self.now, tags=i.tags, launched=i.launch_time)
        ]

    def standing(self, instance: Ec2Instance) -> bool:
        """Whether the instance's finding stands unmarked since its last read: told already (its repeats are
        not news), so its CPU and network, which only the message states, are not read again."""
        return read_schedule.is_standing(
            self.before.get(instance.id), tags=instance.tags, launched=instance.launch_time
        )

    def read(self, instances: Sequence[Ec2Instance], data: MetricSet, findings: Sequence[Finding]) -> None:
        """The next entry of each instance just read, from its points and what was found of it."""
        found: dict[str, list[Finding]] = {}
        for finding in findings:
            found.setdefault(finding.resource.id, []).append(finding)
        for instance in instances:
            count = instance.accelerators.count if instance.accelerators else 1
            self.after[instance.id] = read_schedule.after_read(
                self.before.get(instance.id),
                found.get(instance.id, []),
                data.gpus(instance.id),
                known=self.now,
                now=self.now,
                thresholds=self.thresholds,
                expected_gpus=count,
                tags=instance.tags,
                launched=instance.launch_time,
                slots=self.slots,
            )

    def save(self) -> None:
        try:
            self.plans.write(self.account, self.region, self.before, self.after)
        except Exception:  # not kept: the entries stored before are still lower bounds, so nothing is missed
            logger.warning("read schedule not written", extra={"region": self.region})


def adapted(
    instances: Sequence[Ec2Instance],
    data: MetricSet,
    findings: list[Finding],
    runtime: Runtime,
    thresholds: Thresholds,
    now: datetime,
) -> list[Finding]:
    """The adaptive idle policy (idle_policy.py, the same code the backtest runs): each instance's history
    observes the sweep period just ended, then its idle finding is advised with its peers' prior. One batched
    read and one batched write of the histories and pools (aws/idle_history.py)."""
    # Loaded here: only the adaptive policy (COSTGUARD_IDLE_POLICY=adaptive, not the default) needs them.
    from costguard import idle_policy
    from costguard.detect import adaptive

    store = runtime.idle_histories
    assert store is not None
    observed = [
        idle_policy.Observed(
            instance.id,
            instance.account,
            instance.region,
            "ec2",
            instance.type,
            instance.tags,
            adaptive.period_status(
                data.gpus(instance.id),
                instance.accelerators.count if instance.accelerators else 1,
                now - SWEEP_STEP,
                now,
                thresholds.idle_percent,
            ),
            mean_of(data.measure(instance.id, "cpu"), now - SWEEP_STEP, now),
            instance.launch_time,
        )
        for instance in instances
        if instance.accelerators and instance.accelerators.is_nvidia
    ]
    params = idle_policy.params_of(runtime.settings)
    return idle_policy.adapted(observed, findings, store, params, now, SWEEP_STEP)


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
        return judge(event.region, runtime, now, with_marks([found], runtime, now), event.id)
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
