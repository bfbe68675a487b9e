"""costguard benchmarks: CPU time of the pure verdicts, API calls of a fleet sweep, replay wall time.

Writes bench/results.json and bench/RESULTS.md. Timings are measured here and written down, never asserted
in tests; API-call counts are what scales, and the tests assert those.
"""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "costguard")
os.environ["POWERTOOLS_LOG_LEVEL"] = "WARNING"
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "CostguardBench")

from bench.audit import audit_line, bench_audit_evaluation  # noqa: E402
from bench.costs import bench_costs  # noqa: E402
from bench.detectors import bench_detectors  # noqa: E402
from bench.fleet import bench_fleet  # noqa: E402
from bench.imports import bench_imports  # noqa: E402
from bench.org_scale import bench_org_scale  # noqa: E402
from bench.read_schedule import bench_read_schedule  # noqa: E402
from bench.report import results_sections, write_adaptive_table, write_readme  # noqa: E402
from bench.trust import bench_trust  # noqa: E402
from costguard import clock  # noqa: E402
from costguard.aws import clients  # noqa: E402
from costguard.detect.gpu import Thresholds, gpu_instance_findings, read_gpus  # noqa: E402
from costguard.local.sink import SlackSink  # noqa: E402
from costguard.local.stack import LocalStack  # noqa: E402
from costguard.local.world import World, load_world  # noqa: E402
from costguard.model import Accelerators, Ec2Instance  # noqa: E402
from costguard.pricing import bundled_price  # noqa: E402
from costguard.settings import parse_settings  # noqa: E402

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def cpu_seconds(work: Callable[[], Any]) -> tuple[float, Any]:
    start = time.process_time()
    result = work()
    return time.process_time() - start, result


def bench_verdicts(instances: int = 10_000, gpus: int = 8) -> dict[str, Any]:
    """Pure verdicts over a synthetic fleet with two hours of one-minute series per GPU."""
    thresholds = Thresholds()
    minutes = 120
    patterns = [1.0, 45.0, 92.0]
    series = {
        p: {i: [(NOW - timedelta(minutes=minutes - m), p) for m in range(minutes)] for i in range(gpus)}
        for p in patterns
    }
    accel = Accelerators(kind="nvidia_gpu", count=gpus, model="A100")
    fleet = [
        Ec2Instance(
            f"i-{n:017x}", "p4d.24xlarge", "running", "123456789012", "us-east-1", NOW, {}, None, accel
        )
        for n in range(instances)
    ]
    price = bundled_price("p4d.24xlarge", "us-east-1")

    def run() -> int:
        found = 0
        for n, inst in enumerate(fleet):
            reading = read_gpus(series[patterns[n % 3]], NOW, thresholds, gpus)
            found += len(gpu_instance_findings(inst, reading, price=price, thresholds=thresholds, now=NOW))
        return found

    seconds, findings = cpu_seconds(run)
    return {
        "instances": instances,
        "gpus_per_instance": gpus,
        "datapoints": instances * gpus * minutes,
        "cpu_seconds": round(seconds, 3),
        "findings": findings,
    }


def bench_sweep(instances: int = 1000) -> dict[str, Any]:
    """One sweep over a fleet on the embedded AWS: API calls by operation (moto's own time is not AWS's)."""
    from costguard.flows.gpu import evaluate
    from costguard.runtime import runtime

    world = World.model_validate(
        {
            "now": NOW,
            "instances": [
                {
                    "id": f"i-{n:017x}",
                    "type": "g5.xlarge",
                    "gpu_metrics": {"pattern": "idle", "lookback_minutes": 35},
                }
                for n in range(instances)
            ],
        }
    )
    with SlackSink() as sink, LocalStack(world, sink=sink):
        clients.calls.clear()
        start = time.perf_counter()
        report = evaluate("us-east-1", runtime(), clock.now())
        wall = time.perf_counter() - start
        calls = {f"{s}:{op}": n for (s, op), n in sorted(clients.calls.items())}
    queries = 3 * instances
    return {
        "instances": instances,
        "findings": len(report.findings),
        "api_calls": calls,
        "api_calls_total": sum(calls.values()),
        "floor": {
            "DescribeInstances": math.ceil(instances / 1000),
            "GetMetricData": math.ceil(queries / 500),
        },
        "wall_seconds_on_moto": round(wall, 2),
    }


def bench_demo_replay() -> dict[str, Any]:
    """`costguard demo`'s replay: every event in arrival order, through the local Slack app and the notifier's
    batching window; what the channel shows, and the replies in threads."""
    from costguard.local.demo import demo_events, run_demo

    world = load_world(ROOT / "worlds" / "demo.yaml")
    start = time.perf_counter()
    run = run_demo(world, "notify", overrides={"POWERTOOLS_LOG_LEVEL": "ERROR"})
    return {
        "events": len(demo_events()),
        "slack_messages": len(run.channel_messages),
        "thread_replies": len(run.posted) - len(run.channel_messages),
        "findings": sum(len(r.findings) for r in run.results),
        "wall_seconds": round(time.perf_counter() - start, 2),
    }


