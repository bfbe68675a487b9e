"""The GPU, SageMaker and budget flows on in-memory twins: the reads from costguard/twins.py, the writes from
their own in-memory twins (repeat gate, notice queue, stop limiter) and a recording remediator. No moto, no
LocalStack: each flow runs in milliseconds. The integration tier (tests/integration/) runs the same flows
against the embedded AWS."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from costguard.act.limits import MemoryStopLimiter
from costguard.aws.metrics import GPU_METRIC, GPU_NAMESPACE
from costguard.aws.read_plan import MemoryReadPlans
from costguard.aws.sagemaker import NOTEBOOK_DIMENSION, TRAINING_GPU_METRIC, TRAINING_NAMESPACE
from costguard.events.budgets import BudgetNotification
from costguard.events.budgets import budget_definition as budget
from costguard.flows import budgets as budget_flow
from costguard.flows import gpu as gpu_flow
from costguard.flows import sagemaker as sagemaker_flow
from costguard.model import (
    MARK_TAG_KEY,
    Accelerators,
    Action,
    Ec2Instance,
    NotebookInstance,
    Reason,
    TrainingJob,
    mark_text,
)
from costguard.notify.dedupe import MemoryRepeatGate
from costguard.notify.queue import MemoryNoticeQueue
from costguard.pricing import price_book
from costguard.reads import Reads
from costguard.runtime import Runtime
from costguard.settings import Mode, Settings
from costguard.twins import (
    MemoryBreachLog,
    MemoryBudgets,
    MemoryInventory,
    MemoryMetrics,
    MemorySageMaker,
    RecordingRemediator,
    memory_reads,
)
from tests.conftest import load_event

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
REGION, ACCOUNT = "us-east-1", "123456789012"
A100S = Accelerators(kind="nvidia_gpu", count=8, model="A100", memory_mib=40960)
IDLE, BUSY, PARTIAL = "i-0a1f00000000000a1", "i-0a1f00000000000a2", "i-0a1f00000000000a3"


@pytest.fixture(autouse=True)
def default_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings from the defaults alone, whatever another test left in the environment."""
    for name in [n for n in os.environ if n.startswith("COSTGUARD_")]:
        monkeypatch.delenv(name)


def minutes(value: float, span: timedelta = timedelta(hours=3)) -> list[tuple[datetime, float]]:
    """A per-minute series at ``value`` over ``span`` up to a minute before NOW."""
    count = int(span / timedelta(minutes=1))
    return [(NOW - timedelta(minutes=m), value) for m in range(1, count + 1)]


def p4d(
    instance_id: str, instance_type: str = "p4d.24xlarge", accelerators: Accelerators = A100S
) -> Ec2Instance:
    return Ec2Instance(
        id=instance_id,
        type=instance_type,
        state="running",
        account=ACCOUNT,
        region=REGION,
        launch_time=NOW - timedelta(days=1),
        tags={"team": "ml-research"},
        accelerators=accelerators,
    )


def instance_metrics(metrics: MemoryMetrics, instance_id: str, gpu_percent: float, gpus: int = 8) -> None:
    for index in range(gpus):
        metrics.put(
            REGION,
            GPU_NAMESPACE,
            GPU_METRIC,
            {"InstanceId": instance_id, "index": str(index)},
            minutes(gpu_percent),
        )
    metrics.put(REGION, "AWS/EC2", "CPUUtilization", {"InstanceId": instance_id}, minutes(2.0))
    # An idle host's traffic (bytes a minute): EC2's own metrics agree with an idle GPU reading.
    metrics.put(REGION, "AWS/EC2", "NetworkIn", {"InstanceId": instance_id}, minutes(50_000.0))
    metrics.put(REGION, "AWS/EC2", "NetworkOut", {"InstanceId": instance_id}, minutes(5_000.0))


