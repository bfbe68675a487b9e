"""A backtest's history from a world file: the world's own series, as the embedded AWS would publish them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from costguard.aws.inventory import accelerators_of
from costguard.aws.sagemaker import account_of
from costguard.backtest.history import GpuTrack, History, Interval, Subject, SubjectKind
from costguard.local.world import GpuMetrics, World, gpu_series
from costguard.model import Accelerators, Ec2Instance, NotebookInstance, TrainingJob
from costguard.pricing import PriceBook


def accelerators(instance_type: str) -> Accelerators | None:
    """The accelerators of a type from the instance-type data the embedded AWS serves (moto's)."""
    from moto.ec2.models.instance_types import INSTANCE_TYPES  # the local tooling only

    described = INSTANCE_TYPES.get(instance_type.removeprefix("ml."))
    return accelerators_of(described) if described else None


def _clip(start: datetime | None, end: datetime | None, period: Interval) -> list[Interval]:
    lo = max(start or period[0], period[0])
    hi = min(end or period[1], period[1])
    return [(lo, hi)] if lo < hi else []


def world_history(world: World, start: datetime, step: timedelta, prices: PriceBook) -> History:
    """Every GPU instance, in-progress training job and InService notebook of the world over [start, now).

    An instance ran from ``launched`` until ``stopped_at`` (or throughout, when running at the world's now);
    a training job from ``started`` to the world's now; a notebook throughout. Jobs and notebooks follow their
    ``gpu_pattern`` for the whole period.
    """
    period = (start, world.now)
    minutes = int((world.now - start).total_seconds() // 60) + 1
    subjects: list[Subject] = []
    for spec in world.instances:
        accel = accelerators(spec.type)
        if accel is None or not accel.is_nvidia:
            continue  # not a GPU instance costguard judges
        if spec.state != "running" and spec.stopped_at is None:
            continue  # stopped or gone at the world's now, and the world does not say when
        instance = Ec2Instance(
            id=spec.id,
            type=spec.type,
            state="running",
            account=world.account,
            region=world.region,
            launch_time=spec.launched,
            tags={**spec.tags, **({"Name": spec.name} if spec.name else {})},
            lifecycle="spot" if spec.lifecycle == "spot" else None,
            accelerators=accel,
        )
        # An instance publishes nothing before its launch or after its owner stopped it.
        lo, hi = spec.launched or datetime.min.replace(tzinfo=UTC), spec.stopped_at or world.now
        tracks = {
            i: GpuTrack([(t, v) for t, v in gpu_series(spec.gpu_metrics, i, world.now) if lo <= t < hi])
            for i in range(accel.count)
        }
        subjects.append(
            Subject(
                SubjectKind.EC2_INSTANCE,
                instance,
                {i: t for i, t in tracks.items() if t.series},
                _clip(spec.launched, spec.stopped_at, period),
                prices.hourly(spec.type, world.region),
                accel.count,
            )
        )
    for job in world.training_jobs:
        accel = accelerators(job.instance_type)
        if job.status != "InProgress" or accel is None or not accel.is_nvidia:
            continue
        arn = f"arn:aws:sagemaker:{world.region}:{world.account}:training-job/{job.name}"
        running = _clip(job.started, None, period)
        ran = int((world.now - running[0][0]).total_seconds() // 60) if running else 0
        metrics = GpuMetrics(pattern=job.gpu_pattern, lookback_minutes=max(5, ran))
        hosts = {}
        for host in range(1, job.instance_count + 1):
            per_gpu = [
                gpu_series(metrics, (host - 1) * accel.count + i, world.now) for i in range(accel.count)
            ]
            # SageMaker publishes each host's sum over its GPUs.
            hosts[host] = GpuTrack(
                [(p[0][0], round(sum(v for _, v in p), 2)) for p in zip(*per_gpu, strict=True)]
            )
        subjects.append(
            Subject(
                SubjectKind.TRAINING_JOB,
                TrainingJob(
                    name=job.name,
                    arn=arn,
                    account=account_of(arn),
                    region=world.region,
                    instance_type=job.instance_type,
                    instance_count=job.instance_count,
                    started=job.started,
                    tags=job.tags,
                    accelerators=accel,
                ),
                hosts,
                running,
                prices.hourly(job.instance_type, world.region),
                accel.count,
            )
        )
    for notebook in world.notebooks:
        accel = accelerators(notebook.instance_type)
        if notebook.status != "InService" or accel is None or not accel.is_nvidia:
            continue
        metrics = GpuMetrics(pattern=notebook.gpu_pattern, lookback_minutes=minutes)
        tracks = {i: GpuTrack(gpu_series(metrics, i, world.now)) for i in range(accel.count)}
        subjects.append(
            Subject(
                SubjectKind.NOTEBOOK,
                NotebookInstance(
                    name=notebook.name,
                    arn=f"arn:aws:sagemaker:{world.region}:{world.account}:notebook-instance/{notebook.name}",
                    account=world.account,
                    region=world.region,
                    instance_type=notebook.instance_type,
                    status="InService",
                    tags=notebook.tags,
                    accelerators=accel,
                ),
                {i: t for i, t in tracks.items() if t.series},
                [period],
                prices.hourly(notebook.instance_type, world.region),
                accel.count,
            )
        )
    return History(start, world.now, step, subjects, source="world")