def bench_backtest(instances: int = 1000, days: int = 7) -> dict[str, Any]:
    """A week of five-minute history for a mixed GPU fleet, read through the account reader (GetMetricData
    answered in-process at CloudWatch's limits, calls counted) and walked; wall time of each part."""
    from unittest import mock

    from costguard.backtest import live
    from costguard.backtest.walk import Params, backtest
    from costguard.local.metric_responder import MetricResponder
    from costguard.pricing import PriceBook

    kinds = [("g5.xlarge", 1, "A10G"), ("g5.12xlarge", 4, "A10G"), ("p4d.24xlarge", 8, "A100")]
    fleet = []
    for n in range(instances):
        kind, count, model = kinds[n % 3]
        accel = Accelerators(kind="nvidia_gpu", count=count, model=model)
        fleet.append(
            Ec2Instance(f"i-{n:017x}", kind, "running", "123456789012", "us-east-1", None, {}, None, accel)
        )
    metrics = [
        ("CWAgent", "nvidia_smi_utilization_gpu", (("InstanceId", i.id), ("index", str(g)), ("name", "GPU")))
        for i in fleet
        for g in range(i.accelerators.count if i.accelerators else 0)
    ] + [("AWS/EC2", "CPUUtilization", (("InstanceId", i.id),)) for i in fleet]

    made: dict[tuple[str, bool, int], list[float | None]] = {}

    def values(namespace: str, metric: str, dims: Any, times: list[datetime]) -> list[float | None]:
        # Office hours on weekdays for three instances in four, with a 40-minute lunch break; the fourth idles.
        works = int(dict(dims)["InstanceId"][2:], 16) % 4 != 0
        key = (metric, works, id(times))
        if key not in made:
            made[key] = [
                20.0
                if metric == "CPUUtilization"
                else 85.0
                if works and t.weekday() < 5 and 9 <= t.hour < 18 and not (t.hour == 12 and t.minute < 40)
                else 1.0
                for t in times
            ]
        return made[key]

    end = NOW
    start = end - timedelta(days=days)
    lookback = timedelta(hours=2)
    with (
        mock.patch.object(live, "describe_gpu_instances", lambda region, states: fleet),
        mock.patch.object(live, "in_progress_training_jobs", lambda region: []),
        mock.patch.object(live, "in_service_notebooks", lambda region: []),
    ):
        MetricResponder(metrics, values).install(clients.cloudwatch("us-east-1"))
        clients.calls.clear()
        cpu = time.process_time()
        began = time.perf_counter()
        history = live.live_history("us-east-1", start, end, PriceBook(), lookback)
        read = time.perf_counter() - began
        calls = clients.calls[("cloudwatch", "GetMetricData")]
    began = time.perf_counter()
    result = backtest(history, Params.from_settings(parse_settings()))
    walked = time.perf_counter() - began
    cpu = time.process_time() - cpu
    series = len(metrics)
    points = live.points_per_series(start - lookback, end, live.LIVE_STEP)
    return {
        "instances": instances,
        "gpus": sum(i.accelerators.count for i in fleet if i.accelerators),
        "days": days,
        "steps": len(history.steps()),
        "datapoints": sum(len(t.series) for s in history.subjects for t in s.tracks.values()),
        "get_metric_data_calls": calls,
        "get_metric_data_floor": live.calls_floor(series, points),
        "read_seconds": round(read, 2),
        "walk_seconds": round(walked, 2),
        "total_seconds": round(read + walked, 2),
        "cpu_seconds": round(cpu, 2),
        "stops": result.stops,
        "near_misses": result.near_misses,
        "reclaimable_usd": result.reclaimable_usd,
    }


def bench_slack_latency() -> dict[str, Any]:
    """From a stop's decision to Slack, through both notifier queues as Lambda runs them (an organization's
    burst, a Slack answering late for five minutes, a fifth of state writes throttled): the cases of
    tests/integration/test_slack_latency.py, run with their figures written (only once their checks pass)."""
    import subprocess

    out = ROOT / "bench" / "results.json"
    stored = json.loads(out.read_text()) if out.exists() else {}
    stored.pop("slack_latency", None)  # written again by the test only if its checks pass
    out.write_text(json.dumps(stored, indent=2) + "\n")
    env = os.environ | {"COSTGUARD_SLACK_LATENCY_RESULTS": "1"}
    test = "tests/integration/test_slack_latency.py"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", test],
        cwd=ROOT,
        env=env,
        check=False,
    )
    figures = json.loads(out.read_text()).get("slack_latency")
    if done.returncode != 0 or figures is None:
        raise SystemExit(f"{test} failed (exit {done.returncode}): no slack_latency figures written")
    return dict(figures)


