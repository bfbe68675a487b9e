"""`costguard doctor --world` and `costguard uninstall --world`: the account command, run on the embedded stack
seeded with a world file instead of on an account. A local preview of what it prints.

The embedded AWS (moto, which LocalStack starts and holds for the whole run: no call reaches AWS) is seeded with
the world, and the stack's first GPU sweep and GPU-idle alarm reconcile run on it (in remediate mode with
GpuAlarms=on, so there are marks and alarms to find). A stand-in CloudFormation stack ``costguard`` then carries
what the commands read of a deployed one: template.yaml's description, its parameter defaults (Mode and GpuAlarms
as played), the outputs that resolve to what the embedded stack made, and its cost-alerts topic subscribed by its
budgets function. Then the command's own function runs on it, and prints what it would print for that account.
``uninstall --world`` is a dry run, always: with ``--yes`` it is refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from costguard.aws import clients, quotas
from costguard.local.demo import EVENTS_DIR
from costguard.local.replay import read_event, replay_event
from costguard.local.responder import Responder
from costguard.local.stack import DEMO_WORLD, TABLE, LocalStack
from costguard.local.template import resolve
from costguard.local.terminal import printable
from costguard.local.world import World, load_world

STACK = (
    "costguard"  # the stand-in's name: the embedded stack's AWS::StackName, and the commands' default --stack
)
# The parameters the stack is played with, over template.yaml's defaults: a sweep in notify mode marks nothing,
# and with GpuAlarms=off no alarm is made; the stand-in stack carries the same values.
PLAYED = {"Mode": "remediate", "GpuAlarms": "on"}
# The stack's first scheduled runs, as events/ has them, retargeted to the world's account, region and now.
FIRST_EVENTS = ("schedule-gpu-sweep-1200.json", "schedule-gpu-alarm-reconcile.json")


class PreviewError(Exception):
    """What stops a preview, in one sentence."""


def add_world_option(command: argparse.ArgumentParser, does: str) -> None:
    """``--world [FILE]`` on an account command's parser: ``does``, a local preview on a world (the demo's when
    no FILE is given)."""
    command.add_argument(
        "--world",
        nargs="?",
        const=str(DEMO_WORLD),
        metavar="FILE",
        help=f"a local preview, not an account: {does}, on the embedded AWS seeded with a world file (default: "
        "the demo world, worlds/demo.yaml) after the stack's first sweep",
    )


# -- the played stack --------------------------------------------------------------------------------------


def first_events(world: World) -> list[tuple[Path, dict[str, Any]]]:
    """FIRST_EVENTS, each from the world's own account and region at its now."""
    events = []
    for name in FIRST_EVENTS:
        path = EVENTS_DIR / name
        event = read_event(path)
        rule = str(event["resources"][0]).rsplit("/", 1)[-1]
        event |= {
            "account": world.account,
            "region": world.region,
            "time": f"{world.now:%Y-%m-%dT%H:%M:%SZ}",
            "resources": [f"arn:aws:events:{world.region}:{world.account}:rule/{rule}"],
        }
        events.append((path, event))
    return events


def stand_in_parameters(stack: LocalStack) -> dict[str, str]:
    """template.yaml's parameter defaults, with PLAYED's values and an organization world's hub parameters."""
    parameters = stack.template.parameter_defaults() | PLAYED
    organization = stack.world.organization
    if organization is not None:
        parameters |= {"OrganizationId": organization.id, "MemberRoleName": organization.role}
    return parameters


def stand_in_outputs(stack: LocalStack, parameters: dict[str, str], topic: str) -> dict[str, str]:
    """template.yaml's outputs that resolve to what the embedded stack made: the state table, the queues, the
    Slack secret, the cost-alerts topic, the functions' names (``costguard-<LogicalId>-preview``)."""
    world, template = stack.world, stack.template
    functions = {logical: function_name(logical) for logical in template.functions()}
    refs = parameters | stack.urls | functions | {"StateTable": TABLE, "CostAlertsTopic": topic}
    refs |= {"AWS::StackName": STACK, "AWS::AccountId": world.account, "AWS::Region": world.region}
    conditions = template.conditions(parameters)
    outputs = {}
    for name, output in template.body.get("Outputs", {}).items():
        if not conditions.get(output.get("Condition", ""), True):
            continue
        try:
            outputs[name] = str(resolve(output["Value"], refs, conditions))
        except (KeyError, ValueError):
            continue  # a resource the embedded stack does not make (the layer, the roles, the audit bucket)
    return outputs


def function_name(logical_id: str) -> str:
    return f"{STACK}-{logical_id}-preview"