class World:
    """A runtime on twins, with the twins at hand."""

    def __init__(self, reads: Reads, *, mode: Mode = Mode.REMEDIATE) -> None:
        self.remediator = RecordingRemediator()
        self.queue = MemoryNoticeQueue()
        self.limiter = MemoryStopLimiter(per_hour=20)
        self.runtime = Runtime(
            settings=Settings(mode=mode),
            remediator=self.remediator,
            queue=self.queue,
            gate=MemoryRepeatGate(),
            prices=price_book(),
            limiter=self.limiter,
            reads=reads,
        )


# -- GPU -------------------------------------------------------------------------------------------------


def gpu_world(*instances: tuple[str, float | None]) -> tuple[World, MemoryInventory, MemoryMetrics]:
    inventory, metrics = MemoryInventory(), MemoryMetrics()
    for instance_id, percent in instances:
        inventory.instances.append(p4d(instance_id))
        if percent is not None:
            instance_metrics(metrics, instance_id, percent)
    return World(memory_reads(inventory=inventory, metrics=metrics)), inventory, metrics


def test_an_idle_gpu_instance_is_found_and_marked() -> None:
    world, inventory, metrics = gpu_world((IDLE, 0.0))
    report = gpu_flow.evaluate(REGION, world.runtime, NOW, event_id="sweep-1")
    assert [(f.reason, f.resource.id) for f in report.findings] == [(Reason.GPU_IDLE, IDLE)]
    assert [(d.action, d.resource.id, d.dry_run) for d in report.decisions] == [(Action.MARK, IDLE, False)]
    assert world.remediator.calls == [("mark", IDLE)]
    assert len(world.queue.sent) == 1
    # One inventory read, one ListMetrics, one GetMetricData for the whole region's GPU series, and one for EC2's
    # own CPU and network, which must agree before an idle verdict marks or stops anything.
    assert inventory.calls == [("describe_gpu_instances", REGION, ())]
    assert [c[0] for c in metrics.calls] == ["list_gpu_series", "get_metric_data", "get_metric_data"]


def test_a_busy_instance_costs_no_cpu_or_network_read() -> None:
    world, _, metrics = gpu_world((BUSY, 92.0))
    gpu_flow.evaluate(REGION, world.runtime, NOW)
    assert [c[0] for c in metrics.calls] == ["list_gpu_series", "get_metric_data"]


def idle_ahead(metrics: MemoryMetrics, instance_id: str, minutes_on: int = 60) -> None:
    """Its GPUs idle on from NOW for ``minutes_on`` minutes, as the sweeps after NOW read them."""
    for index in range(8):
        ahead = [(NOW + timedelta(minutes=m), 0.0) for m in range(0, minutes_on + 1)]
        metrics.put(
            REGION, GPU_NAMESPACE, GPU_METRIC, {"InstanceId": instance_id, "index": str(index)}, ahead
        )


def queries_read(metrics: MemoryMetrics) -> list[int]:
    """The number of queries of each GetMetricData call, in order."""
    return [c[2] for c in metrics.calls if c[0] == "get_metric_data"]


def test_an_idle_verdict_reads_ec2s_own_cpu_and_network_at_every_sweep_its_stop_waits() -> None:
    world, inventory, metrics = gpu_world((IDLE, 0.0))
    idle_ahead(metrics, IDLE)
    for name in ("CPUUtilization", "NetworkIn", "NetworkOut"):  # EC2's own metrics go on, an idle host's
        ahead = [(NOW + timedelta(minutes=m), 2.0 if name == "CPUUtilization" else 0.0) for m in range(61)]
        metrics.put(REGION, "AWS/EC2", name, {"InstanceId": IDLE}, ahead)
    first = gpu_flow.evaluate(REGION, world.runtime, NOW)
    assert [d.action for d in first.decisions] == [Action.MARK]
    assert queries_read(metrics) == [8, 3]  # its 8 GPUs, then EC2's CPU, network in and out (one call)
    tags = {**inventory.instances[0].tags, MARK_TAG_KEY: mark_text(NOW)}
    inventory.instances[0] = replace(inventory.instances[0], tags=tags)
    # In its 15-minute grace period nothing is said of it, but EC2's own metrics are read at every sweep: an idle
    # reading of the GPU series alone marks and stops nothing (detect/host_evidence.py).
    for minutes_on, action, queries in (
        (5, Action.NONE, [8, 3]),
        (10, Action.NONE, [8, 3]),
        (15, Action.STOP, [8, 3]),
    ):
        metrics.calls.clear()
        report = gpu_flow.evaluate(REGION, world.runtime, NOW + timedelta(minutes=minutes_on))
        assert [d.action for d in report.decisions] == [action]
        assert queries_read(metrics) == queries
    assert report.decisions[0].finding.evidence["cpu_percent"] == 2.0  # the stop's message states it


