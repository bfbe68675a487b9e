"""The `costguard` command: replay events, run the demo, backtest a period, audit right-sizing, redrive."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from costguard.events.common import to_datetime
from costguard.local.render import render
from costguard.local.replay import ReplayResult, latest_event_time, replay
from costguard.local.stack import PROJECT_ROOT, LocalStack
from costguard.local.world import World, WorldFileError, load_world

DEMO_WORLD = PROJECT_ROOT / "worlds" / "demo.yaml"
EVENTS_DIR = PROJECT_ROOT / "events"


def _world(path: str | None, now: str | None) -> World:
    world = load_world(path or DEMO_WORLD)
    if now:
        world = world.model_copy(update={"now": to_datetime(now)})
    return world


def _log_level(args: argparse.Namespace) -> dict[str, str]:
    """The functions' own logs go to stderr; only warnings and errors unless --verbose."""
    return {"POWERTOOLS_LOG_LEVEL": "INFO" if args.verbose else "WARNING"}


def _print_human(results: Sequence[ReplayResult]) -> None:
    for result in results:
        print(f"\n=== {result.event}")
        if result.error:
            print(f"    ERROR: {result.error}")
            continue
        print(f"    function: {result.function}")
        if result.output:
            print(f"    result:   {json.dumps(result.output, default=str)}")
        for finding in result.findings:
            print(f"    finding:  {finding['reason']} on {finding['resource_id']}: {finding['summary']}")
        for decision in result.decisions:
            dry = " (dry run)" if decision["dry_run"] else ""
            print(f"    decision: {decision['action']}{dry} {decision['resource_id']} [{decision['reason']}]")
        for message in result.slack:
            print(render(message))


def cmd_replay(args: argparse.Namespace) -> int:
    world = _world(args.world, args.now)
    with LocalStack(
        world, mode=args.mode, overrides=_log_level(args), until=latest_event_time(args.events)
    ) as stack:
        results = replay(stack, args.events)
    if args.json:
        for result in results:
            print(json.dumps(result.as_json(), default=str))
    else:
        _print_human(results)
    for result in results:
        if result.error:
            print(f"costguard: {result.error}", file=sys.stderr)
    return 0 if all(r.ok for r in results) else 1


def cmd_demo(args: argparse.Namespace) -> int:
    world = _world(args.world, None)
    events = sorted(EVENTS_DIR.glob("*.json"))
    print(
        f"costguard demo: account {world.account} in {world.region} at {world.now:%Y-%m-%d %H:%M} UTC, "
        f"{len(world.instances)} instances; replaying {len(events)} events in {args.mode} mode"
    )
    with LocalStack(
        world, mode=args.mode, overrides=_log_level(args), until=latest_event_time(list(events))
    ) as stack:
        results = replay(stack, list(events))
    _print_human(results)
    spent = sum(f.get("cost_usd") or 0 for r in results for f in r.findings)
    # Each resource counted once, at its latest decision.
    latest = {d["resource_id"]: d for r in results for d in r.decisions}
    hourly = sum(d.get("hourly_usd") or 0 for d in latest.values() if d["action"] in ("mark", "stop", "none"))
    messages = sum(len(r.slack) for r in results)
    print(
        f"\nSummary: {sum(len(r.findings) for r in results)} findings, {messages} Slack messages, "
        f"${spent:,.2f} already spent on flagged runs, ${hourly:,.2f}/h on resources costguard would stop."
    )
    from costguard.backtest.command import demo_backtest

    print("\nWhat remediate mode would have done over the world's series (`costguard backtest` for more):")
    print(demo_backtest(world))
    from costguard.local.audit import print_summary, run_audit, write_outputs

    print("\nThe right-sizing audit (`costguard audit` for its options):")
    audit = run_audit(world, overrides=_log_level(args))
    print_summary(audit, write_outputs(audit, Path(tempfile.mkdtemp(prefix="costguard-audit-"))))
    return 0 if all(r.ok for r in results) and audit.report is not None else 1


def cmd_backtest(args: argparse.Namespace) -> int:
    from costguard.backtest.command import cmd_backtest as run

    return run(args, None if args.live else _world(args.world, args.now))