def deploy_stand_in(stack: LocalStack) -> None:
    """What `sam deploy` leaves that the commands read, in the embedded CloudFormation: the stack ``costguard``
    (description, parameters, outputs) and its cost-alerts topic, subscribed by its budgets function."""
    world = stack.world
    topic = f"arn:aws:sns:{world.region}:{world.account}:{STACK}-cost-alerts"
    parameters = stand_in_parameters(stack)
    outputs = stand_in_outputs(stack, parameters, topic)
    body = {
        "Description": stack.template.body.get("Description", "costguard"),
        "Parameters": {name: {"Type": "String"} for name in parameters},
        "Resources": {
            "CostAlertsTopic": {
                "Type": "AWS::SNS::Topic",
                "Properties": {"TopicName": f"{STACK}-cost-alerts"},
            }
        },
        "Outputs": {name: {"Value": value} for name, value in outputs.items()},
    }
    clients.client("cloudformation", world.region).create_stack(
        StackName=STACK,
        TemplateBody=json.dumps(body),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
    )
    function = f"arn:aws:lambda:{world.region}:{world.account}:function:{function_name('BudgetsFunction')}"
    clients.client("sns", world.region).subscribe(TopicArn=topic, Protocol="lambda", Endpoint=function)


def answer_quotas(region: str) -> None:
    """moto lists no CloudWatch quota: answered as an account that applied none would be, AWS's default for the
    Metrics Insights alarms being CloudWatch's documented one."""
    default = {
        "ServiceCode": quotas.SERVICE_CODE,
        "QuotaName": quotas.QUOTA_NAME,
        "Value": float(quotas.DOCUMENTED_DEFAULT),
    }
    Responder(
        {
            "ListServiceQuotas": lambda params: {"Quotas": []},
            "ListAWSDefaultServiceQuotas": lambda params: {"Quotas": [default]},
        },
        "https://servicequotas.amazonaws.com",
    ).install(clients.client("service-quotas", region))


@contextmanager
def played(world: World) -> Iterator[LocalStack]:
    """The embedded stack on ``world`` after its first sweep and alarm reconcile, the stand-in stack deployed."""
    overrides = {"COSTGUARD_GPU_ALARMS": PLAYED["GpuAlarms"], "POWERTOOLS_LOG_LEVEL": "WARNING"}
    with LocalStack(world, mode=PLAYED["Mode"], overrides=overrides) as stack:
        for path, event in first_events(world):
            result = replay_event(stack, path, event=event)
            if not result.ok:
                raise PreviewError(f"the stack's {path.name} failed on the world: {result.error}")
        deploy_stand_in(stack)
        for region in world.regions:
            answer_quotas(region)
        yield stack


# -- the commands ------------------------------------------------------------------------------------------


def world_name(given: str) -> str:
    return "the demo world worlds/demo.yaml" if Path(given).resolve() == DEMO_WORLD.resolve() else given


def headline(command: str, given: str, world: World, region: str) -> str:
    """The preview's first line: which world, and that it is no account."""
    played_as = ", ".join(f"{name}={value}" for name, value in PLAYED.items())
    return printable(
        f"costguard {command} --world: a local preview of {world_name(given)} (account {world.account}, {region}, at "
        f"{world.now:%Y-%m-%d %H:%M} UTC) on the embedded AWS, not an account: a stand-in stack {STACK} with "
        f"template.yaml's defaults but {played_as}, after its first GPU sweep and GPU-idle alarm reconcile"
    )


def run_preview(
    args: argparse.Namespace, command: str, run: Callable[[argparse.Namespace], int], head: TextIO
) -> int:
    """``run`` (the command's own function) on the world ``args.world`` names, played; its first line to
    ``head``. A bad world file raises WorldFileError (the command line says so, exit 2)."""
    world = load_world(args.world)
    region = args.region or world.region
    if region not in world.regions:
        print(
            f"costguard {command}: {printable(world_name(args.world))} names {', '.join(world.regions)}, not "
            f"{region}: give one of them as --region, or none",
            file=sys.stderr,
        )
        return 2
    print(headline(command, args.world, world, region), file=head, flush=True)
    print(
        f"costguard {command} --world: seeding the embedded AWS with the world, then the stack's first sweep "
        "(a few seconds)...",
        file=sys.stderr,
        flush=True,
    )
    try:
        with played(world):
            return run(argparse.Namespace(**(vars(args) | {"world": None, "region": region})))
    except PreviewError as error:
        print(f"costguard {command} --world: {printable(error)}", file=sys.stderr)
        return 2


def preview_doctor(args: argparse.Namespace) -> int:
    """`costguard doctor --world`: the doctor's report of the played world (its first line on stderr with
    --json, so that stdout stays JSON). Its exit code is the doctor's: 1 when the world has something to fix, as
    a script checking an account would read it."""
    from costguard.ops.account_commands import cmd_doctor

    return run_preview(args, "doctor", cmd_doctor, sys.stderr if args.json else sys.stdout)


def preview_uninstall(args: argparse.Namespace) -> int:
    """`costguard uninstall --world`: what it would remove from the played world; a dry run, never --yes."""
    if args.yes:
        print(
            "costguard uninstall: --world is a local preview and always a dry run: drop --yes (without --world, "
            "--yes removes from the account of your AWS credentials)",
            file=sys.stderr,
        )
        return 2
    from costguard.ops.uninstall import cmd_uninstall

    return run_preview(args, "uninstall", cmd_uninstall, sys.stdout)