def test_a_starved_verdict_reads_its_cpu_and_network() -> None:
    world, _, metrics = gpu_world((BUSY, 30.0))
    report = gpu_flow.evaluate(REGION, world.runtime, NOW)
    assert [f.reason for f in report.findings] == [Reason.GPU_STARVED]
    assert queries_read(metrics) == [8, 2]


# -- the read schedule (detect/read_schedule.py) -----------------------------------------------------------


def scheduled(world: World) -> MemoryReadPlans:
    plans = MemoryReadPlans()
    world.runtime = replace(world.runtime, read_plans=plans)
    return plans


def test_a_busy_instance_is_not_read_again_before_an_idle_verdict_could_come() -> None:
    world, _, metrics = gpu_world((BUSY, 92.0))
    plans = scheduled(world)
    gpu_flow.evaluate(REGION, world.runtime, NOW)
    # Busy until the minute before NOW: an idle verdict needs the 30-minute window clear of it.
    entry = plans.read(ACCOUNT, REGION)[BUSY]
    assert entry.due == NOW - timedelta(minutes=1) + timedelta(minutes=30)
    for minutes_on in (5, 10, 15, 20, 25):
        metrics.calls.clear()
        report = gpu_flow.evaluate(REGION, world.runtime, NOW + timedelta(minutes=minutes_on))
        assert metrics.calls == [] and report.findings == []
    metrics.calls.clear()
    gpu_flow.evaluate(REGION, world.runtime, NOW + timedelta(minutes=30))
    assert [c[0] for c in metrics.calls] == ["list_gpu_series", "get_metric_data"]


def test_a_tag_change_makes_an_instance_due_at_once() -> None:
    world, inventory, metrics = gpu_world((BUSY, 92.0))
    scheduled(world)
    gpu_flow.evaluate(REGION, world.runtime, NOW)
    inventory.instances[0] = replace(
        inventory.instances[0], tags={"team": "ml-research", "costguard:protect": "true"}
    )
    metrics.calls.clear()
    gpu_flow.evaluate(REGION, world.runtime, NOW + timedelta(minutes=5))
    assert [c[0] for c in metrics.calls] == ["list_gpu_series", "get_metric_data"]


def test_an_instance_working_again_is_unmarked_and_not_read_again_before_its_bound() -> None:
    world, inventory, metrics = gpu_world((BUSY, 92.0))
    plans = scheduled(world)
    tags = inventory.instances[0].tags
    inventory.instances[0] = replace(
        inventory.instances[0], tags={**tags, MARK_TAG_KEY: mark_text(NOW - timedelta(minutes=5))}
    )
    report = gpu_flow.evaluate(REGION, world.runtime, NOW)
    assert [d.action for d in report.decisions] == [Action.UNMARK]
    inventory.instances[0] = replace(inventory.instances[0], tags=tags)  # the mark removed, as AWS has it now
    metrics.calls.clear()
    assert gpu_flow.evaluate(REGION, world.runtime, NOW + timedelta(minutes=5)).findings == []
    assert metrics.calls == []
    assert plans.read(ACCOUNT, REGION)[BUSY].due == NOW - timedelta(minutes=1) + timedelta(minutes=30)


