"""`costguard ledger`: what costguard's actions saved, per team, as text, CSV (one row per action) or JSON.

Against a deployed stack (read-only: the stack's state table, one GetItem for its teams and one Query per team of
the ledger's index), or, with ``--world``, against a world played on the embedded stack: the demo's events run in
the mode asked (remediate by default; notify shows what remediate's stops would have kept off), then its ledger.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from costguard.events.common import to_datetime
from costguard.ledger import CSV_FIELDS, Entry, render, totals
from costguard.ops.uninstall import DEFAULT_STACK

PERIOD = timedelta(days=30)  # without --since: the last 30 days


class LedgerError(Exception):
    """The ledger cannot be read: no such stack, or one without a state table."""


def _since(text: str) -> datetime:
    try:
        return to_datetime(text)
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a time (ISO 8601, or epoch seconds)") from None


def add_command(commands: Any) -> None:
    """`costguard ledger`'s parser, under the command line's subcommands."""
    lp = commands.add_parser(
        "ledger",
        help="what costguard's actions saved, per team: a deployed stack's savings ledger (read-only), or a "
        "world's (--world)",
    )
    lp.add_argument("--stack", default=DEFAULT_STACK, help="the stack's name (default: costguard)")
    lp.add_argument("--region", help="the stack's region (default: your AWS configuration's)")
    lp.add_argument(
        "--world",
        nargs="?",
        const="",
        metavar="FILE",
        help="play a world on the embedded stack instead (default: the demo world) and show its ledger",
    )
    lp.add_argument(
        "--mode",
        choices=["notify", "remediate"],
        default="remediate",
        help="with --world: the mode it runs in",
    )
    lp.add_argument("--since", type=_since, help="ISO 8601 time (default: 30 days before now)")
    lp.add_argument("--team", action="append", help="only this team (repeatable)")
    shape = lp.add_mutually_exclusive_group()
    shape.add_argument("--csv", action="store_true", help="one CSV row per action")
    shape.add_argument(
        "--json", action="store_true", help="a JSON document: each action and each team's totals"
    )
    lp.set_defaults(run=cmd_ledger)


def cmd_ledger(args: argparse.Namespace) -> int:
    try:
        entries, now = world_ledger(args) if args.world is not None else stack_ledger(args)
    except LedgerError as error:
        print(f"costguard ledger: {error}", file=sys.stderr)
        return 2
    since = args.since or now - PERIOD
    chosen = [e for e in entries if e.at >= since and (not args.team or e.team in args.team)]
    if args.csv:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=CSV_FIELDS, lineterminator="\n")
        writer.writeheader()
        for entry in chosen:
            writer.writerow({k: entry.as_json(now)[k] for k in CSV_FIELDS})
        sys.stdout.write(out.getvalue())
    elif args.json:
        print(json.dumps(as_json(chosen, now), indent=2))
    else:
        print(render(chosen, now))
    return 0


def as_json(entries: list[Entry], now: datetime) -> dict[str, Any]:
    return {
        "now": now.isoformat(),
        "actions": [e.as_json(now) for e in entries],
        "teams": [
            {
                "team": t.team,
                "actions": t.actions,
                "saved_usd": round(t.saved_usd, 2),
                "near_misses": t.near_misses,
                "near_miss_usd": round(t.near_miss_usd, 2),
                "still_off": t.still_off,
                "top": [e.id for e in t.top],
            }
            for t in totals(entries, now)
        ],
    }


def stack_ledger(args: argparse.Namespace) -> tuple[list[Entry], datetime]:
    """The deployed stack's ledger: its state table from the stack's outputs, read from ``--since``."""
    import boto3

    from costguard.act.ledger_book import DynamoLedger
    from costguard.ops.uninstall import describe_stack

    region = args.region or boto3.session.Session().region_name or "us-east-1"
    stack = describe_stack(args.stack, region)
    table = stack.outputs.get("StateTableName")
    if not stack.exists or not table:
        raise LedgerError(
            f"no costguard stack {args.stack!r} with a state table in {region} (--stack, --region)"
        )
    now = datetime.now(UTC)
    return DynamoLedger(table).entries(args.since or now - PERIOD, now, args.team), now


def world_ledger(args: argparse.Namespace) -> tuple[list[Entry], datetime]:
    """A world's ledger: the demo's events played in ``--mode`` on the embedded stack (their output kept quiet)."""
    from costguard.local.demo import run_demo
    from costguard.local.stack import DEMO_WORLD
    from costguard.local.world import load_world

    world = load_world(args.world or DEMO_WORLD)
    print(
        f"costguard ledger --world: playing {args.world or 'the demo world'} in {args.mode} mode...",
        file=sys.stderr,
    )
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        run = run_demo(world, args.mode, overrides={"POWERTOOLS_LOG_LEVEL": "ERROR"})
    return run.ledger, run.ended or world.now
