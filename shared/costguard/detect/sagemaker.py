"""SageMaker verdicts: stalled training jobs, idle GPU notebooks, GPU endpoints nobody calls or that serve a
trickle on GPUs they barely use. Pure."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from costguard.detect.gpu import (
    PARTIAL_HELP,
    GpuReading,
    Series,
    Thresholds,
    Verdict,
    numbers,
    partial_summary,
    read_gpus,
)
from costguard.model import (
    MARK_TAG_KEY,
    Accelerators,
    Endpoint,
    EndpointVariant,
    Finding,
    NotebookInstance,
    Reason,
    Resource,
    ResourceKind,
    TrainingJob,
    mark_reason,
)
from costguard.pricing import Price

# What SageMaker publishes for a training job (aws/sagemaker.py reads it): one series per host.
JOB_METRIC = "GPUUtilization in /aws/sagemaker/TrainingJobs"

JOB_METRICS_HELP = (
    "SageMaker publishes per-host instance metrics for every training job itself; "
    "check the job's Monitor section in the console, and the CloudWatch service quotas."
)

NOTEBOOK_AGENT_HELP = (
    "Attach the stack's lifecycle configuration <stack>-gpu-agent to the notebook (stopped): at each start it runs "
    "the CloudWatch agent with the NVIDIA section, named by the notebook (NotebookInstanceName). "
    'README "Prerequisite: the CloudWatch agent on GPU hosts".'
)


def _minutes(delta: timedelta) -> int:
    return int(delta.total_seconds() // 60)


def per_gpu(series: Series, gpu_count: int) -> Series:
    """SageMaker sums a host's GPUUtilization over its GPUs (0-800 on eight): this is the mean per GPU."""
    count = max(1, gpu_count)
    return [(t, round(v / count, 2)) for t, v in series]


def read_training_job(
    hosts: Mapping[int, Series], job: TrainingJob, now: datetime, thresholds: Thresholds
) -> GpuReading:
    """A job's reading from its per-host series (keyed by N of ``algo-N``), normalised per GPU.

    Every host must report and stay under the idle threshold: a silent host might be the one working.
    STARVED follows read_gpus' working-minutes rule per host, but gives no notice (training_job_findings): a
    host's series is the mean of its GPUs, which cannot tell GPUs that are all under-fed from one busy GPU
    beside idle ones.
    """
    gpus = job.accelerators.count if job.accelerators else 1
    normalised = {host: per_gpu(series, gpus) for host, series in hosts.items()}
    return read_gpus(normalised, now, thresholds, job.instance_count, range(1, job.instance_count + 1))


def hourly_usd(price: Price | None, count: int) -> float | None:
    """What ``count`` instances cost per hour at ``price``; None when the price is unknown (never zero)."""
    return round(price.usd_per_hour * count, 4) if price is not None else None


def _price_evidence(price: Price | None) -> dict[str, object]:
    return {
        "price_usd_per_instance_hour": price.usd_per_hour if price else None,
        "price_source": price.source if price else "unknown",
    }


@dataclass(frozen=True)
class _Findings:
    """Makes the findings about one resource: what they all share (resource, time, price, evidence) and what
    each adds. ``remediable``, ``cancels_mark`` and ``repeat_scope`` among the extras are the finding's own
    fields; the rest goes into its evidence."""

    resource: Resource
    now: datetime
    event_id: str | None
    hourly_usd: float | None
    evidence: dict[str, object]

    def __call__(self, reason: Reason, summary: str, **extra: object) -> Finding:
        return Finding(
            reason=reason,
            resource=self.resource,
            summary=summary,
            observed_at=self.now,
            event_id=self.event_id,
            hourly_usd=self.hourly_usd,
            remediable=bool(extra.pop("remediable", False)),
            cancels_mark=bool(extra.pop("cancels_mark", False)),
            repeat_scope=str(extra.pop("repeat_scope")) if "repeat_scope" in extra else None,
            evidence=self.evidence | extra,
        )


# -- training jobs ------------------------------------------------------------------------------