def test_an_unchanged_standing_idle_finding_rewrites_its_entry_at_its_slots_only() -> None:
    world, _, metrics = gpu_world((IDLE, 0.0))
    for index in range(8):  # idle on, for the hour the test sweeps
        ahead = [(NOW + timedelta(minutes=m), 0.0) for m in range(0, 61)]
        metrics.put(REGION, GPU_NAMESPACE, GPU_METRIC, {"InstanceId": IDLE, "index": str(index)}, ahead)
    world.runtime = replace(world.runtime, settings=Settings(mode=Mode.NOTIFY))
    plans = scheduled(world)
    first = gpu_flow.evaluate(REGION, world.runtime, NOW)
    assert [f.reason for f in first.findings] == [Reason.GPU_IDLE]
    written = plans.items_written
    # Read again on the idle window's slots only, and found idle again: the entry is rewritten at each slot's
    # read (its next slot), at no other sweep.
    reads, writes = [], []
    for minutes_on in range(5, 65, 5):
        metrics.calls.clear()
        report = gpu_flow.evaluate(REGION, world.runtime, NOW + timedelta(minutes=minutes_on))
        if metrics.calls:
            reads.append(minutes_on)
            assert [f.reason for f in report.findings] == [Reason.GPU_IDLE]
        if plans.items_written != written:
            writes.append(minutes_on)
            written = plans.items_written
    assert reads == writes == [30, 60]
    assert plans.read(ACCOUNT, REGION)[IDLE].due == NOW + timedelta(minutes=90)


def test_a_busy_gpu_instance_gives_nothing() -> None:
    world, _, _ = gpu_world((BUSY, 92.0))
    report = gpu_flow.evaluate(REGION, world.runtime, NOW)
    assert report.findings == [] and report.decisions == []
    assert world.remediator.calls == [] and world.queue.sent == []


def test_a_gpu_instance_with_silent_gpus_is_partial_and_never_stopped() -> None:
    inventory, metrics = MemoryInventory([p4d(PARTIAL)]), MemoryMetrics()
    instance_metrics(metrics, PARTIAL, 0.0, gpus=5)  # 3 of its 8 GPUs publish nothing
    world = World(memory_reads(inventory=inventory, metrics=metrics))
    report = gpu_flow.evaluate(REGION, world.runtime, NOW)
    assert [(f.reason, f.resource.id) for f in report.findings] == [(Reason.GPU_METRICS_PARTIAL, PARTIAL)]
    assert all(d.action not in (Action.STOP, Action.MARK) for d in report.decisions)
    assert world.remediator.calls == []


def test_the_sweep_judges_each_instance_on_its_own() -> None:
    world, _, _ = gpu_world((IDLE, 0.0), (BUSY, 92.0))
    report = gpu_flow.handle_sweep(world.runtime, NOW, REGION, "sweep-2")
    assert [(f.reason, f.resource.id) for f in report.findings] == [(Reason.GPU_IDLE, IDLE)]


def test_an_alarm_rereads_its_instance_through_the_runtime() -> None:
    from costguard.events.cloudwatch import AlarmStateChange

    world, inventory, _ = gpu_world((IDLE, 0.0))
    event = AlarmStateChange.model_validate(load_event("cloudwatch-alarm-gpu-idle.json"))
    report = gpu_flow.handle_alarm(event, world.runtime, NOW)
    assert ("describe_instance", REGION, IDLE) in inventory.calls
    assert [(f.reason, f.resource.id) for f in report.findings] == [(Reason.GPU_IDLE, IDLE)]


# -- SageMaker -------------------------------------------------------------------------------------------


