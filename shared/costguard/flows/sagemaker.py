"""SageMaker: the scheduled sweep over in-progress training jobs, InService notebooks and endpoints."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from costguard.act.aws import permissions_for
from costguard.act.ledger_book import RETURN_PERMISSIONS as LEDGER_RETURN_PERMISSIONS
from costguard.act.shadow import key_of, overlay, read_marks
from costguard.aws import budgets, inference_components, metrics, sagemaker
from costguard.aws.idle_history import PERMISSIONS as IDLE_HISTORY_PERMISSIONS
from costguard.aws.metrics import MetricSet
from costguard.aws.sagemaker import NOTEBOOK_DIMENSION
from costguard.aws.sagemaker_metrics import (
    ENDPOINT_PERIOD,
    backlog_of,
    endpoint_gpu_queries,
    gpu_queries,
    invocation_queries,
    invocations_of,
    job_key,
    notebook_key,
    variant_uses,
)
from costguard.detect.budgets import keep_budget_marks
from costguard.detect.gpu import PERIOD, Thresholds, read_gpus, thresholds_from
from costguard.detect.sagemaker import (
    Candidate,
    endpoint_findings,
    endpoint_underused_findings,
    notebook_findings,
    read_training_job,
    training_job_findings,
)
from costguard.model import Endpoint, Finding, NotebookInstance, Reason, ResourceKind, TrainingJob
from costguard.pipeline import Report, close_seen_running
from costguard.pricing import region_prices
from costguard.reads import SageMakerReads
from costguard.runtime import ACT_PERMISSIONS, PRICES_PERMISSIONS, Runtime

# handle_sweep: endpoints are only ever reported, never stopped.
SWEEP_PERMISSIONS = (
    sagemaker.INVENTORY_PERMISSIONS
    | inference_components.PERMISSIONS  # an endpoint's traffic is read per inference component it hosts
    | metrics.READ_PERMISSIONS
    | metrics.LIST_PERMISSIONS
    | budgets.BREACH_LOG_PERMISSIONS
    | ACT_PERMISSIONS
    | PRICES_PERMISSIONS
    | permissions_for(ResourceKind.TRAINING_JOB, ResourceKind.NOTEBOOK)
    | IDLE_HISTORY_PERMISSIONS  # the adaptive idle policy for notebooks (COSTGUARD_IDLE_POLICY=adaptive)
    | LEDGER_RETURN_PERMISSIONS  # the returns it sees (close_seen_running)
)


def with_marks(
    jobs: list[TrainingJob], notebooks: list[NotebookInstance], runtime: Runtime, now: datetime
) -> tuple[list[TrainingJob], list[NotebookInstance]]:
    """The jobs and notebooks as a live run would read them: in notify mode, with the marks it keeps in the state
    table as the mark tag (act/shadow.py), so that one working again has its mark cancelled in both modes. One
    read for both (each key is read once a run). Endpoints are never marked."""

    def job(j: TrainingJob) -> str:
        return key_of(j.account, j.region, ResourceKind.TRAINING_JOB, j.name)

    def notebook(n: NotebookInstance) -> str:
        return key_of(n.account, n.region, ResourceKind.NOTEBOOK, n.name)

    read_marks(runtime.shadow_marks, [*map(job, jobs), *map(notebook, notebooks)], now)
    return (
        overlay(jobs, runtime.shadow_marks, now, job, dry=runtime.dry_for(Reason.JOB_STALLED)),
        overlay(notebooks, runtime.shadow_marks, now, notebook, dry=runtime.dry_for(Reason.NOTEBOOK_IDLE)),
    )


def findings_for(
    region: str, runtime: Runtime, thresholds: Thresholds, now: datetime, event_id: str | None
) -> list[Finding]:
    listed, cloudwatch = runtime.reads.sagemaker, runtime.reads.metrics
    jobs = [
        j for j in listed.in_progress_training_jobs(region) if j.accelerators and j.accelerators.is_nvidia
    ]
    notebooks = [
        n for n in listed.in_service_notebooks(region) if n.accelerators and n.accelerators.is_nvidia
    ]
    endpoints = with_components(listed, region, listed.in_service_endpoints(region))
    # A notebook costguard stopped, InService again: its ledger entry closes at this sweep (within its period).
    close_seen_running(
        runtime.ledger, {key_of(n.account, n.region, ResourceKind.NOTEBOOK, n.name): now for n in notebooks}
    )
    jobs, notebooks = with_marks(jobs, notebooks, runtime, now)

    # Two batched reads for the whole sweep: per-minute GPU series over the verdict windows, and hourly
    # invocation sums with the endpoints' GPU and GPU memory maxima over the endpoint window (GetMetricData takes
    # one time range per call).
    gpu_data = MetricSet()
    if jobs or notebooks:
        series = (
            cloudwatch.list_gpu_series(region, [n.name for n in notebooks], NOTEBOOK_DIMENSION)
            if notebooks
            else {}
        )
        window = max(thresholds.idle_window, thresholds.starved_window)
        gpu_data = cloudwatch.get_metric_data(
            region, gpu_queries(jobs, notebooks, series), now - window, now, int(PERIOD.total_seconds())
        )
    endpoint_window = timedelta(hours=runtime.settings.endpoint_idle_hours)
    calls = MetricSet()
    if endpoints:
        calls = cloudwatch.get_metric_data(
            region,
            [*invocation_queries(endpoints), *endpoint_gpu_queries(endpoints)],
            now - endpoint_window,
            now,
            int(ENDPOINT_PERIOD.total_seconds()),
        )

    findings: list[Finding] = []
    for job in jobs:
        findings += training_job_findings(
            job,
            read_training_job(gpu_data.gpus(job_key(job)), job, now, thresholds),
            price=runtime.prices.hourly(job.instance_type, region),
            thresholds=thresholds,
            now=now,
            event_id=event_id,
        )
    for notebook in notebooks:
        expected = notebook.accelerators.count if notebook.accelerators else 1
        findings += notebook_findings(
            notebook,
            read_gpus(gpu_data.gpus(notebook_key(notebook)), now, thresholds, expected),
            price=runtime.prices.hourly(notebook.instance_type, region),
            thresholds=thresholds,
            now=now,
            event_id=event_id,
        )
    if notebooks and runtime.settings.idle_policy == "adaptive" and runtime.idle_histories is not None:
        findings = adapted_notebooks(notebooks, gpu_data, findings, runtime, thresholds, now)
    for endpoint in endpoints:
        types = {v.instance_type for v in endpoint.variants if v.instance_type}
        findings += endpoint_findings(
            endpoint,
            invocations_of(endpoint, calls),
            backlog=backlog_of(endpoint, calls) if endpoint.asynchronous else None,
            prices={t: runtime.prices.hourly(t, region) for t in types},
            window=endpoint_window,
            now=now,
            event_id=event_id,
        )
    if endpoints:
        findings += underused_endpoints(region, endpoints, calls, runtime, endpoint_window, now, event_id)
    return findings


def with_components(listed: SageMakerReads, region: str, endpoints: list[Endpoint]) -> list[Endpoint]:
    """The endpoints with the inference components each hosts: one ListInferenceComponents walk per region and
    sweep, only when there are GPU endpoints to judge. An endpoint hosting them publishes its Invocations per
    InferenceComponentName: read per endpoint and variant it would look idle however busy it is."""
    if not endpoints:
        return endpoints
    hosted = listed.inference_components(region)
    return [replace(e, inference_components=hosted.get(e.name, ())) for e in endpoints]


def underused_endpoints(
    region: str,
    endpoints: list[Endpoint],
    calls: MetricSet,
    runtime: Runtime,
    window: timedelta,
    now: datetime,
    event_id: str | None,
) -> list[Finding]:
    """``endpoint_underused`` from the same hourly walk. The smaller sizes a variant could move to are the priced
    ml. types of its family (the bundled table's list), their accelerators asked of DescribeInstanceTypes once per
    type per process."""
    families = {
        v.instance_type.removeprefix("ml.").split(".")[0]
        for e in endpoints
        for v in e.variants
        if v.instance_type and v.has_gpu
    }
    sizes = [t for t in region_prices(region, "sagemaker") if t.removeprefix("ml.").split(".")[0] in families]
    accelerators = runtime.reads.sagemaker.instance_accelerators(region, sizes) if sizes else {}
    candidates = []
    for instance_type in sizes:
        found, price = accelerators.get(instance_type), runtime.prices.hourly(instance_type, region)
        if found is not None and price is not None:
            candidates.append(Candidate(instance_type, found, price))
    findings: list[Finding] = []
    for endpoint in endpoints:
        types = {v.instance_type for v in endpoint.variants if v.instance_type}
        findings += endpoint_underused_findings(
            endpoint,
            variant_uses(endpoint, calls),
            prices={t: runtime.prices.hourly(t, region) for t in types},
            candidates=candidates,
            window=window,
            now=now,
            event_id=event_id,
        )
    return findings


def adapted_notebooks(
    notebooks: list[NotebookInstance],
    gpu_data: MetricSet,
    findings: list[Finding],
    runtime: Runtime,
    thresholds: Thresholds,
    now: datetime,
) -> list[Finding]:
    """The adaptive idle policy for notebooks (idle_policy.py), with priors of their own (kind
    ``notebook``) in the state table, one batched read and write. Notebooks publish no CPU here, and the sweep
    runs every 15 minutes: each observes the last of its five-minute periods, so a notebook's idle periods are
    learned to within a sweep."""
    # Loaded here: only the adaptive policy (COSTGUARD_IDLE_POLICY=adaptive, not the default) needs them.
    from costguard import idle_policy
    from costguard.detect import adaptive

    assert runtime.idle_histories is not None
    observed = [
        idle_policy.Observed(
            n.name,
            n.account,
            n.region,
            "notebook",
            n.instance_type,
            n.tags,
            adaptive.period_status(
                gpu_data.gpus(notebook_key(n)),
                n.accelerators.count if n.accelerators else 1,
                now - idle_policy.STEP,
                now,
                thresholds.idle_percent,
            ),
        )
        for n in notebooks
    ]
    params = idle_policy.params_of(runtime.settings)
    return idle_policy.adapted(observed, findings, runtime.idle_histories, params, now, idle_policy.STEP)


def evaluate(region: str, runtime: Runtime, now: datetime, event_id: str | None = None) -> Report:
    findings = findings_for(region, runtime, thresholds_from(runtime.settings), now, event_id)
    # A budget breach at stop_all marks busy jobs and notebooks on purpose: their marks are not cancelled here.
    scopes = budgets.stop_all_scopes_for(findings, runtime.settings.state_table, now)
    return runtime.act(keep_budget_marks(findings, scopes), now)


def handle_sweep(runtime: Runtime, now: datetime, default_region: str, event_id: str | None) -> Report:
    combined = Report()
    for region in runtime.settings.regions or (default_region,):
        combined.extend(evaluate(region, runtime, now, event_id))
    return combined
