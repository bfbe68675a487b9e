"""The idle policies from day one: cold weeks (no history before them) and weeks after 14 days of learning.

    .venv/bin/python bench/adaptive_cold.py [--seeds 17 1 2 3] [--no-warm]

Two generator families (backtest/generate.py, the project's office fleet; backtest/generate_shifts.py, shifts in
other time zones, long evaluations and bursty pipelines, which the adaptive policy was not tuned on), each seed
backtested with the fixed 30- and 60-minute windows, the adaptive policy (with its fleet priors) and perfect
foresight. Writes bench/adaptive_cold.json and bench/adaptive_cold.md: dollars reclaimed (of the labelled idle
dollars), near-misses (work within 60 minutes of a stop) and stops of labelled work.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from costguard.backtest.generate import PROJECT_SEED, Generated, generate
from costguard.backtest.generate_shifts import generate_shifts
from costguard.backtest.walk import Params, backtest, perfect_foresight

HERE = Path(__file__).parent
DETECTORS = HERE.parent / "docs" / "detectors.md"
COLD_BEGIN = "<!-- bench-cold:begin (written by bench/adaptive_cold.py from bench/adaptive_cold.json: do not edit by hand) -->"
COLD_END = "<!-- bench-cold:end -->"
FAMILIES: dict[str, Callable[[int, int], Generated]] = {
    "office": lambda seed, history: generate(seed, history_days=history),
    "shifts": lambda seed, history: generate_shifts(seed, history_days=history),
}
POLICIES = ("fixed_30", "fixed_60", "adaptive", "perfect_foresight")


def measure(family: str, seed: int, history_days: int) -> dict[str, Any]:
    history = FAMILIES[family](seed, history_days).history
    base = Params(read_schedule=False)
    rows: dict[str, Any] = {}
    for name, params in {
        "fixed_30": base,
        "fixed_60": replace(base, idle_window=timedelta(minutes=60)),
        "adaptive": replace(base, idle_policy="adaptive"),
    }.items():
        result = backtest(history, params)
        labelled = result.labelled
        assert labelled is not None
        rows[name] = {
            "reclaimed_usd": round(labelled.reclaimed_usd, 2),
            "reclaimed_share": round(labelled.share, 4),
            "near_misses": result.near_misses,
            "work_stops": labelled.work_stops,
        }
    bound, _ = perfect_foresight(history, base)
    rows["perfect_foresight"] = {
        "reclaimed_usd": round(bound.reclaimed_usd, 2),
        "reclaimed_share": round(bound.share, 4),
        "near_misses": 0,
        "work_stops": 0,
    }
    adaptive, f30, f60 = rows["adaptive"], rows["fixed_30"], rows["fixed_60"]
    return {
        "family": family,
        "seed": seed,
        "history_days": history_days,
        "reclaimable_idle_usd": round(bound.reclaimable_usd, 2),
        "policies": rows,
        "done_when": {
            "dollars_vs_fixed_30_usd": round(adaptive["reclaimed_usd"] - f30["reclaimed_usd"], 2),
            "near_misses_vs_fixed_60": adaptive["near_misses"] - f60["near_misses"],
            "work_stops": adaptive["work_stops"],
            "met": adaptive["reclaimed_usd"] >= f30["reclaimed_usd"]
            and adaptive["near_misses"] <= f60["near_misses"]
            and adaptive["work_stops"] == 0,
        },
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| family | seed | history | fixed 30 min | fixed 60 min | adaptive | perfect foresight | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in rows:
        cells = [
            f"${p['reclaimed_usd']:,.0f} ({p['reclaimed_share']:.1%}), {p['near_misses']}, {p['work_stops']}"
            for p in (m["policies"][name] for name in POLICIES)
        ]
        d = m["done_when"]
        met = (
            "yes"
            if d["met"]
            else (
                f"no: {d['dollars_vs_fixed_30_usd']:+,.0f} $ vs 30, {d['near_misses_vs_fixed_60']:+d} near-misses vs 60, "
                f"{d['work_stops']} work stops"
            )
        )
        history = "cold" if not m["history_days"] else f"{m['history_days']} days"
        lines.append(f"| {m['family']} | {m['seed']} | {history} | " + " | ".join(cells) + f" | {met} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[PROJECT_SEED, 1, 2, 3])
    parser.add_argument("--no-warm", action="store_true", help="cold weeks only")
    args = parser.parse_args()
    rows = []
    for family in FAMILIES:
        for history_days in (0,) if args.no_warm else (0, 14):
            for seed in args.seeds:
                rows.append(measure(family, seed, history_days))
                print(markdown(rows[-1:]).splitlines()[-1], flush=True)
    document = {
        "what": "per family, seed and history: dollars reclaimed (share of the labelled idle dollars), "
        "near-misses (work within 60 min of a stop), stops of labelled work",
        "settings": "5% threshold, 15-minute grace, near-miss horizon 60 min, interruption cost $25, "
        "every instance read at every step",
        "rows": rows,
    }
    (HERE / "adaptive_cold.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    (HERE / "adaptive_cold.md").write_text(render(document), encoding="utf-8")
    from bench.report import replace_block

    DETECTORS.write_text(replace_block(DETECTORS.read_text(), cold_table(document), COLD_BEGIN, COLD_END))


def cold_table(document: dict[str, Any]) -> str:
    """docs/detectors.md's table of the cold weeks: per family and seed, each policy's dollars, near-misses and
    stops of labelled work."""
    lines = [
        "| family, seed | fixed 30 min | fixed 60 min | adaptive (cold) | perfect foresight |",
        "|---|---|---|---|---|",
    ]
    for m in (row for row in document["rows"] if not row["history_days"]):
        cells = [
            f"${p['reclaimed_usd']:,.0f}, {p['near_misses']}, {p['work_stops']}"
            for p in (m["policies"][name] for name in POLICIES)
        ]
        lines.append(f"| {m['family']} {m['seed']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render(document: dict[str, Any]) -> str:
    """bench/adaptive_cold.md from bench/adaptive_cold.json."""
    return "Each cell: dollars reclaimed (share), near-misses, stops of labelled work.\n\n" + markdown(
        document["rows"]
    )


if __name__ == "__main__":
    main()
