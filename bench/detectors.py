"""Benchmark case: in-process latency of each pure detector, fed the shipped events/ parsed into their models."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from costguard.detect.batch import detect_batch_retry_loop, instance_type_of
from costguard.detect.budgets import BudgetMessageError, anomaly_finding, parse_budget_message
from costguard.detect.capacity import idle_reservation_finding, parse_entry
from costguard.detect.gpu import Thresholds, gpu_instance_findings, read_gpus
from costguard.detect.spot import detect_spot_interruption
from costguard.detect.training_guardrails import ceiling_of, cost_findings, hygiene_findings
from costguard.detect.training_jobs import detect_failed_training_job
from costguard.events.batch import BatchJobStateChange
from costguard.events.budgets import AnomalyDetected, BudgetNotification
from costguard.events.cloudwatch import AlarmStateChange
from costguard.events.ec2 import SpotInterruptionWarning
from costguard.events.health import OdcrUnderutilization
from costguard.events.registry import model_for
from costguard.events.sagemaker import TrainingJobStateChange
from costguard.model import Accelerators, Ec2Instance
from costguard.pricing import bundled_price
from costguard.settings import Settings

REPEATS = 2000
EVENTS = Path(__file__).resolve().parents[1] / "events"


def _parsed(paths: list[Path]) -> list[tuple[str, Any]]:
    out = []
    for path in paths:
        raw = json.loads(path.read_text())
        model = model_for(raw)
        if model is not None:
            out.append((path.name, model.model_validate(raw)))
    return out


def _gpu_alarm(event: AlarmStateChange) -> Callable[[], object]:
    # The alarm carries no series: the detector reads 30 minutes of one-minute points for each of 8 GPUs,
    # what the flow hands it after its GetMetricData read.
    thresholds = Thresholds()
    now = event.time
    series = {g: [(now - timedelta(minutes=m), 1.0) for m in range(30, 0, -1)] for g in range(8)}
    instance = Ec2Instance(
        "i-0123456789abcdef0",
        "p4d.24xlarge",
        "running",
        event.account,
        event.region,
        now - timedelta(days=1),
        {},
        None,
        Accelerators(kind="nvidia_gpu", count=8, model="A100"),
    )
    price = bundled_price(instance.type, instance.region)

    def run() -> object:
        reading = read_gpus(series, now, thresholds, 8)
        return gpu_instance_findings(instance, reading, price=price, thresholds=thresholds, now=now)

    return run


def _calls(name: str, event: Any, settings: Settings) -> Callable[[], object] | None:
    """The detector call the flow makes for this event, with the inputs it would read already in hand."""
    if isinstance(event, AlarmStateChange):
        return _gpu_alarm(event)
    if isinstance(event, BatchJobStateChange):
        price = bundled_price(instance_type_of(event.detail) or "", event.region)
        return lambda: detect_batch_retry_loop(
            event.detail,
            account=event.account,
            region=event.region,
            price=price,
            threshold=settings.batch_retry_threshold,
            observed_at=event.time,
            event_id=event.id,
        )
    if isinstance(event, SpotInterruptionWarning):
        return lambda: detect_spot_interruption(
            instance_id=event.detail.instance_id,
            action=event.detail.instance_action,
            instance=None,
            account=event.account,
            region=event.region,
            price=None,
            interruptions=3,
            threshold=settings.spot_interruption_threshold,
            window=timedelta(hours=settings.spot_interruption_window_hours),
            observed_at=event.time,
            now=event.time,
            event_id=event.id,
        )
    if isinstance(event, OdcrUnderutilization):
        return lambda: [
            idle_reservation_finding(
                entry,
                None,
                account=event.account,
                region=event.region,
                price=None,
                observed_at=event.time,
                event_id=event.id,
            )
            for entry in map(parse_entry, event.entries)
        ]
    if isinstance(event, BudgetNotification):
        sns = event.sns

        def read() -> object:
            try:
                return parse_budget_message(sns.message, sns.subject)
            except BudgetMessageError as error:  # unexpected wording: the flow forwards it as received
                return error

        return read
    if isinstance(event, AnomalyDetected):
        return lambda: anomaly_finding(
            event.detail,
            [],
            account=event.account,
            region=event.region,
            now=event.time,
            event_id=event.id,
            protect_tag_key=settings.protect_tag_key,
        )
    if isinstance(event, TrainingJobStateChange):
        return _training(event, settings)
    return None


def _training(event: TrainingJobStateChange, settings: Settings) -> Callable[[], object]:
    detail = event.detail
    instance_type = detail.ResourceConfig.InstanceType if detail.ResourceConfig else ""
    price = bundled_price(instance_type or "", event.region)

    def run() -> object:
        found = detect_failed_training_job(
            detail, account=event.account, region=event.region, price=price, observed_at=event.time
        )
        ceiling = ceiling_of(
            detail.Tags,
            default_usd=settings.default_job_max_usd,
            default_hours=settings.default_job_max_hours,
        )
        found += cost_findings(
            detail,
            account=event.account,
            region=event.region,
            price=price,
            ceiling=ceiling,
            warning_share=settings.cost_warning_share,
            now=event.time,
            observed_at=event.time,
        )
        found += hygiene_findings(
            detail,
            account=event.account,
            region=event.region,
            price=price,
            max_runtime_hours=settings.max_runtime_hours,
            spot_recommend_hours=settings.spot_recommend_hours,
            observed_at=event.time,
        )
        return found

    return run


DETECTOR_OF: dict[type[Any], str] = {
    AlarmStateChange: "gpu (read_gpus + gpu_instance_findings, 8 GPUs x 30 min)",
    BatchJobStateChange: "batch (detect_batch_retry_loop)",
    SpotInterruptionWarning: "spot (detect_spot_interruption)",
    OdcrUnderutilization: "capacity (parse_entry + idle_reservation_finding)",
    BudgetNotification: "budgets (parse_budget_message)",
    AnomalyDetected: "budgets (anomaly_finding)",
    TrainingJobStateChange: "training (failed job, cost ceiling, hygiene)",
}


def bench_detectors(repeats: int = REPEATS) -> dict[str, Any]:
    """Median microseconds per call of each detector, per shipped event it is fed."""
    settings = Settings()
    per_event: dict[str, dict[str, Any]] = {}
    for name, event in _parsed(sorted(EVENTS.glob("*.json"))):
        call = _calls(name, event, settings)
        if call is None:
            continue
        call()  # warm: first-call imports and caches are not the steady state
        samples = []
        for _ in range(repeats):
            start = time.perf_counter_ns()
            call()
            samples.append(time.perf_counter_ns() - start)
        per_event[name] = {
            "detector": DETECTOR_OF[type(event)],
            "median_us": round(statistics.median(samples) / 1000, 1),
        }
    by_detector: dict[str, float] = {}
    for row in per_event.values():
        by_detector[row["detector"]] = max(by_detector.get(row["detector"], 0.0), row["median_us"])
    return {
        "repeats": repeats,
        "events": per_event,
        "slowest_event_median_us_by_detector": dict(sorted(by_detector.items())),
    }
