"""The `costguard` command: replay events, run the demo, backtest a period, audit right-sizing, check an account
(doctor), redrive, write the deploy configuration (init) and clean up after the stack (uninstall)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from costguard.events.common import to_datetime
from costguard.local.headline import headline, summary_lines
from costguard.local.render import render
from costguard.local.replay import (
    ReplayResult,
    latest_event_time,
    replay_each,
    resolve_function,
)
from costguard.local.stack import (
    DEFAULT_TEMPLATE,
    DEMO_WORLD,
    PROJECT_ROOT,
    SEED_AHEAD,
    LocalStack,
    patched_environ,
)
from costguard.local.template import Template
from costguard.local.terminal import printable
from costguard.local.world import World, WorldFileError, load_world

EVENTS_DIR = PROJECT_ROOT / "events"


def _world(path: str | None, now: datetime | str | None) -> World:
    world = load_world(path or DEMO_WORLD)
    if now:
        world = world.model_copy(update={"now": to_datetime(now)})
    return world


# -- option values, checked by argparse (a bad one exits 2 naming the option) ---------------------------


def _time(text: str) -> datetime:
    """--now: ISO 8601 or epoch seconds/millis."""
    try:
        return to_datetime(text)
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: give ISO 8601 (2026-11-20T13:00:00Z) or epoch seconds"
        ) from None


def _number(
    kind: type[int] | type[float],
    *,
    least: float | None = None,
    most: float | None = None,
    above: float | None = None,
    why: str = "",
) -> Callable[[str], float]:
    """A number in bounds: ``least``/``most`` inclusive, ``above`` exclusive."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            wanted = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        bounds = []
        if above is not None:
            bounds.append(f"more than {above:g}")
        if least is not None:
            bounds.append(f"at least {least:g}")
        if most is not None:
            bounds.append(f"at most {most:g}")
        if (
            (above is not None and value <= above)
            or (least is not None and value < least)
            or (most is not None and value > most)
        ):
            raise argparse.ArgumentTypeError(f"must be {' and '.join(bounds)}{why}, not {text}")
        return value

    parse.__name__ = kind.__name__
    return parse


def _setting_bounds(field: str) -> tuple[float | None, float | None]:
    """The bounds a COSTGUARD_ setting is held to, so an option overriding it takes the same values."""
    from costguard.settings import Settings

    least = most = None
    for constraint in Settings.model_fields[field].metadata:
        least = getattr(constraint, "ge", least)
        most = getattr(constraint, "le", most)
    return least, most


def _setting(kind: type[int] | type[float], field: str) -> Callable[[str], float]:
    least, most = _setting_bounds(field)
    return _number(kind, least=least, most=most, why=f" (as COSTGUARD_{field.upper()})")


# --sweep names -> the setting each one overrides.
_SWEPT_SETTINGS = {
    "idle-threshold": "idle_threshold_percent",
    "idle-window": "idle_window_minutes",
    "grace": "grace_minutes",
}


def _sweep_item(text: str) -> str:
    """One --sweep item, ``name=v1,v2``: known name, numbers within what the setting takes."""
    from costguard.backtest.command import SweepError, parse_sweep

    try:
        parse_sweep([text])
    except SweepError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("--sweep ")) from None
    name, _, values = text.partition("=")
    field = _SWEPT_SETTINGS.get(name)
    if field is not None:
        least, most = _setting_bounds(field)
        for value in (float(v) for v in values.split(",") if v.strip()):
            if (least is not None and value < least) or (most is not None and value > most):
                raise argparse.ArgumentTypeError(
                    f"{text!r}: {value:g} is out of range for {name} ({least:g} to {most:g}, "
                    f"as COSTGUARD_{field.upper()})"
                )
    return text


# CloudWatch keeps metrics 15 months: a longer period has nothing to read.
MAX_BACKTEST_DAYS = 455
# backtest's own options (backtest/command.py) -> the check costguard's command line adds to each.
_BACKTEST_CHECKS: dict[str, Callable[[str], object]] = {
    "days": _number(float, above=0, most=MAX_BACKTEST_DAYS, why=" (CloudWatch keeps 15 months)"),
    "now": _time,
    "step": _number(float, above=0, most=24 * 60),
    "idle_threshold": _setting(float, "idle_threshold_percent"),
    "idle_window": _setting(int, "idle_window_minutes"),
    "grace": _setting(int, "grace_minutes"),
    "near_miss_horizon": _number(int, least=0, most=7 * 24 * 60),
    "sweep": _sweep_item,
    "region": lambda text: _region(text),
}