def job_resource(job: TrainingJob) -> Resource:
    return Resource(
        kind=ResourceKind.TRAINING_JOB,
        id=job.name,
        name=job.name,
        arn=job.arn,
        account=job.account,
        region=job.region,
        instance_type=job.instance_type,
        instance_count=job.instance_count,
        tags=job.tags,
        started=job.started,
    )


def training_job_findings(
    job: TrainingJob,
    reading: GpuReading,
    *,
    price: Price | None,
    thresholds: Thresholds,
    now: datetime,
    event_id: str | None = None,
) -> list[Finding]:
    """``job_stalled`` when every host's GPUs idle through the window; no metrics after the window is
    ``gpu_metrics_missing``; a marked job that works again cancels its pending stop."""
    resource = job_resource(job)
    gpus = job.accelerators.count if job.accelerators else 1
    model = job.accelerators.model if job.accelerators else "GPU"
    hosts = f"{job.instance_count} x {job.instance_type} ({gpus} x {model} each)"
    window = _minutes(thresholds.idle_window)
    evidence: dict[str, object] = {
        "hosts": hosts,
        "started": job.started.isoformat() if job.started else None,
        "metric": f"{JOB_METRIC} per host, divided by its {gpus} GPUs",
        **_price_evidence(price),
    }
    finding = _Findings(resource, now, event_id, hourly_usd(price, job.instance_count), evidence)
    # Working again cancels a mark for idleness only: a job marked for its cost ceiling or a diverged run works
    # all along, and its own sweep (flows/training_ceilings.py) decides on that mark (model.mark_text).
    marked = MARK_TAG_KEY in resource.tags and mark_reason(resource.tags) in (None, Reason.JOB_STALLED.value)
    if reading.verdict is Verdict.IDLE:
        busiest = f"{job.name}/algo-{reading.busiest_gpu_index}"
        return [
            finding(
                Reason.JOB_STALLED,
                _job_stalled_summary(job, hosts, busiest, reading, thresholds, window),
                remediable=True,
                busiest_host=busiest,
                busiest_host_gpu_percent=reading.busiest_gpu_percent,
                window_minutes=window,
            )
        ]
    if reading.verdict is Verdict.NO_METRICS:
        if job.started is None or now - job.started < thresholds.idle_window:
            return []  # not yet training on its instances long enough to expect a window of metrics
        return [
            finding(
                Reason.GPU_METRICS_MISSING,
                _job_metrics_missing_summary(job, hosts, _minutes(now - job.started)),
                how_to_fix=JOB_METRICS_HELP,
            )
        ]
    if reading.verdict in (Verdict.BUSY, Verdict.STARVED) and marked:
        return [
            finding(
                Reason.GPU_ACTIVE_AGAIN,
                f"Training job {job.name} is working again (busiest host at "
                f"{reading.busiest_gpu_percent or 0:.1f}% per GPU): its pending stop is cancelled.",
                cancels_mark=True,
            )
        ]
    if reading.verdict is Verdict.PARTIAL and marked:
        silent = ", ".join(f"{job.name}/algo-{n}" for n in reading.silent)
        return [
            finding(
                Reason.GPU_ACTIVE_AGAIN,
                f"Training job {job.name} no longer reports on every host ({silent} silent): costguard cannot "
                "confirm it is stalled, so its pending stop is cancelled.",
                cancels_mark=True,
            )
        ]
    return []  # a silent host (PARTIAL) is never counted idle


def _job_stalled_summary(
    job: TrainingJob, hosts: str, busiest: str, reading: GpuReading, thresholds: Thresholds, window: int
) -> str:
    """What a stalled job's notice says: every host under the threshold, the busiest one, what a stop does."""
    return (
        f"Training job {job.name} is InProgress on {hosts}, but the GPUs of every host stayed under "
        f"{thresholds.idle_percent:g}% for {window} minutes (busiest host {busiest} peaked at "
        f"{reading.busiest_gpu_percent:.1f}% per GPU): it is not training. StopTrainingJob gives the "
        "algorithm 120 seconds to save its artifacts, then the billing ends."
    )


def _job_metrics_missing_summary(job: TrainingJob, hosts: str, minutes: int) -> str:
    """What a job that trained a whole window without a GPU metric is told."""
    return (
        f"Training job {job.name} has trained on {hosts} for {minutes} minutes "
        f"but publishes no {JOB_METRIC}: costguard cannot "
        "tell whether it is stalled, and will not call it stalled."
    )


