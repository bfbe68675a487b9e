"""The commands that read a real account with the default boto3 session's credentials, as `costguard backtest
--live` does: `costguard doctor` and `costguard audit --live`. Read-only: each prints, with --print-policy, the
IAM policy of every action it calls.

Also the checks their options share with the local audit: a region name AWS knows, a writable output folder.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from functools import cache
from pathlib import Path

from costguard import clock
from costguard.local.aws_errors import REGION_HELP


@cache
def known_regions() -> frozenset[str]:
    """Every region of every partition botocore's endpoint data names (no call to AWS)."""
    import botocore.session

    session = botocore.session.get_session()
    return frozenset(
        region
        for partition in session.get_available_partitions()
        for service in ("ec2", "monitoring")
        for region in session.get_available_regions(service, partition)
    )


def regions_option(text: str) -> list[str]:
    """--regions: comma-separated names of regions AWS has."""
    regions = list(dict.fromkeys(r.strip() for r in text.split(",") if r.strip()))
    if not regions:
        raise argparse.ArgumentTypeError("give at least one region, e.g. us-east-1")
    unknown = [r for r in regions if r not in known_regions()]
    if unknown:
        named = ", ".join(repr(r) for r in unknown)
        verb = "is not an AWS region" if len(unknown) == 1 else "are not AWS regions"
        raise argparse.ArgumentTypeError(f"{named} {verb} (regions look like us-east-1 or eu-west-2)")
    return regions


def region_option(text: str) -> str:
    """--region: one region AWS has."""
    if "," in text:
        raise argparse.ArgumentTypeError(f"{text!r}: give one region, no commas")
    return regions_option(text)[0]


def unwritable(out: Path) -> str | None:
    """Why the reports cannot be written to the folder ``out`` (created if missing), or None."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        return f"cannot write the reports to {out}: {error.strerror or error} ({type(error).__name__})"
    if not os.access(out, os.W_OK | os.X_OK):
        return f"cannot write the reports to {out}: permission denied"
    return None


def session_region(given: str | None) -> str | None:
    """The region given, else AWS_REGION, else AWS_DEFAULT_REGION, else the profile's (the SDKs' order: botocore
    itself reads AWS_DEFAULT_REGION only, so AWS_REGION is read here first)."""
    if given:
        return given
    from_environment = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if from_environment:
        return from_environment
    import boto3

    return boto3.session.Session().region_name


def _no_region(command: str) -> int:
    print(f"costguard {command}: no AWS region is set: give --region, or {REGION_HELP}", file=sys.stderr)
    return 2


# -- costguard doctor -------------------------------------------------------------------------------


def cmd_doctor(args: argparse.Namespace) -> int:
    from costguard.ops.doctor import DOCTOR_POLICY, doctor, policy_text, render
    from costguard.settings import SettingsError

    if args.print_policy:
        print(policy_text(DOCTOR_POLICY))
        return 0
    if args.world is not None:
        from costguard.ops.preview import preview_doctor

        return preview_doctor(args)  # this function again, on the world played
    region = session_region(args.region)
    if not region:
        return _no_region("doctor")
    print(
        f"costguard doctor: reading account and stack {args.stack} in {region}...",
        file=sys.stderr,
        flush=True,
    )
    try:
        report = doctor(region, args.stack, clock.now())
    except SettingsError as error:
        print(
            f"costguard doctor: the stack's parameters are not settings costguard takes: {error}",
            file=sys.stderr,
        )
        return 2
    if args.json:
        print(json.dumps(report.as_json(), indent=2, default=str))
    else:
        print(render(report))
    return report.exit_code


def add_doctor_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser(
        "doctor",
        help="check an account and region read-only: GPU metrics, budget alerts, the Slack secret, the alarm "
        "quota, and what a first sweep would find",
    )
    command.set_defaults(run=cmd_doctor)
    command.add_argument("--region", type=region_option, help="the region to check (default: the session's)")
    command.add_argument(
        "--stack",
        default="costguard",
        help="the deployed stack's name (default: costguard, samconfig.toml's)",
    )
    command.add_argument("--json", action="store_true", help="the report as JSON")
    command.add_argument(
        "--print-policy",
        action="store_true",
        help="print the read-only IAM policy the doctor needs, and stop",
    )
    from costguard.ops.preview import add_world_option

    add_world_option(command, "the doctor's report of a world (exit 0 whatever it finds)")


# -- costguard audit --live -------------------------------------------------------------------------


def add_live_audit_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--regions",
        type=regions_option,
        help="comma-separated regions (default: the world's; --live: the session's)",
    )
    command.add_argument(
        "--live",
        action="store_true",
        help="audit the account of the default boto3 session's credentials, read-only (not a world file)",
    )
    command.add_argument(
        "--print-policy", action="store_true", help="print the read-only IAM policy --live needs, and stop"
    )


def cmd_live_audit(args: argparse.Namespace) -> int:
    """The audit of the session's account, read-only; the same report files as the local audit."""
    from costguard.audit.rules import load_rules
    from costguard.local.audit import AuditRun, print_summary, write_outputs
    from costguard.ops.live_audit import run_live_audit
    from costguard.settings import parse_settings

    regions = args.regions or [session_region(None)]
    if not regions[0]:
        return _no_region("audit --live")
    now = args.now or clock.now()

    def progress(text: str) -> None:
        print(f"costguard audit --live: {text}", file=sys.stderr, flush=True)

    done = run_live_audit(regions, now, load_rules(args.rules), parse_settings(), progress)
    run = AuditRun("SUCCEEDED", {}, done.report, done.html)
    written = write_outputs(run, Path(args.out))
    if args.json:
        print(json.dumps(done.report, default=str))
    else:
        print_summary(run, written)
        for kind, name, instance_type in done.silent:
            print(
                f"  no GPU metrics: {kind} {name} ({instance_type}) published no GPU datapoint over the window, so "
                "it is never judged: install the CloudWatch agent with the nvidia_gpu section and "
                "append_dimensions InstanceId (NotebookInstanceName for a notebook); `costguard doctor` checks each"
            )
    return 1 if done.report["totals"]["failed_regions"] else 0


def print_live_audit_policy() -> int:
    from costguard.ops.doctor import policy_text
    from costguard.ops.live_audit import LIVE_AUDIT_POLICY

    print(policy_text(LIVE_AUDIT_POLICY))
    return 0
