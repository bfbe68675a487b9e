"""Where a backtest of a world file spends its time: a week of explicit per-GPU points for a fleet.

    .venv/bin/python bench/backtest_world.py [--instances 60] [--compare-loaders]

Writes a world of ``--instances`` instances (a third each of 8-, 4- and 1-GPU types), each GPU a run of 2,040
explicit five-minute values (a week and the two-hour window: office-hours work and idle nights), then times
loading it (libyaml's CSafeLoader, as local/world.load_world does where PyYAML has it; with
``--compare-loaders`` the pure-Python SafeLoader too), validating it, building the history and walking it.
Prints one JSON object; nothing is written to bench/results.json (its figures are `make bench`'s).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from costguard.backtest.command import world_period  # noqa: E402
from costguard.backtest.walk import Params, backtest  # noqa: E402
from costguard.backtest.world_history import world_history  # noqa: E402
from costguard.local.world import World, YamlLoader  # noqa: E402
from costguard.pricing import PriceBook  # noqa: E402

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
POINTS = 7 * 288 + 24
TYPES = [("p4d.24xlarge", 8), ("g5.12xlarge", 4), ("g5.xlarge", 1)]


def week_world(instances: int, seed: int = 1) -> dict[str, Any]:
    rng = random.Random(seed)
    first = NOW - timedelta(minutes=5 * POINTS)
    listed = []
    for n in range(instances):
        kind, count = TYPES[n % 3]
        gpus = []
        for index in range(count):
            values = []
            for k in range(POINTS):
                at = first + timedelta(minutes=5 * k)
                working = at.weekday() < 5 and 9 <= at.hour < 18
                values.append(round(80 + 15 * rng.random(), 2) if working else round(2 * rng.random(), 2))
            gpus.append(
                {"index": index, "runs": [{"start": first.isoformat(), "step_minutes": 5, "values": values}]}
            )
        listed.append(
            {
                "id": f"i-{n:017x}",
                "type": kind,
                "launched": "2026-11-01T00:00:00Z",
                "gpu_metrics": {
                    "pattern": "idle",
                    "lookback_minutes": 5 * POINTS + 5,
                    "period_seconds": 300,
                    "gpus": gpus,
                },
            }
        )
    return {"now": NOW.isoformat(), "instances": listed}


def timed(what: dict[str, float], name: str, began: float) -> float:
    now = time.perf_counter()
    what[name] = round(now - began, 2)
    return now


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=60)
    parser.add_argument("--compare-loaders", action="store_true", help="also time yaml.SafeLoader (slow)")
    args = parser.parse_args()
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "week.yaml"
        path.write_text(
            yaml.dump(
                week_world(args.instances), Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), width=10**9
            )
        )
        text = path.read_text()
        began = time.perf_counter()
        if args.compare_loaders:
            yaml.load(text, Loader=yaml.SafeLoader)
            began = timed(seconds, "parse_safe_loader", began)
        data = yaml.load(text, Loader=YamlLoader)
        began = timed(seconds, f"parse_{YamlLoader.__name__}", began)
        world = World.model_validate(data)
        began = timed(seconds, "validate", began)
        start, step = world_period(world, None, None)
        history = world_history(world, start, step, PriceBook())
        began = timed(seconds, "history", began)
        result = backtest(history, Params())
        timed(seconds, "walk", began)
    print(
        json.dumps(
            {
                "instances": args.instances,
                "gpus": sum(len(i.gpu_metrics.gpus) for i in world.instances),
                "megabytes": round(len(text) / 1e6, 1),
                "seconds": seconds,
                "stops": result.stops,
                "reclaimable_usd": result.reclaimable_usd,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