# -- notebook instances -------------------------------------------------------------------------


def notebook_resource(notebook: NotebookInstance) -> Resource:
    return Resource(
        kind=ResourceKind.NOTEBOOK,
        id=notebook.name,
        name=notebook.name,
        arn=notebook.arn,
        account=notebook.account,
        region=notebook.region,
        instance_type=notebook.instance_type,
        tags=notebook.tags,
    )


def notebook_findings(
    notebook: NotebookInstance,
    reading: GpuReading,
    *,
    price: Price | None,
    thresholds: Thresholds,
    now: datetime,
    event_id: str | None = None,
) -> list[Finding]:
    """``notebook_idle`` when every GPU idles through the window; no GPU series is ``gpu_metrics_missing``
    (never idle); a marked notebook that works again cancels its pending stop. A STARVED reading (read_gpus'
    working-minutes rule) is reported as busy: no notice."""
    resource = notebook_resource(notebook)
    gpus = f"{reading.gpu_count} x {notebook.accelerators.model if notebook.accelerators else 'GPU'}"
    window = _minutes(thresholds.idle_window)
    evidence: dict[str, object] = {"gpus": gpus, **_price_evidence(price)}
    finding = _Findings(resource, now, event_id, hourly_usd(price, 1), evidence)
    if reading.verdict is Verdict.IDLE:
        return [
            finding(
                Reason.NOTEBOOK_IDLE,
                _notebook_idle_summary(notebook, gpus, reading, thresholds, window),
                remediable=True,
                busiest_gpu_percent=reading.busiest_gpu_percent,
                busiest_gpu_index=reading.busiest_gpu_index,
                window_minutes=window,
            )
        ]
    if reading.verdict is Verdict.NO_METRICS:
        return [
            finding(
                Reason.GPU_METRICS_MISSING,
                f"Notebook instance {notebook.name} is an InService {notebook.instance_type} ({gpus}) that "
                "publishes no GPU metrics: costguard cannot tell whether it is idle, and will not call it idle.",
                how_to_fix=NOTEBOOK_AGENT_HELP,
            )
        ]
    if reading.verdict is Verdict.PARTIAL:
        return _notebook_partial(notebook, reading, finding, gpus, window)
    if reading.verdict in (Verdict.BUSY, Verdict.STARVED) and MARK_TAG_KEY in resource.tags:
        return [
            finding(
                Reason.GPU_ACTIVE_AGAIN,
                f"Notebook instance {notebook.name} is working again (busiest GPU at "
                f"{reading.busiest_gpu_percent or 0:.1f}%): its pending stop is cancelled.",
                cancels_mark=True,
            )
        ]
    return []


def _notebook_idle_summary(
    notebook: NotebookInstance, gpus: str, reading: GpuReading, thresholds: Thresholds, window: int
) -> str:
    """What an idle notebook's notice says: every GPU under the threshold, the busiest, what a stop keeps."""
    return (
        f"Notebook instance {notebook.name} ({notebook.instance_type}, {gpus}) is InService with every "
        f"GPU under {thresholds.idle_percent:g}% for {window} minutes (busiest peaked at "
        f"{reading.busiest_gpu_percent:.1f}%). Stopping it keeps its ML storage volume; start it "
        "again when you need it."
    )


def _notebook_partial(
    notebook: NotebookInstance, reading: GpuReading, finding: _Findings, gpus: str, window: int
) -> list[Finding]:
    """Some GPUs report and some are silent: ``gpu_metrics_partial``, and a marked notebook's pending stop is
    cancelled (a silent GPU might be the one working)."""
    partial = finding(
        Reason.GPU_METRICS_PARTIAL,
        partial_summary(
            f"Notebook instance {notebook.name}",
            f"an InService {notebook.instance_type}, {gpus}",
            reading,
            window,
        ),
        reporting_gpus=numbers(reading.reporting),
        silent_gpus=numbers(reading.silent),
        busiest_reporting_gpu_percent=reading.busiest_gpu_percent,
        how_to_fix=PARTIAL_HELP,
        repeat_scope=f"silent:{numbers(reading.silent)}",
    )
    if MARK_TAG_KEY not in finding.resource.tags:
        return [partial]
    return [
        partial,
        finding(
            Reason.GPU_ACTIVE_AGAIN,
            f"Notebook instance {notebook.name} no longer reports on every GPU (GPU "
            f"{numbers(reading.silent)} silent): costguard cannot confirm it is idle, so its pending stop "
            "is cancelled.",
            cancels_mark=True,
        ),
    ]