def cmd_audit(args: argparse.Namespace) -> int:
    from costguard.audit.rules import RulesFileError, load_rules
    from costguard.local.audit import print_summary, run_audit, write_outputs

    try:
        load_rules(args.rules)  # a bad rules file is named here, before anything starts
    except RulesFileError as error:
        print(f"costguard: bad rules file: {error}", file=sys.stderr)
        return 2
    world = _world(args.world, args.now)
    regions = [r.strip() for r in args.regions.split(",") if r.strip()] if args.regions else None
    run = run_audit(world, rules_file=args.rules, regions=regions, overrides=_log_level(args))
    written = write_outputs(run, Path(args.out))
    if args.json:
        print(json.dumps(run.report if run.report is not None else {"error": run.error}, default=str))
    else:
        print_summary(run, written)
    failed = run.report is None or bool(run.report["totals"]["failed_regions"])
    return 1 if failed else 0


def cmd_redrive(args: argparse.Namespace) -> int:
    from costguard.aws import clients
    from costguard.local.redrive import redrive

    dlq, target = args.dlq_url, args.queue_url
    if args.stack:
        outputs = {
            o["OutputKey"]: o["OutputValue"]
            for o in clients.client("cloudformation").describe_stacks(StackName=args.stack)["Stacks"][0][
                "Outputs"
            ]
        }
        dlq, target = outputs["DecisionsDeadLetterQueueUrl"], outputs["DecisionsQueueUrl"]
    if not dlq or not target:
        print("costguard redrive: give --stack, or both --dlq-url and --queue-url", file=sys.stderr)
        return 2
    moved = redrive(dlq, target)
    print(f"moved {moved} notices from the dead-letter queue back to the decisions queue")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="costguard", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True)

    rp = commands.add_parser("replay", help="route event files as the deployed rules would and run them")
    rp.add_argument("events", nargs="+", help="event JSON files")
    rp.add_argument("--world", help="world YAML file (default: the demo world)")
    rp.add_argument("--now", help="the time to run at (ISO 8601 or epoch), default the world's")
    rp.add_argument("--mode", choices=["notify", "remediate"], default="notify")
    rp.add_argument("--json", action="store_true", help="one JSON object per event")
    rp.add_argument("--verbose", action="store_true", help="the functions' INFO logs on stderr")
    rp.set_defaults(run=cmd_replay)

    dm = commands.add_parser("demo", help="seed the demo world and replay every file in events/")
    dm.add_argument("--world", help="world YAML file (default: the demo world)")
    dm.add_argument("--mode", choices=["notify", "remediate"], default="notify")
    dm.add_argument("--verbose", action="store_true", help="the functions' INFO logs on stderr")
    dm.set_defaults(run=cmd_demo)

    from costguard.backtest.command import add_arguments as backtest_arguments

    bt = commands.add_parser(
        "backtest", help="what costguard would have caught, stopped and saved over a past period (dry run)"
    )
    backtest_arguments(bt)
    bt.set_defaults(run=cmd_backtest)

    au = commands.add_parser(
        "audit", help="run the right-sizing audit state machine on the world and write its report"
    )
    au.add_argument("--world", help="world YAML file (default: the demo world)")
    au.add_argument("--now", help="the time to audit at (ISO 8601 or epoch), default the world's")
    au.add_argument("--json", action="store_true", help="print the report JSON")
    au.add_argument("--out", default="costguard-audit", help="directory for report.json and report.html")
    au.add_argument("--rules", help="JSON file overriding the packaged rules")
    au.add_argument("--regions", help="comma-separated regions (default: the world's)")
    au.add_argument("--verbose", action="store_true", help="the functions' INFO logs on stderr")
    au.set_defaults(run=cmd_audit)

    rd = commands.add_parser(
        "redrive", help="move notices from the dead-letter queue back to the decisions queue"
    )
    rd.add_argument("--stack", help="deployed stack name (reads its outputs)")
    rd.add_argument("--dlq-url")
    rd.add_argument("--queue-url")
    rd.set_defaults(run=cmd_redrive)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except WorldFileError as error:
        print(f"costguard: bad world file: {error}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    raise SystemExit(main())