def test_an_idle_training_job_is_stalled_and_an_idle_notebook_is_found() -> None:
    job = TrainingJob(
        name="bert-pretrain",
        arn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/bert-pretrain",
        account=ACCOUNT,
        region=REGION,
        instance_type="ml.p4d.24xlarge",
        instance_count=2,
        started=NOW - timedelta(hours=5),
        accelerators=A100S,
    )
    notebook = NotebookInstance(
        name="dana-scratch",
        arn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:notebook-instance/dana-scratch",
        account=ACCOUNT,
        region=REGION,
        instance_type="ml.g5.xlarge",
        status="InService",
        accelerators=Accelerators(kind="nvidia_gpu", count=1, model="A10G", memory_mib=24576),
    )
    stopped = NotebookInstance(
        name="stopped-one",
        arn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:notebook-instance/stopped-one",
        account=ACCOUNT,
        region=REGION,
        instance_type="ml.g5.xlarge",
        status="Stopped",
        accelerators=notebook.accelerators,
    )
    metrics = MemoryMetrics()
    for host in (1, 2):
        dims = {"Host": f"bert-pretrain/algo-{host}"}
        metrics.put(REGION, TRAINING_NAMESPACE, TRAINING_GPU_METRIC, dims, minutes(0.0))
    metrics.put_gpu(REGION, {NOTEBOOK_DIMENSION: "dana-scratch", "index": "0"}, minutes(0.5))
    listed = MemorySageMaker(jobs=[job], notebooks=[notebook, stopped])
    world = World(memory_reads(sagemaker=listed, metrics=metrics))

    report = sagemaker_flow.evaluate(REGION, world.runtime, NOW, "sweep-3")

    found = {(f.reason, f.resource.id) for f in report.findings}
    assert (Reason.JOB_STALLED, "bert-pretrain") in found
    assert (Reason.NOTEBOOK_IDLE, "dana-scratch") in found
    assert not any(f.resource.id == "stopped-one" for f in report.findings)
    assert {d.resource.id for d in report.decisions if d.action is Action.MARK} == {
        "bert-pretrain",
        "dana-scratch",
    }
    assert [c[0] for c in listed.calls] == [
        "in_progress_training_jobs",
        "in_service_notebooks",
        "in_service_endpoints",
    ]


# -- budgets ---------------------------------------------------------------------------------------------


def test_a_budget_breach_lists_what_runs_costliest_first_and_marks_the_idle() -> None:
    a10gs = Accelerators(kind="nvidia_gpu", count=4, model="A10G", memory_mib=24576)
    inventory, metrics = MemoryInventory([p4d(BUSY, "g5.12xlarge", a10gs), p4d(IDLE)]), MemoryMetrics()
    instance_metrics(metrics, IDLE, 0.0)
    instance_metrics(metrics, BUSY, 92.0, gpus=4)
    cheap = NotebookInstance(
        name="dana-scratch",
        arn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:notebook-instance/dana-scratch",
        account=ACCOUNT,
        region=REGION,
        instance_type="ml.g5.xlarge",
        status="InService",
        tags={"team": "ml-research"},
        accelerators=Accelerators(kind="nvidia_gpu", count=1, model="A10G", memory_mib=24576),
    )
    metrics.put_gpu(REGION, {NOTEBOOK_DIMENSION: "dana-scratch", "index": "0"}, minutes(92.0))
    budgets = MemoryBudgets(
        {
            (ACCOUNT, "ml-research-gpu"): budget(
                "ml-research-gpu", limit_usd=5000, actual_usd=5120.40, scope_tags={"team": "ml-research"}
            )
        }
    )
    reads = memory_reads(inventory, metrics, MemorySageMaker(notebooks=[cheap]), budgets)
    world = World(reads)
    breaches = MemoryBreachLog()
    event = BudgetNotification.model_validate(load_event("budget-actual-100-ml-research.json"))

    report = budget_flow.handle_budget_notification(event, world.runtime, NOW, breaches)

    [summary] = [f for f in report.findings if "ranked" in f.evidence]
    assert summary.reason is Reason.BUDGET_BREACH
    ranked = [(r["id"], r["hourly_usd"], r["verdict"]) for r in summary.evidence["ranked"]]
    assert ranked == [(IDLE, 21.958, "idle"), (BUSY, 5.672, "busy"), ("dana-scratch", 1.408, "busy")]
    assert summary.summary.index(IDLE) < summary.summary.index(BUSY) < summary.summary.index("dana-scratch")
    assert summary.evidence["escalation"] == "actual>=100:stop_idle"
    # stop_idle: the idle instance is marked, the busy ones are left alone; the breach is kept for follow-up.
    assert world.remediator.calls == [("mark", IDLE)]
    assert budgets.calls == [("describe_budget", ACCOUNT, "ml-research-gpu")]
    assert [account for _, account, _ in breaches.in_force(NOW)] == [ACCOUNT]