# -- endpoints ----------------------------------------------------------------------------------


def endpoint_resource(endpoint: Endpoint) -> Resource:
    running = [v for v in endpoint.variants if v.instance_type and v.instance_count > 0]
    types = {v.instance_type for v in running}
    return Resource(
        kind=ResourceKind.ENDPOINT,
        id=endpoint.name,
        name=endpoint.name,
        arn=endpoint.arn,
        account=endpoint.account,
        region=endpoint.region,
        instance_type=types.pop() if len(types) == 1 else "mixed (see variants)",
        instance_count=sum(v.instance_count for v in running) or 1,
        tags=endpoint.tags,
    )


def traffic_metric(endpoint: Endpoint) -> str:
    """The series an endpoint's traffic is read from, as AWS documents it for its kind."""
    if endpoint.inference_components:
        return (
            "AWS/SageMaker Invocations per InferenceComponentName ("
            + ", ".join(endpoint.inference_components)
            + ")"
        )
    if endpoint.asynchronous:
        return (
            "AWS/SageMaker InvocationsProcessed per EndpointName and VariantName, and ApproximateBacklogSize "
            "(an asynchronous endpoint publishes no Invocations)"
        )
    return "AWS/SageMaker Invocations per EndpointName and VariantName"


def endpoint_findings(
    endpoint: Endpoint,
    invocations: float | None,
    *,
    prices: Mapping[str, Price | None],
    window: timedelta,
    now: datetime,
    event_id: str | None = None,
    backlog: float | None = None,
) -> list[Finding]:
    """``endpoint_idle`` for a GPU endpoint older than the window that served no invocation in it.

    ``invocations`` is the Sum over the window of what its kind publishes (traffic_metric): Invocations per
    variant for a real-time endpoint, InvocationsProcessed for an asynchronous one (whose ``backlog``, requests
    waiting, is use too), Invocations per inference component for an endpoint hosting them. SageMaker publishes
    these only while there is traffic, so no datapoints (None) under the documented series of its kind is no
    traffic. Notify only: deleting an endpoint is its owner's call.
    """
    if not endpoint.has_gpu or (invocations or 0) > 0 or (backlog or 0) > 0:
        return []
    if endpoint.created is not None and now - endpoint.created < window:
        return []  # too young to have a whole window of traffic behind it
    running = [v for v in endpoint.variants if v.instance_type and v.instance_count > 0]
    costs = [(prices.get(v.instance_type) if v.instance_type else None, v.instance_count) for v in running]
    # Unknown if any running variant's price is unknown: never a partial sum passed off as the total.
    hourly = (
        round(sum(p.usd_per_hour * n for p, n in costs if p is not None), 4)
        if all(p is not None for p, _ in costs)
        else None
    )
    variants = ", ".join(f"{v.name}: {v.instance_count} x {v.instance_type}" for v in running)
    hours = int(window.total_seconds() // 3600)
    return [
        Finding(
            reason=Reason.ENDPOINT_IDLE,
            resource=endpoint_resource(endpoint),
            summary=f"Endpoint {endpoint.name} keeps {variants} running and "
            f"{'processed no requests and had none waiting' if endpoint.asynchronous else 'served no invocations'}"
            f" in {hours} hours. costguard never deletes endpoints: delete it if nobody needs it (its endpoint "
            "configuration and model stay, so it can be recreated).",
            observed_at=now,
            event_id=event_id,
            hourly_usd=hourly,
            remediable=False,
            evidence={
                "variants": variants,
                "invocations": 0,
                "window_hours": hours,
                "metric": traffic_metric(endpoint),
                "created": endpoint.created.isoformat() if endpoint.created else None,
                "price_source": ", ".join(
                    sorted({p.source if p else "unknown" for p, _ in costs}) or ["unknown"]
                ),
            },
        )
    ]


# -- endpoints serving a trickle on GPUs they barely use ----------------------------------------

# A variant is underused when its busiest hour's GPUUtilization (each hour's Maximum over its instances), divided
# by the type's GPU count, stayed under this while it served traffic.
UNDERUSED_GPU_PERCENT = 20.0
# A smaller fit fills each GPU to at most this share at the busiest hour's load, with this headroom over the
# busiest hour's GPU memory: the audit's downsize and family rules (audit/rules.json).
FIT_GPU_PERCENT = 80.0
MEMORY_HEADROOM = 1.2
ENDPOINT_GPU_METRIC = "GPUUtilization in /aws/sagemaker/Endpoints"

SCALE_TO_ZERO_ASSUMPTIONS = (
    "estimate: one instance billed only in the hours that had traffic (an inference component with "
    "ManagedInstanceScaling.MinInstanceCount=0 released when idle); the first requests after a quiet spell fail "
    "with NoCapacityInvocationFailures for the minutes an instance takes to provision, and waking needs a "
    "step-scaling policy on that metric"
)


@dataclass(frozen=True)
class VariantUse:
    """What one endpoint variant did over the window (flows/sagemaker.py reads it in the sweep's hourly walk)."""

    invocations: float | None  # Sum over the window; None: no datapoint
    gpu_percent: float | None  # the busiest hour's Maximum GPUUtilization, summed over an instance's GPUs
    gpu_memory_percent: float | None = None  # the same for GPUMemoryUtilization
    active_hours: int = 0  # hours of the window with at least one invocation


@dataclass(frozen=True)
class Candidate:
    """An instance type a variant could move to, with its accelerators and price."""

    instance_type: str
    accelerators: Accelerators
    price: Price


def cost_per_1000(hourly: float, hours: float, invocations: float) -> float | None:
    """Instance price x instance-hours / (invocations / 1,000); None without invocations."""
    if invocations <= 0:
        return None
    return round(hourly * hours / (invocations / 1000), 4)


def _family(instance_type: str) -> str:
    return instance_type.removeprefix("ml.").split(".")[0]


def smaller_fit(
    variant: EndpointVariant, use: VariantUse, price: Price, candidates: Sequence[Candidate]
) -> tuple[Candidate | None, str]:
    """The cheapest type of the same family and GPU model whose GPUs carry the busiest hour's load at
    FIT_GPU_PERCENT each and hold its GPU memory with MEMORY_HEADROOM; None and why when there is none."""
    accelerators = variant.accelerators
    if accelerators is None or use.gpu_percent is None or variant.instance_type is None:
        return None, "no GPU reading"
    if use.gpu_memory_percent is None or not accelerators.memory_mib:
        return None, "GPU memory not measured (GPUMemoryUtilization): a smaller instance is not proposed"
    gpus_needed = max(1, math.ceil(use.gpu_percent / FIT_GPU_PERCENT))
    memory_needed = use.gpu_memory_percent / 100 * accelerators.memory_mib * MEMORY_HEADROOM
    fitting = [
        c
        for c in candidates
        if _family(c.instance_type) == _family(variant.instance_type)
        and c.accelerators.model == accelerators.model
        and c.accelerators.count >= gpus_needed
        and c.accelerators.count * (c.accelerators.memory_mib or 0) >= memory_needed
        and c.price.usd_per_hour < price.usd_per_hour
    ]
    if not fitting:
        return None, f"no cheaper {_family(variant.instance_type)} size holds {gpus_needed} GPU(s) of load"
    return min(fitting, key=lambda c: c.price.usd_per_hour), ""


@dataclass(frozen=True)
class _Underused:
    """One underused variant's figures."""

    variant: str
    hourly: float
    invocations: float
    per_gpu: float
    fits: list[str]  # cheapest first
    best_hourly: float | None  # what the cheapest fit costs per hour (averaged over the window)
    why_not_smaller: str


def _variant_underused(
    variant: EndpointVariant,
    use: VariantUse,
    price: Price,
    candidates: Sequence[Candidate],
    hours: float,
) -> _Underused:
    """One underused variant's figures: its cost per 1,000 invocations and what cheaper fits would cost."""
    gpus = variant.accelerators.count if variant.accelerators else 1
    invocations = use.invocations or 0.0
    hourly = price.usd_per_hour * variant.instance_count
    per_gpu = round((use.gpu_percent or 0.0) / gpus, 2)
    fits: list[tuple[float, str]] = []
    smaller, why_not = smaller_fit(variant, use, price, candidates)
    if smaller is not None:
        cost = smaller.price.usd_per_hour * variant.instance_count
        fits.append(
            (
                cost,
                f"{variant.instance_count} x {smaller.instance_type} ({smaller.accelerators.count} x "
                f"{smaller.accelerators.model}): ${cost:,.2f}/h, "
                f"${cost_per_1000(cost, hours, invocations):,.4f} per 1,000 invocations",
            )
        )
    if variant.instance_count > 1:
        needed = max(1, math.ceil(variant.instance_count * per_gpu / FIT_GPU_PERCENT))
        if needed < variant.instance_count:
            cost = price.usd_per_hour * needed
            fits.append(
                (
                    cost,
                    f"{needed} x {variant.instance_type} instead of {variant.instance_count}: ${cost:,.2f}/h, "
                    f"${cost_per_1000(cost, hours, invocations):,.4f} per 1,000 invocations",
                )
            )
    if use.active_hours < hours:
        cheapest = smaller.price.usd_per_hour if smaller is not None else price.usd_per_hour
        name = smaller.instance_type if smaller is not None else variant.instance_type
        cost = cheapest * use.active_hours
        fits.append(
            (
                cost / hours,
                f"an inference component on {name} with MinInstanceCount=0: about ${cost:,.2f} for the "
                f"{use.active_hours} of {hours:g} hours that had traffic, "
                f"${cost_per_1000(cheapest, use.active_hours, invocations):,.4f} per 1,000 invocations "
                f"({SCALE_TO_ZERO_ASSUMPTIONS})",
            )
        )
    fits.sort(key=lambda f: f[0])
    return _Underused(
        variant=f"{variant.name}: {variant.instance_count} x {variant.instance_type} ({gpus} x "
        f"{variant.accelerators.model if variant.accelerators else 'GPU'} each)",
        hourly=hourly,
        invocations=invocations,
        per_gpu=per_gpu,
        fits=[text for _, text in fits],
        best_hourly=fits[0][0] if fits else None,
        why_not_smaller=why_not,
    )


def impossible_readings(use: VariantUse, gpus: int) -> str:
    """What in a variant's reading is outside its physical range, or "": GPUUtilization and GPUMemoryUtilization
    are 0-100 per GPU, summed over an instance's GPUs (0 to 100 x GPUs)."""
    ceiling = 100.0 * max(1, gpus)
    wrong = [
        f"{name} {value:g}% (possible: 0-{ceiling:g}% on {gpus} GPU{'s' if gpus != 1 else ''})"
        for name, value in (
            ("GPUUtilization", use.gpu_percent),
            ("GPUMemoryUtilization", use.gpu_memory_percent),
        )
        if value is not None and not (math.isfinite(value) and 0.0 <= value <= ceiling)
    ]
    return "; ".join(wrong)


def _unreadable(endpoint: Endpoint, variants: list[str], now: datetime, event_id: str | None) -> Finding:
    """A variant whose GPU reading cannot be: told once (an alert-once reason), never a verdict."""
    text = "; ".join(variants)
    return Finding(
        reason=Reason.GPU_METRICS_MISSING,
        resource=endpoint_resource(endpoint),
        summary=f"Endpoint {endpoint.name}: its GPU metrics read {text}, outside what a GPU can read. costguard "
        "treats the reading as unreadable: it gives no verdict and no advice on this endpoint's GPUs until the "
        "reading is back in range.",
        observed_at=now,
        event_id=event_id,
        remediable=False,
        evidence={
            "unreadable": text,
            "metric": f"{ENDPOINT_GPU_METRIC} per variant (each hour's Maximum), 0-100 per GPU summed over its GPUs",
        },
    )


def _judge_variants(
    endpoint: Endpoint,
    uses: Mapping[str, VariantUse],
    prices: Mapping[str, Price | None],
    candidates: Sequence[Candidate],
    hours: float,
) -> tuple[list[_Underused], list[str]]:
    """The underused GPU variants' figures, and the variants whose reading cannot be (never judged)."""
    judged = []
    unreadable: list[str] = []
    for variant in endpoint.variants:
        use = uses.get(variant.name)
        if not (variant.has_gpu and variant.instance_count > 0 and use):
            continue
        gpus = variant.accelerators.count if variant.accelerators else 1
        impossible = impossible_readings(use, gpus)
        if impossible:
            unreadable.append(f"{variant.name}: {impossible}")
            continue  # no verdict, and no advice, on a reading that cannot be
        price = prices.get(variant.instance_type) if variant.instance_type else None
        if not price:
            continue
        if (use.invocations or 0) <= 0 or use.gpu_percent is None:
            continue  # no traffic is endpoint_idle's; no GPU reading is never called underused
        if use.gpu_percent / gpus >= UNDERUSED_GPU_PERCENT:
            continue
        judged.append(_variant_underused(variant, use, price, candidates, hours))
    return judged, unreadable


def endpoint_underused_findings(
    endpoint: Endpoint,
    uses: Mapping[str, VariantUse],
    *,
    prices: Mapping[str, Price | None],
    candidates: Sequence[Candidate],
    window: timedelta,
    now: datetime,
    event_id: str | None = None,
) -> list[Finding]:
    """``endpoint_underused``: an endpoint older than the window with a GPU variant that served traffic while
    its GPUs (per GPU: SageMaker sums a variant's GPUUtilization over the instance's GPUs) stayed under
    UNDERUSED_GPU_PERCENT at the busiest hour. States its cost per 1,000 invocations and cheaper fits for the
    same traffic. A variant without a GPU reading or a price is not judged. Notify only."""
    if endpoint.created is not None and now - endpoint.created < window:
        return []
    hours = window.total_seconds() / 3600
    judged, unreadable = _judge_variants(endpoint, uses, prices, candidates, hours)
    found = [_unreadable(endpoint, unreadable, now, event_id)] if unreadable else []
    if not judged:
        return found
    hourly = round(sum(v.hourly for v in judged), 4)
    invocations = sum(v.invocations for v in judged)
    per_1000 = cost_per_1000(hourly, hours, invocations) or 0.0
    fits = [text for v in judged for text in v.fits]
    best = [v.best_hourly if v.best_hourly is not None else v.hourly for v in judged]
    saving = round(hourly - sum(best), 4) if fits else None
    lines = "; ".join(v.variant for v in judged)
    busiest = max(v.per_gpu for v in judged)
    summary = (
        f"Endpoint {endpoint.name} keeps {lines} for {invocations:,.0f} invocations in {hours:g} hours, its GPUs "
        f"under {UNDERUSED_GPU_PERCENT:g}% (busiest hour {busiest:.1f}% per GPU): "
        f"${per_1000:,.4f} per 1,000 invocations at ${hourly:,.2f}/h."
    )
    if fits:
        summary += f" Cheapest fit for the same traffic: {fits[0]}."
    summary += " costguard never changes endpoints: this is for its owner to decide."
    return [
        *found,
        Finding(
            reason=Reason.ENDPOINT_UNDERUSED,
            resource=endpoint_resource(endpoint),
            summary=summary,
            observed_at=now,
            event_id=event_id,
            hourly_usd=hourly,
            remediable=False,
            evidence={
                "variants": lines,
                "invocations": round(invocations),
                "window_hours": round(hours),
                "busiest_hour_gpu_percent": busiest,
                "metric": f"{ENDPOINT_GPU_METRIC} per variant (each hour's Maximum), divided by its GPUs",
                "cost_per_1000_invocations_usd": per_1000,
                "cheaper_fits": fits,
                "estimated_saving_per_hour_usd": saving,
                "smaller_instance_not_proposed": "; ".join(
                    v.why_not_smaller for v in judged if v.why_not_smaller
                ),
                "price_source": ", ".join(
                    sorted({p.source for p in prices.values() if p is not None}) or ["unknown"]
                ),
            },
        ),
    ]
