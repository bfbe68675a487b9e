"""What the sweep's read schedule reads: a week replayed with and without it, and the same decisions.

    .venv/bin/python -m bench.read_schedule

Replays worlds/backtest.yaml and a generated week (backtest/generate.py, the project's seed: idle notebooks,
pipelines waiting between jobs, trainers, serving) with the schedule off (every instance at every sweep) and on,
checks the marks, unmarks and stops are the same at the same times, and writes to bench/results.json's
``read_schedule``: GPU series read per series-hour (each read is of all an instance's GPU series), and the CPU and
network metrics read per instance-hour (the CPU for each reading whose idle verdict is news, the CPU and network for a starved one, which its
message states; a standing finding's repeats read none). The cost model (bench/costs.py) prices the sweep from the harsher of the weeks.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "shared"))

from costguard.backtest.command import world_period  # noqa: E402
from costguard.backtest.generate import PROJECT_SEED, generate  # noqa: E402
from costguard.backtest.history import History  # noqa: E402
from costguard.backtest.walk import Params, Result, backtest  # noqa: E402
from costguard.backtest.world_history import world_history  # noqa: E402
from costguard.local.world import load_world  # noqa: E402
from costguard.pricing import PriceBook  # noqa: E402

SWEEPS_PER_HOUR = 12


def _changes(result: Result) -> list[list[tuple[Any, ...]]]:
    return [[(e.at, e.action, e.reason) for e in o.events if e.action != "notify"] for o in result.outcomes]


def measure(name: str, history: History) -> dict[str, Any]:
    every, scheduled = (
        backtest(history, Params(read_schedule=False)),
        backtest(history, Params(read_schedule=True)),
    )
    with_series = [
        (a, b) for a, b in zip(every.outcomes, scheduled.outcomes, strict=True) if a.subject.tracks
    ]
    series_reads_every = sum(a.reads * len(a.subject.tracks) for a, _ in with_series)
    series_reads = sum(b.reads * len(b.subject.tracks) for _, b in with_series)
    # Every sweep reads every running instance without the schedule: its reads / 12 are the instance-hours judged.
    instance_hours = sum(a.reads for a, _ in with_series) / SWEEPS_PER_HOUR
    evidence = sum(b.evidence_metrics for _, b in with_series)
    return {
        "week": name,
        "instances": len(with_series),
        "instance_hours_judged": round(instance_hours, 1),
        "series_reads_without_schedule": series_reads_every,
        "series_reads_with_schedule": series_reads,
        "reads_per_instance_hour": round(SWEEPS_PER_HOUR * series_reads / series_reads_every, 3),
        "evidence_metrics_per_instance_hour": round(evidence / instance_hours, 3),
        "same_marks_unmarks_and_stops": _changes(every) == _changes(scheduled),
        "stops": [every.stops, scheduled.stops],
        "notices_without_and_with": [every.notices, scheduled.notices],
    }


def bench_read_schedule() -> dict[str, Any]:
    """The figures (``make bench`` runs this as its ``read_schedule`` case; the bill is priced from them)."""
    world = load_world(ROOT / "worlds" / "backtest.yaml")
    start, step = world_period(world, None, None)
    weeks = [
        measure("worlds/backtest.yaml", world_history(world, start, step, PriceBook())),
        measure(f"generated week, seed {PROJECT_SEED}", generate(PROJECT_SEED).history),
    ]
    harshest = max(weeks, key=lambda w: w["reads_per_instance_hour"])
    return {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "weeks": weeks,
        "priced_from": harshest["week"],
        "reads_per_instance_hour": harshest["reads_per_instance_hour"],
        "evidence_metrics_per_instance_hour": harshest["evidence_metrics_per_instance_hour"],
    }


def main() -> dict[str, Any]:
    figures = bench_read_schedule()
    path = ROOT / "bench" / "results.json"
    results = json.loads(path.read_text())
    results["read_schedule"] = figures
    path.write_text(json.dumps(results, indent=2) + "\n")
    return figures


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
