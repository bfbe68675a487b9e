"""`costguard backtest`: read a period's history (a world file, or a real account read-only), walk it, report."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from costguard.backtest.history import History
from costguard.backtest.progress import progress_for
from costguard.backtest.report import SweepRow, as_html, as_json, as_text
from costguard.backtest.walk import Params, Result, backtest
from costguard.backtest.widen import WidenRow, widening
from costguard.events.common import to_datetime
from costguard.local.world import World
from costguard.pricing import price_book
from costguard.settings import parse_settings

SWEEP_KEYS = {
    "idle-threshold": "idle_percent",
    "idle-window": "idle_window",
    "grace": "grace",
    # The adaptive policy's (with --policy adaptive): minutes, minutes, dollars.
    "adaptive-floor": "adaptive_floor",
    "adaptive-horizon": "adaptive_horizon",
    "interruption-cost": "interruption_cost_usd",
}
NUMBERS = {"idle_percent", "interruption_cost_usd"}


class SweepError(ValueError):
    """A --sweep item is not ``name=v1,v2,...`` with a known name and numbers."""


def parse_sweep(items: list[str]) -> list[dict[str, float]]:
    """``["idle-threshold=2,5", "idle-window=15,30"]`` -> every combination, in the order given."""
    if not items:
        return []
    axes: list[tuple[str, list[float]]] = []
    for item in items:
        name, _, values = item.partition("=")
        if name not in SWEEP_KEYS or not values:
            raise SweepError(f"--sweep {item!r}: expected one of {', '.join(SWEEP_KEYS)} as name=v1,v2,...")
        try:
            axes.append((name, [float(v) for v in values.split(",") if v.strip()]))
        except ValueError:
            raise SweepError(f"--sweep {item!r}: the values must be numbers") from None
    return [
        dict(zip([n for n, _ in axes], combo, strict=True))
        for combo in itertools.product(*[v for _, v in axes])
    ]


def with_values(params: Params, values: dict[str, float]) -> Params:
    update: dict[str, Any] = {}
    for name, value in values.items():
        field = SWEEP_KEYS[name]
        update[field] = value if field in NUMBERS else timedelta(minutes=value)
    return replace(params, **update)


def sweep(history: History, params: Params, combos: list[dict[str, float]]) -> list[SweepRow]:
    rows = []
    for values in combos:
        p = with_values(params, values)
        rows.append(
            SweepRow(
                p.idle_percent,
                int(p.idle_window.total_seconds() // 60),
                int(p.grace.total_seconds() // 60),
                backtest(history, p),
            )
        )
    return rows


def params_of(args: argparse.Namespace) -> Params:
    """The deployed settings (COSTGUARD_* variables, else the defaults), with the command line's overrides."""
    settings = parse_settings()
    minutes = {
        "idle_window": args.idle_window,
        "grace": args.grace,
        "near_miss_horizon": args.near_miss_horizon,
    }
    minutes["adaptive_floor"] = getattr(args, "adaptive_floor", None)
    minutes["adaptive_horizon"] = getattr(args, "adaptive_horizon", None)
    return Params.from_settings(
        settings,
        idle_percent=args.idle_threshold,
        idle_policy=getattr(args, "policy", None),
        interruption_cost_usd=getattr(args, "interruption_cost", None),
        **{k: timedelta(minutes=v) if v is not None else None for k, v in minutes.items()},
    )


def world_period(
    world: World, days: float | None, step_minutes: float | None, window: timedelta = timedelta(hours=2)
) -> tuple[datetime, timedelta]:
    """By default the world's series but for the verdict ``window`` at their start (so the first step has
    a whole window behind it), in steps of the world's coarsest metric period."""
    lookback = timedelta(minutes=max((i.gpu_metrics.lookback_minutes for i in world.instances), default=180))
    start = world.now - (timedelta(days=days) if days else max(lookback - window, lookback / 2))
    period = max((i.gpu_metrics.period_seconds for i in world.instances), default=60)
    return start, timedelta(minutes=step_minutes) if step_minutes else timedelta(seconds=period)


def read_world(world: World, args: argparse.Namespace) -> History:
    from costguard.backtest.world_history import world_history

    start, step = world_period(world, args.days, args.step)
    history = world_history(world, start, step, price_book())
    history.source = f"world file {args.world or 'worlds/demo.yaml'}"
    return history


