"""Backtest against an account: GetMetricData calls for 1,000 instances over 7 days, counted, and the
running periods read from EC2's CPUUtilization series."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from costguard.aws import clients
from costguard.aws.metrics import Query, get_metric_data
from costguard.backtest import live
from costguard.backtest.walk import Params, backtest
from costguard.local.metric_responder import MAX_DATAPOINTS, Dimensions, MetricResponder
from costguard.model import Accelerators, Ec2Instance
from costguard.pricing import PriceBook

END = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
START = END - timedelta(days=7)
LOOKBACK = timedelta(hours=2)
A10G = Accelerators(kind="nvidia_gpu", count=1, model="A10G")
STOPPED_AT = END - timedelta(days=2)


def instance(n: int, state: str = "running") -> Ec2Instance:
    return Ec2Instance(f"i-{n:017x}", "g5.xlarge", state, "123456789012", "us-east-1", START, {}, None, A10G)


def fleet_responder(fleet: list[Ec2Instance]) -> MetricResponder:
    """Idle GPUs; every instance runs throughout but the last, which its owner stopped two days ago."""
    stopped = {i.id for i in fleet if i.state == "stopped"}
    metrics: list[tuple[str, str, Dimensions]] = []
    for i in fleet:
        metrics.append(
            (
                "CWAgent",
                "nvidia_smi_utilization_gpu",
                (("InstanceId", i.id), ("index", "0"), ("name", "A10G")),
            )
        )
        metrics.append(("AWS/EC2", "CPUUtilization", (("InstanceId", i.id),)))

    def values(namespace: str, metric: str, dims: Dimensions, times: list[datetime]) -> list[float | None]:
        ran = dict(dims)["InstanceId"] not in stopped
        return [
            (1.0 if metric != "CPUUtilization" else 20.0) if ran or t < STOPPED_AT else None for t in times
        ]

    return MetricResponder(metrics, values)


@pytest.fixture
def account(monkeypatch: pytest.MonkeyPatch) -> list[Ec2Instance]:
    fleet = [instance(n) for n in range(999)] + [instance(999, "stopped")]
    monkeypatch.setattr(live, "describe_gpu_instances", lambda region, states: fleet)
    monkeypatch.setattr(live, "in_progress_training_jobs", lambda region: [])
    monkeypatch.setattr(live, "in_service_notebooks", lambda region: [])
    fleet_responder(fleet).install(clients.cloudwatch("us-east-1"))
    clients.calls.clear()
    return fleet


def test_get_metric_data_calls_for_1000_instances_over_7_days_are_within_the_batching_floor(
    account: list[Ec2Instance],
) -> None:
    history = live.live_history("us-east-1", START, END, PriceBook(), LOOKBACK)

    series = 2 * len(account)  # one GPU and CPUUtilization each
    points = live.points_per_series(START - LOOKBACK, END, live.LIVE_STEP)
    assert points == 7 * 288 + 24
    floor = live.calls_floor(series, points)  # ceil(2000 * 2040 / 100,800) = 41
    calls = clients.calls[("cloudwatch", "GetMetricData")]
    assert floor == 41
    assert floor <= calls <= floor + 1
    assert calls == math.ceil(series / live.series_per_call(points))
    assert clients.calls[("cloudwatch", "ListMetrics")] == math.ceil(series / 2 / 500)
    assert len(history.subjects) == 1000
    assert all(len(s.tracks[0].series) == points for s in history.subjects[:999])


def test_running_periods_come_from_cpu_datapoints_and_an_owner_stop_ends_the_savings(
    account: list[Ec2Instance],
) -> None:
    history = live.live_history("us-east-1", START, END, PriceBook(), LOOKBACK)
    running, stopped = history.subjects[0], history.subjects[-1]
    assert running.running == [(START - LOOKBACK, END)]
    assert stopped.running == [(START - LOOKBACK, STOPPED_AT)]
    history.subjects = [running, stopped]
    result = backtest(history, Params(max_stops_per_run=1000, max_stops_per_hour=1000))
    endings = [e.ended_by for o in result.outcomes for e in o.events if e.action == "stop"]
    assert endings == ["period_end", "owner_stopped"]


def test_the_responder_pages_at_cloudwatchs_datapoint_limit() -> None:
    fleet = [instance(n) for n in range(500)]
    fleet_responder(fleet).install(clients.cloudwatch("us-east-1"))
    clients.calls.clear()
    queries = [Query((i.id, "cpu", ""), "AWS/EC2", "CPUUtilization", (("InstanceId", i.id),)) for i in fleet]
    data = get_metric_data("us-east-1", queries, START - LOOKBACK, END, 300)
    # 500 series x 2040 points in one request: CloudWatch (and the responder) page it 100,800 at a time.
    assert clients.calls[("cloudwatch", "GetMetricData")] == math.ceil(500 * 2040 / MAX_DATAPOINTS) == 11
    assert all(len(data.measure(i.id, "cpu")) == 2040 for i in fleet)