def _region(text: str) -> str:
    """--region: a region AWS has (argparse names the option and exits 2 on one it has not)."""
    from costguard.ops.account_commands import region_option

    return region_option(text)


def _check_options(command: argparse.ArgumentParser, checks: dict[str, Callable[[str], object]]) -> None:
    for action in command._actions:
        if action.dest in checks:
            action.type = checks[action.dest]


@cache
def _template() -> Template:
    return Template.load(DEFAULT_TEMPLATE)


def _function(text: str) -> str:
    """--function: a function of template.yaml by logical id (BudgetsFunction) or code directory (budgets)."""
    found = resolve_function(_template(), text)
    if found is None:
        known = ", ".join(sorted(f.logical_id for f in _template().functions().values() if f.routes))
        raise argparse.ArgumentTypeError(f"no function {text!r} in template.yaml (one of: {known})")
    return found.logical_id


def _log_level(args: argparse.Namespace) -> dict[str, str]:
    """The functions' own logs go to stderr; only warnings and errors unless --verbose."""
    return {"POWERTOOLS_LOG_LEVEL": "INFO" if args.verbose else "WARNING"}


def _print_human(result: ReplayResult, counter: str = "", *, errors: bool = True) -> None:
    """One event's result; what came from the event or the account (ids, summaries, errors, the Slack
    messages) printable: no control character of a Name tag reaches the terminal (local/terminal.py).
    ``errors``: the error too (False: the caller says it once, on stderr)."""
    p = printable
    print(f"\n=== {counter}{p(result.event)}")
    if result.function:
        print(f"    function: {p(result.function)}" + (f" ({p(result.route)})" if result.route else ""))
    for note in result.notes:
        print(f"    note:     {p(note)}")
    if result.error and errors:
        print(f"    ERROR: {p(result.error)}")
    if result.output:
        print(f"    result:   {json.dumps(result.output, default=str)}")
    for finding in result.findings:
        print(f"    finding:  {p(finding['reason'])} on {p(finding['resource_id'])}: {p(finding['summary'])}")
    for decision in result.decisions:
        dry = " (dry run)" if decision["dry_run"] else ""
        print(
            f"    decision: {p(decision['action'])}{dry} {p(decision['resource_id'])} [{p(decision['reason'])}]"
        )
    if result.slack:
        print(f"    {AT_ONCE}")
    for message in result.slack:
        print(printable(render(message), lines=True))


# What an event's own Slack messages are: told as it ran, not after the batching window (notify/notice.py, urgent).
AT_ONCE = "Slack, at once (a stop made or a budget breached skips the batching window):"


def _title(message: dict[str, Any]) -> str:
    """A Slack message's title (its header block), else its notification text, on one printable line."""
    blocks = message.get("blocks") or []
    head = next((b for b in blocks if b.get("type") == "header"), None)
    text = str((head or {}).get("text", {}).get("text") or message.get("text") or "")
    return printable(text.removeprefix("costguard: ").splitlines()[0] if text else "(no text)")


def _print_brief(result: ReplayResult, counter: str = "") -> None:
    """One event as the demo tells it by default: the event, each finding in words, what was decided, and the
    title of each Slack message it gave (`--verbose`: everything, the messages whole)."""
    p = printable
    name = Path(result.event).name
    where = f" -> {p(result.function)}" if result.function else ""
    print(f"{counter}{p(name)}{where}")
    if result.error:
        print(f"    error: {p(result.error)}")
    decided = {d["resource_id"]: d for d in result.decisions}
    for finding in result.findings:
        decision = decided.get(finding["resource_id"])
        action = ""
        if decision is not None and decision["action"] != "notify":
            action = f" ({'would ' if decision['dry_run'] else ''}{p(decision['action'])})"
        print(
            f"    found: {p(_reason_words(finding['reason']))}: {p(finding.get('resource_name') or finding['resource_id'])}{action}"
        )
    for message in result.slack:
        print(f"    Slack, at once: {_title(message)}")


