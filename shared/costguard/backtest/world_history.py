"""A backtest's history from a world file: the world's own series, as the embedded AWS would publish them,
read as GetMetricData reads them at the backtest's step (each period's Maximum, stamped with its start)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from costguard.aws.inventory import accelerators_of
from costguard.aws.sagemaker import account_of
from costguard.backtest.history import GpuTrack, History, Interval, Subject, SubjectKind, intersect, runs_of
from costguard.detect.gpu import Series
from costguard.local.world import GpuMetrics, Instance, Pattern, World, gpu_series
from costguard.local.world import Notebook as NotebookSpec
from costguard.local.world import TrainingJob as TrainingJobSpec
from costguard.model import Accelerators, Ec2Instance, NotebookInstance, TrainingJob
from costguard.pricing import PriceBook

# Before the period, the world's series hold the verdict window of its first step (command.world_period).
WINDOW = timedelta(hours=2)


def accelerators(instance_type: str) -> Accelerators | None:
    """The accelerators of a type from the instance-type data the embedded AWS serves (moto's)."""
    from moto.ec2.models.instance_types import INSTANCE_TYPES  # the local tooling only

    described = INSTANCE_TYPES.get(instance_type.removeprefix("ml."))
    return accelerators_of(described) if described else None


def _clip(spans: Iterable[Interval], period: Interval) -> list[Interval]:
    clipped = []
    for start, end in spans:
        lo, hi = max(start, period[0]), min(end, period[1])
        if lo < hi:
            clipped.append((lo, hi))
    return clipped


def at_step(series: Series, origin: datetime, step: timedelta) -> Series:
    """The series as GetMetricData returns it with ``Period`` = ``step`` and the ``Maximum`` statistic: one
    point per period [origin + k step, origin + (k + 1) step) that holds any, stamped with its start."""
    out: Series = []
    for at, value in series:
        slot = origin + step * ((at - origin) // step)
        if out and out[-1][0] == slot:
            if value > out[-1][1]:
                out[-1] = (slot, value)
        else:
            out.append((slot, value))
    return out


def _metrics(pattern: Pattern, since: datetime, now: datetime) -> GpuMetrics:
    # Built without validation: a --days longer than the two weeks a world file may ask for is fine here.
    minutes = int((now - since).total_seconds() // 60) + 1
    return GpuMetrics.model_construct(pattern=pattern, lookback_minutes=max(5, minutes), period_seconds=60)


def instance_running(
    spec: Instance, tracks: dict[int, Series], series_start: datetime, now: datetime
) -> list[Interval]:
    """When the instance ran: its own timeline (``timeline``, else ``launched`` to ``stopped_at``), less the
    gaps in its data. As EC2 publishes nothing for a stopped instance, a stretch of more than one missing
    period in which none of its GPUs reports is its owner stopping it (as the account reader reads its
    CPUUtilization); an instance that publishes no GPU series at all ran as its timeline says."""
    own = spec.running_periods(series_start, now)
    times = sorted({at for series in tracks.values() for at, _ in series})
    if not times:
        return own
    running_now = bool(own) and own[-1][1] >= now
    period = timedelta(seconds=spec.gpu_metrics.period_seconds)
    return intersect(own, runs_of(times, period, now, running_now))


def world_history(world: World, start: datetime, step: timedelta, prices: PriceBook) -> History:
    """Every GPU instance, in-progress training job and InService notebook of the world over [start, now).

    An instance ran as its ``timeline`` says (else from ``launched`` until ``stopped_at``, or throughout
    when running at the world's now), and not while its data has a gap (``instance_running``); it publishes
    nothing while stopped. A training job ran from ``started`` to the world's now; a notebook throughout. Jobs
    and notebooks follow their ``gpu_pattern`` for the whole period, published every minute.
    """
    series_start = min(world.series_start, start - WINDOW)
    subjects: list[Subject] = []
    for spec in world.instances:
        subject = _instance_subject(world, spec, start, step, prices, series_start)
        if subject is not None:
            subjects.append(subject)
    for job in world.training_jobs:
        subject = _job_subject(world, job, start, step, prices, series_start)
        if subject is not None:
            subjects.append(subject)
    for notebook in world.notebooks:
        subject = _notebook_subject(world, notebook, start, step, prices, series_start)
        if subject is not None:
            subjects.append(subject)
    return History(start, world.now, step, subjects, source="world")


def _instance_subject(
    world: World, spec: Instance, start: datetime, step: timedelta, prices: PriceBook, series_start: datetime
) -> Subject | None:
    """A GPU instance of the world as a subject, None when costguard would not judge it (no NVIDIA GPU, or
    never running in the world's span)."""
    accel = accelerators(spec.type)
    if accel is None or not accel.is_nvidia:
        return None  # not a GPU instance costguard judges
    own = spec.running_periods(series_start, world.now)
    if not own:
        return None  # never running in the world's span (or stopped at now, and it does not say when it ran)
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
    # An instance publishes nothing before its launch or while its owner had it stopped.
    raw = {i: _within(gpu_series(spec.gpu_metrics, i, world.now), own) for i in range(accel.count)}
    raw = {i: s for i, s in raw.items() if s}
    running = instance_running(spec, raw, series_start, world.now)
    aligned = (world.now - start) % step == timedelta(0)
    on_grid = aligned and timedelta(seconds=spec.gpu_metrics.period_seconds) == step
    return Subject(
        SubjectKind.EC2_INSTANCE,
        instance,
        {i: GpuTrack(s if on_grid else at_step(s, start, step)) for i, s in raw.items()},
        _clip(running, (start, world.now)),
        prices.hourly(spec.type, world.region),
        accel.count,
    )


def _job_subject(
    world: World,
    job: TrainingJobSpec,
    start: datetime,
    step: timedelta,
    prices: PriceBook,
    series_start: datetime,
) -> Subject | None:
    """An in-progress training job of the world on NVIDIA GPUs as a subject (one track per host), else None."""
    accel = accelerators(job.instance_type)
    if job.status != "InProgress" or accel is None or not accel.is_nvidia:
        return None
    arn = f"arn:aws:sagemaker:{world.region}:{world.account}:training-job/{job.name}"
    began = job.started or series_start
    running = _clip([(began, world.now)], (start, world.now))
    metrics = _metrics(job.gpu_pattern, max(began, series_start), world.now)
    hosts = {}
    for host in range(1, job.instance_count + 1):
        per_gpu = [gpu_series(metrics, (host - 1) * accel.count + i, world.now) for i in range(accel.count)]
        # SageMaker publishes each host's sum over its GPUs.
        summed = [(p[0][0], round(sum(v for _, v in p), 2)) for p in zip(*per_gpu, strict=True)]
        hosts[host] = GpuTrack(at_step([(t, v) for t, v in summed if t >= began], start, step))
    return Subject(
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
        {h: t for h, t in hosts.items() if t.series},
        running,
        prices.hourly(job.instance_type, world.region),
        accel.count,
    )


def _notebook_subject(
    world: World,
    notebook: NotebookSpec,
    start: datetime,
    step: timedelta,
    prices: PriceBook,
    series_start: datetime,
) -> Subject | None:
    """An InService notebook instance of the world on NVIDIA GPUs as a subject, else None."""
    accel = accelerators(notebook.instance_type)
    if notebook.status != "InService" or accel is None or not accel.is_nvidia:
        return None
    metrics = _metrics(notebook.gpu_pattern, series_start, world.now)
    tracks = {
        i: GpuTrack(at_step(gpu_series(metrics, i, world.now), start, step)) for i in range(accel.count)
    }
    return Subject(
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
        [(start, world.now)],
        prices.hourly(notebook.instance_type, world.region),
        accel.count,
    )


def _within(series: Series, spans: list[Interval]) -> Series:
    """The points stamped inside the spans (sorted, disjoint)."""
    if len(spans) == 1:
        lo, hi = spans[0]
        return [p for p in series if lo <= p[0] < hi]
    kept: Series = []
    n = 0
    for point in series:
        while n < len(spans) and spans[n][1] <= point[0]:
            n += 1
        if n == len(spans):
            break
        if spans[n][0] <= point[0]:
            kept.append(point)
    return kept