def read_account(args: argparse.Namespace, params: Params, combos: list[dict[str, float]]) -> History:
    import boto3

    from costguard.backtest.live import LIVE_STEP, live_history

    settings = parse_settings()
    step = timedelta(minutes=args.step) if args.step else LIVE_STEP
    end = to_datetime(args.now) if args.now else datetime.now(UTC)
    end = datetime.fromtimestamp(end.timestamp() // step.total_seconds() * step.total_seconds(), tz=UTC)
    region = args.region or boto3.session.Session().region_name or "us-east-1"
    windows = [params.idle_window, params.starved_window] + [
        with_values(params, c).idle_window for c in combos
    ]
    return live_history(
        region,
        end - timedelta(days=args.days or 7),
        end,
        price_book(live=settings.price_source == "live"),
        max(windows),
        step,
    )


def write_reports(
    out: Path,
    document: dict[str, Any],
    result: Result,
    rows: list[SweepRow],
    widened: list[WidenRow] | None = None,
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "backtest.json", out / "backtest.html"]
    paths[0].write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    paths[1].write_text(as_html(result, rows, widened), encoding="utf-8")
    return paths


def cmd_backtest(args: argparse.Namespace, world: World | None) -> int:
    """Run one backtest (and its sweep); ``world`` is None for a real account."""
    try:
        combos = parse_sweep(args.sweep or [])
    except SweepError as error:
        print(f"costguard: {error}", file=sys.stderr)
        return 2
    params = params_of(args)
    if getattr(args, "generate", None) is not None:
        from costguard.backtest.generate import generate

        history = generate(args.generate).history
    else:
        history = read_world(world, args) if world is not None else read_account(args, params, combos)
    result = backtest(history, params, progress_for("backtest", args.json))
    rows = sweep(history, params, combos)
    widened = widening(history, params, args.widen, backtest) if getattr(args, "widen", None) else []
    api_calls: dict[str, int] = {}
    if world is None:
        from costguard.backtest.live import api_calls as counted

        api_calls = counted()
    document = as_json(result, rows, api_calls) | {"widening": [row.as_json() for row in widened]}
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print(as_text(result, rows, widened=widened))
    if args.out:
        for path in write_reports(Path(args.out), document, result, rows, widened):
            print(f"wrote {path}", file=sys.stderr)
    return 0


def add_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--days", type=float, help="length of the period (default: a world's whole series; 7 live)"
    )
    source = command.add_mutually_exclusive_group()
    source.add_argument("--world", help="world YAML file (default: the demo world)")
    source.add_argument(
        "--live",
        action="store_true",
        help="read a real account with the default boto3 session's read-only credentials",
    )
    source.add_argument(
        "--generate",
        type=int,
        metavar="SEED",
        help="the generated labelled week of this seed (backtest/generate.py; the project's is 17)",
    )
    command.add_argument("--region", help="with --live: the region (default: the session's)")
    command.add_argument(
        "--policy", choices=("fixed", "adaptive"), help="idle policy (default: COSTGUARD_IDLE_POLICY)"
    )
    command.add_argument("--interruption-cost", type=float, help="adaptive: dollars an interrupted job costs")
    command.add_argument("--adaptive-floor", type=int, help="adaptive: minutes, never a stop before")
    command.add_argument(
        "--adaptive-horizon", type=int, help="adaptive: minutes, work this soon is an interruption"
    )
    command.add_argument("--now", help="end of the period (ISO 8601 or epoch), default the world's or now")
    command.add_argument("--step", type=float, help="minutes per step (default: the metric period; 5 live)")
    command.add_argument(
        "--idle-threshold", type=float, help="percent (default: COSTGUARD_IDLE_THRESHOLD_PERCENT)"
    )
    command.add_argument("--idle-window", type=int, help="minutes (default: COSTGUARD_IDLE_WINDOW_MINUTES)")
    command.add_argument("--grace", type=int, help="minutes (default: COSTGUARD_GRACE_MINUTES)")
    command.add_argument(
        "--near-miss-horizon",
        type=int,
        default=60,
        help="minutes: busy again this soon after a stop is a near-miss",
    )
    command.add_argument(
        "--sweep",
        nargs="+",
        metavar="NAME=V1,V2",
        help="try every combination: idle-threshold=2,5,10 idle-window=15,30,60 grace=0,15 (adaptive: "
        "adaptive-floor=30,40 adaptive-horizon=60 interruption-cost=10,25,50)",
    )
    command.add_argument(
        "--widen",
        metavar="TAG",
        help="preview the rollout: remediate widened one value of this tag at a time (team: team=a, then "
        "team=a|b, ...; the safest first), each step walked with its RemediateScope, then every resource",
    )
    command.add_argument("--json", action="store_true", help="the JSON document on stdout, no progress bar")
    command.add_argument("--out", help="directory for backtest.json and backtest.html")


def demo_backtest(world: World) -> str:
    """The short backtest `costguard demo` ends with: the demo world's series, the default settings."""
    start, step = world_period(world, None, None)
    from costguard.backtest.world_history import world_history

    history = world_history(world, start, step, price_book())
    return as_text(backtest(history, Params.from_settings(parse_settings())), limit=8)