def _reason_words(reason: str) -> str:
    from costguard.model import Reason
    from costguard.notify.titles import TITLES

    try:
        return TITLES.get(Reason(reason), reason)
    except ValueError:
        return reason


def _settings(pairs: list[str]) -> dict[str, str]:
    """``--set NAME=VALUE`` pairs: costguard's own settings only, each validated when a function starts, as in a
    deployed stack. NAME is the variable (``COSTGUARD_REASON_MODES``) or the template parameter that sets it
    (``ReasonModes``)."""
    settings: dict[str, str] = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name:
            raise SystemExit(
                f"costguard: --set takes NAME=VALUE (ReasonModes=gpu_idle=notify, say), not {pair!r}"
            )
        variable = name if name.startswith("COSTGUARD_") else _parameter_variable(name)
        if variable is None:
            raise SystemExit(
                f"costguard: --set {name}: not a costguard setting: give a template parameter that sets one "
                f"(ReasonModes, RemediateScope, GraceMinutes, ...) or its COSTGUARD_ variable"
            )
        settings[variable] = value
    return settings


def _parameter_variable(parameter: str) -> str | None:
    """The COSTGUARD_ variable a template parameter sets (``ReasonModes``: ``COSTGUARD_REASON_MODES``)."""
    template = _template()
    environments = [template.global_environment()] + [
        (r.get("Properties", {}).get("Environment") or {}).get("Variables") or {}
        for r in template.resources.values()
        if r.get("Type") == "AWS::Serverless::Function"
    ]
    for variables in environments:
        for variable, value in variables.items():
            if variable.startswith("COSTGUARD_") and value == {"Ref": parameter}:
                return str(variable)
    return None


def cmd_replay(args: argparse.Namespace) -> int:
    world = _world(args.world, args.now)
    until = latest_event_time(args.events)
    if until is not None and until > world.now + SEED_AHEAD:
        print(
            f"costguard: the latest event ({until:%Y-%m-%dT%H:%M:%SZ}) is more than {SEED_AHEAD.days} days past "
            f"the world's now ({world.now:%Y-%m-%dT%H:%M:%SZ}); metric series are seeded only up to "
            f"{world.now + SEED_AHEAD:%Y-%m-%dT%H:%M:%SZ}",
            file=sys.stderr,
        )
    ok = True
    overrides = _log_level(args) | _settings(args.set or [])
    with LocalStack(world, mode=args.mode, overrides=overrides, until=until) as stack:
        # Each event's result as soon as it has run: a handler that raises does not hide the ones before it.
        for result in replay_each(stack, args.events, args.function):
            if args.json:
                print(json.dumps(result.as_json(), default=str), flush=True)
            else:
                _print_human(result, errors=False)  # said once, on stderr
                sys.stdout.flush()
            if result.error:
                ok = False
                print(f"costguard: {printable(result.error)}", file=sys.stderr)
                if result.trace:
                    print(
                        result.trace if args.verbose else "    (--verbose for the traceback)", file=sys.stderr
                    )
    return 0 if ok else 1