CASES: dict[str, Callable[[], dict[str, Any]]] = {
    "cold_imports": bench_imports,
    "detector_latency": bench_detectors,
    "fleet": bench_fleet,
    "audit_evaluation_10k_instances": bench_audit_evaluation,
    "verdicts_10k_instances": bench_verdicts,
    "sweep_1000_instances": bench_sweep,
    "demo_replay": bench_demo_replay,
    "backtest_1000_instances_7_days": bench_backtest,
    "hostile_input_and_soak": bench_trust,
    "organization_scale": bench_org_scale,
    "read_schedule": bench_read_schedule,  # the bill (bench_costs) prices the sweep from these reads
    "slack_latency": bench_slack_latency,
}
# Measured by scripts of their own, too long for every run (`make bench-adaptive`, the Slack app soak with
# COSTGUARD_SOAK_RESULTS=1 and the channel-rate bursts with COSTGUARD_CHANNEL_RATE_RESULTS=1, bench/generate_week.py
# --write): a full run keeps their last figures.
KEPT = ("adaptive_policy", "slack_app_soak", "slack_channel_rate")


def main(names: list[str]) -> None:
    """Every case, or only those named (``python bench/run.py backtest_1000_instances_7_days``): the others
    keep their last figures."""
    out = ROOT / "bench" / "results.json"
    stored = json.loads(out.read_text()) if out.exists() else {}
    previous = stored if names else {k: stored[k] for k in KEPT if k in stored}
    results = previous | {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "processor": platform.machine(),
        },
    }
    for name in names or list(CASES):
        results[name] = CASES[name]()
    if "fleet" in results and "cold_imports" in results:
        # Priced from this run's counts (or the last run's, for a case not run this time).
        results["monthly_cost"] = bench_costs(results)
    peak = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    # Only some cases run: the peak of the full run stands unless this one went higher.
    results["max_rss_mib"] = max(peak, float(previous.get("max_rss_mib", 0.0)))
    out.write_text(json.dumps(results, indent=2) + "\n")
    v, s, d = results["verdicts_10k_instances"], results["sweep_1000_instances"], results["demo_replay"]
    (ROOT / "bench" / "RESULTS.md").write_text(
        "# Benchmark results\n\n"
        f"Measured {results['measured_at']} on Python {results['machine']['python']} ({results['machine']['processor']}). "
        "Written by `make bench`; numbers here are what that run measured.\n\n"
        f"- GPU verdicts, {v['instances']:,} instances x {v['gpus_per_instance']} GPUs, {v['datapoints']:,} datapoints: "
        f"{v['cpu_seconds']} s CPU ({v['findings']:,} findings).\n"
        f"- Sweep over {s['instances']:,} GPU instances: {s['api_calls_total']} API calls "
        f"({', '.join(f'{k} {n}' for k, n in s['api_calls'].items())}); "
        f"floor DescribeInstances {s['floor']['DescribeInstances']}, GetMetricData {s['floor']['GetMetricData']}. "
        f"{s['wall_seconds_on_moto']} s wall on moto (not representative of AWS).\n"
        f"- Demo replay: {d['events']} events, {d.get('findings', '?')} findings, {d['slack_messages']} Slack "
        f"messages in the channel and {d.get('thread_replies', 0)} replies in threads, {d['wall_seconds']} s wall.\n"
        + _backtest_line(results.get("backtest_1000_instances_7_days"))
        + audit_line(results.get("audit_evaluation_10k_instances"))
        + f"- Peak memory of the benchmark process: {results['max_rss_mib']} MiB.\n"
        + results_sections(results)
    )
    write_readme(results)
    write_adaptive_table(results)
    print(json.dumps(results, indent=2))


def _backtest_line(b: dict[str, Any] | None) -> str:
    if not b:
        return ""
    return (
        f"- Backtest of {b['instances']:,} GPU instances ({b['gpus']:,} GPUs) over {b['days']} days in 5-minute "
        f"steps ({b['steps']:,} steps, {b['datapoints']:,} datapoints): {b['total_seconds']} s wall "
        f"(read {b['read_seconds']} s, walk {b['walk_seconds']} s), {b.get('cpu_seconds')} s CPU; {b['get_metric_data_calls']} GetMetricData "
        f"calls, floor {b['get_metric_data_floor']}. CloudWatch answered in-process (local/metric_responder.py): "
        "AWS's own latency is not included.\n"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