def cmd_demo(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from costguard.local.demo import Batch, batch_heading, demo_events, run_demo

    world = _world(args.world, None)
    out = Path(args.out)
    print(
        f"costguard demo: account {world.account} in {world.region} at {world.now:%Y-%m-%d %H:%M} UTC, "
        f"{len(world.instances)} instances; replaying {len(demo_events())} events in {args.mode} mode, in the "
        "order they would arrive, through a Slack app (threads, buttons)",
        flush=True,
    )
    print("Seeding the embedded AWS with the world (a few seconds)...", flush=True)

    batched: set[int] = set()  # the messages printed under their batch's line, not the closing event's

    # Everything in full (each event, finding, decision, the Slack messages whole) goes to the transcript in
    # the output folder; the terminal gets the short story, or the same full detail with --verbose.
    transcript = io.StringIO()

    def detail(write: Callable[[], None], brief: Callable[[], None]) -> None:
        full = io.StringIO()
        with contextlib.redirect_stdout(full):
            write()
        transcript.write(full.getvalue())
        if args.verbose:
            sys.stdout.write(full.getvalue())
        else:
            brief()
        sys.stdout.flush()

    def told(batch: Batch) -> None:  # what the batching window told, under the events it came from
        batched.update(id(message) for message in batch.messages)

        def full() -> None:
            print(batch_heading(batch))
            for message in batch.messages:
                print(printable(render(message), lines=True))

        def brief() -> None:
            print(f"    Slack, after the batching window: {'; '.join(_title(m) for m in batch.messages)}")

        detail(full, brief)

    def shown(n: int, total: int, result: ReplayResult) -> None:  # each event as soon as it has run
        own = replace(result, slack=[message for message in result.slack if id(message) not in batched])
        detail(lambda: _print_human(own, f"[{n}/{total}] "), lambda: _print_brief(own, f"[{n}/{total}] "))

    # The functions' JSON log lines would land between the Slack messages: kept in a file unless --verbose.
    logs = io.StringIO()
    quiet = contextlib.nullcontext() if args.verbose else contextlib.redirect_stderr(logs)
    with quiet:
        run = run_demo(world, args.mode, overrides=_log_level(args), on_result=shown, on_batch=told)
    with contextlib.redirect_stdout(_Tee(sys.stdout, transcript)):
        code = _demo_ending(args, world, run, out, logs, quiet)
    out.mkdir(parents=True, exist_ok=True)
    (out / "transcript.txt").write_text(transcript.getvalue(), encoding="utf-8")
    print(
        f"Every event, finding, decision and Slack message in full: {(out / 'transcript.txt')}"
        + ("" if args.verbose else " (or run with --verbose)")
    )
    return code


def _print_ledger(mode: str, run: Any) -> None:
    """The demo's savings ledger: what its stops kept off (in notify mode, what remediate's would have)."""
    from costguard.ledger import render

    title = (
        "The savings ledger, what the stops above kept off"
        if mode == "remediate"
        else "The savings ledger in notify mode, what remediate's stops would have kept off"
    )
    print("\n" + render(run.ledger, run.ended, title=title))
    print(
        "  (`costguard ledger --world` for CSV or JSON; against a deployed stack, `costguard ledger --stack`.)"
    )


class _Tee(io.TextIOBase):
    """Writes to each of its streams (the terminal and the demo's transcript)."""

    def __init__(self, *streams: Any) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


def _demo_ending(
    args: argparse.Namespace, world: World, run: Any, out: Path, logs: io.StringIO, quiet: Any
) -> int:
    """The demo's summary, its backtest and its audit, after the events."""
    from costguard.local.demo import count_line

    results = run.results
    head = headline([f for r in results for f in r.findings], [d for r in results for d in r.decisions])
    print(f"\nSummary: {count_line(run)}.")
    print(
        f"The world holds {len(world.instances)} EC2 instances, {len(world.notebooks)} notebooks, "
        f"{len(world.training_jobs)} training jobs and {len(world.endpoints)} endpoints. The events above are "
        "about some of them; the backtest below walks those with GPU series over its period; the audit judges "
        "every running GPU resource (an endpoint once per variant), and lists what it could not judge."
    )
    for line in summary_lines(head):
        print(line)
    from costguard.backtest.command import demo_backtest

    print(
        "\nWhat remediate mode would have done over the world's series (`costguard backtest` for more):",
        flush=True,
    )
    print(demo_backtest(world))
    from costguard.local.audit import print_summary, run_audit, write_outputs

    print(
        "\nThe right-sizing audit (`costguard audit` for its options), running its state machine...",
        flush=True,
    )
    with quiet if args.verbose else contextlib.redirect_stderr(logs):
        audit = run_audit(world, overrides=_log_level(args))
    written = write_outputs(audit, out / "audit")
    print_summary(audit, written)
    _print_ledger(args.mode, run)
    if logged := logs.getvalue():
        log_file = out / "functions.log"
        log_file.parent.mkdir(parents=True, exist_ok=True)
        log_file.write_text(logged, encoding="utf-8")
        print(
            f"\nThe functions logged {len(logged.splitlines())} warning line(s): {log_file} "
            "(--verbose shows their logs as they run)."
        )
    report = out / "audit" / "report.html"
    if report.exists():
        print(f"\nOpen the audit report in a browser: {report.resolve().as_uri()}")
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
    from costguard.ops import account_commands

    if args.print_policy:
        return account_commands.print_live_audit_policy()
    if args.live and args.world:
        print(
            "costguard audit: --live reads the account, --world a world file: give one of them",
            file=sys.stderr,
        )
        return 2
    problem = account_commands.unwritable(Path(args.out))  # before anything runs
    if problem:
        print(f"costguard audit: {problem}", file=sys.stderr)
        return 2
    if args.live:
        return account_commands.cmd_live_audit(args)
    world = _world(args.world, args.now)
    run = run_audit(world, rules_file=args.rules, regions=args.regions, overrides=_log_level(args))
    written = write_outputs(run, Path(args.out))
    if args.json:
        print(json.dumps(run.report if run.report is not None else {"error": run.error}, default=str))
    elif args.csv and run.report is not None:
        from costguard.audit.export import findings_csv

        print(findings_csv(run.report), end="")
    else:
        print_summary(run, written)
    failed = run.report is None or bool(run.report["totals"]["failed_regions"])
    return 1 if failed else 0


def cmd_redrive(args: argparse.Namespace) -> int:
    from costguard.aws import clients
    from costguard.local.aws_errors import REGION_HELP
    from costguard.ops.account_commands import session_region
    from costguard.ops.redrive import redrive_parked, redrive_report
    from costguard.ops.uninstall import DEFAULT_STACK

    source, target = args.dlq_url, args.queue_url
    if bool(source) != bool(target):
        print(
            "costguard redrive: give both --dlq-url and --queue-url, or neither (then --stack)",
            file=sys.stderr,
        )
        return 2
    region = session_region(args.region)
    if not source:
        if region is None:
            print(
                f"costguard redrive: no AWS region is set: give --region, or {REGION_HELP}", file=sys.stderr
            )
            return 2
        stack = args.stack or DEFAULT_STACK
        outputs = {
            o["OutputKey"]: o["OutputValue"]
            for o in clients.client("cloudformation", region).describe_stacks(StackName=stack)["Stacks"][0][
                "Outputs"
            ]
        }
        where = "FailedEventsQueueUrl" if args.parked else "DecisionsDeadLetterQueueUrl"
        source, target = outputs[where], outputs["DecisionsQueueUrl"]
    if args.parked:
        done = redrive_parked(source, target, region=args.region)
        print(f"moved {done.moved} parked notices from the failed-events queue back to the decisions queue")
    else:
        done = redrive_report(source, target, region=args.region)
        print(f"moved {done.moved} notices from the dead-letter queue back to the decisions queue")
    for message_id, why in sorted(done.left.items()):
        print(f"  left {printable(message_id)}: {printable(why)}")
    return 0


def _version() -> str:
    """The installed package's version (pyproject.toml's), or "unknown" when it is run from a bare checkout."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("costguard")
    except PackageNotFoundError:
        return "unknown"


def _replay_arguments(rp: argparse.ArgumentParser) -> None:
    """`costguard replay`'s options."""
    rp.add_argument(
        "events", nargs="+", help="event JSON files (a JSON array: each of its events), or folders of them"
    )
    rp.add_argument("--world", help="world YAML file (default: the demo world)")
    rp.add_argument("--now", type=_time, help="the time to run at (ISO 8601 or epoch), default the world's")
    rp.add_argument("--mode", choices=["notify", "remediate"], default="notify")
    rp.add_argument(
        "--function",
        type=_function,
        metavar="NAME",
        help="run every event through this function (logical id or functions/ directory), not the routing",
    )
    rp.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="a function setting for this run, as a deployed stack's parameter would set it "
        "(ReasonModes=gpu_idle=notify, or its variable COSTGUARD_REASON_MODES=...); repeatable",
    )
    rp.add_argument("--json", action="store_true", help="one JSON object per event")
    rp.add_argument("--verbose", action="store_true", help="the functions' INFO logs on stderr")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="costguard", description=__doc__)
    top.add_argument("--version", action="version", version=f"costguard {_version()}")
    commands = top.add_subparsers(dest="command", required=True)

    rp = commands.add_parser("replay", help="route event files as the deployed rules would and run them")
    _replay_arguments(rp)
    rp.set_defaults(run=cmd_replay)

    dm = commands.add_parser("demo", help="seed the demo world and replay every file in events/")
    dm.add_argument("--world", help="world YAML file (default: the demo world)")
    dm.add_argument("--mode", choices=["notify", "remediate"], default="notify")
    dm.add_argument("--verbose", action="store_true", help="the functions' INFO logs on stderr")
    dm.add_argument(
        "--out", default="costguard-demo", help="folder for the demo's reports (default: ./costguard-demo)"
    )
    dm.set_defaults(run=cmd_demo)

    from costguard.backtest.command import add_arguments as backtest_arguments

    bt = commands.add_parser(
        "backtest", help="what costguard would have caught, stopped and saved over a past period (dry run)"
    )
    backtest_arguments(bt)
    _check_options(bt, _BACKTEST_CHECKS)
    bt.set_defaults(run=cmd_backtest)

    au = commands.add_parser(
        "audit",
        help="the right-sizing audit: its state machine on a world, or --live on an account (read-only); writes "
        "its report",
    )
    au.add_argument("--world", help="world YAML file (default: the demo world)")
    au.add_argument("--now", type=_time, help="the time to audit at (ISO 8601 or epoch), default the world's")
    au.add_argument("--json", action="store_true", help="print the report JSON")
    au.add_argument("--csv", action="store_true", help="print the findings as CSV (and write report.csv)")
    au.add_argument("--out", default="costguard-audit", help="directory for report.json and report.html")
    au.add_argument("--rules", help="JSON file overriding the packaged rules")
    from costguard.ops import account_commands

    account_commands.add_live_audit_arguments(au)  # --regions, --live, --print-policy
    au.add_argument("--verbose", action="store_true", help="the functions' INFO logs on stderr")
    au.set_defaults(run=cmd_audit)
    account_commands.add_doctor_command(commands)

    rd = commands.add_parser(
        "redrive", help="move notices from the dead-letter queue back to the decisions queue"
    )
    rd.add_argument("--stack", help="deployed stack name, whose outputs name the queues (default: costguard)")
    rd.add_argument(
        "--region", help="the stack's region (default: AWS_REGION, AWS_DEFAULT_REGION, the profile's)"
    )
    rd.add_argument("--dlq-url", help="the queue to move from (with --parked: the failed-events queue)")
    rd.add_argument("--queue-url")
    rd.add_argument(
        "--parked",
        action="store_true",
        help="move the notices Slack refused for good (parked in the failed-events queue), once the cause is fixed",
    )
    rd.set_defaults(run=cmd_redrive)

    from costguard.ops import ledger_command, samconfig, uninstall

    samconfig.add_command(commands)  # costguard init
    uninstall.add_command(commands)
    ledger_command.add_command(commands)
    return top


def _powertools_defaults() -> dict[str, str]:
    """The template's literal POWERTOOLS_* variables that the caller's environment does not set.

    Lambda gives a function these before its code runs. costguard.observability creates its logger and metrics
    when first imported, reading them then, and building the parser can already import it (backtest's modules):
    without them a local run's metrics have no namespace and every flush fails."""
    static = _template().global_environment()
    return {
        key: str(value)
        for key, value in static.items()
        if key.startswith("POWERTOOLS_") and not isinstance(value, dict) and key not in os.environ
    }


def main(argv: Sequence[str] | None = None) -> int:
    with patched_environ(_powertools_defaults()):
        args = parser().parse_args(argv)
        try:
            code: int = args.run(args)
        except WorldFileError as error:
            print(f"costguard: bad world file: {error}", file=sys.stderr)
            return 2
        except Exception as error:  # AWS's refusals and missing setup are sentences; anything else a bug
            from costguard.local.aws_errors import explain

            said = explain(error)
            if said is None:
                raise
            print(f"costguard {args.command}: {said}", file=sys.stderr)
            return 2
    return code


if __name__ == "__main__":
    raise SystemExit(main())
