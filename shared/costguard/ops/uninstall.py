"""`costguard uninstall`: what costguard left in an account and region outside its stack, listed, then removed.

`sam delete` removes the stack's own resources but not what the functions wrote elsewhere: costguard's tags on
instances, training jobs, notebooks and capacity reservations (``costguard:marked-at``, ``costguard:snooze-until``),
the per-instance GPU-idle alarms (``costguard-gpu-idle-*``), and the audit bucket, which the stack retains. This
lists them, and removes them with ``--yes``: never the protect tag unless ``--include-protect`` (it is the
user's), never a snooze unless ``--include-snoozes`` (a person's "keep it until", which a costguard deployed again
would honour), never the audit bucket unless ``--empty-audit-bucket``, and of the ``<stack>-ops-*`` alarms only the
named stack's.

``--yes`` removes nothing while any costguard stack is deployed in the account and region (the named one, or any
other whose description or outputs are costguard's): the GPU-idle alarms and the tags do not say which stack made
them, and a live stack reads the snoozes and marks (a snooze removed under it is a stop its owner had put off).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from costguard.aws import clients
from costguard.aws.alarms import ALARM_PREFIX
from costguard.local.terminal import printable
from costguard.model import MARK_TAG_KEY
from costguard.permissions import needs
from costguard.policy import SNOOZE_TAG_KEY

DEFAULT_STACK = "costguard"
DEFAULT_PROTECT_TAG_KEY = "costguard:protect"
# What a costguard stack is known by when it is not the named one: the description template.yaml and member.yaml
# start with ("costguard: ...", "costguard member: ..."), or one of template.yaml's outputs (which a copy of the
# template with its description changed still has).
COSTGUARD_DESCRIPTION = "costguard"
COSTGUARD_OUTPUTS = frozenset(
    {
        "StateTableName",
        "DecisionsQueueUrl",
        "NotifierFunctionName",
        "GpuIdleFunctionName",
        "GpuAlarmsFunctionName",
    }
)
OPS_INFIX = "-ops-"  # the stack's own alarms: <stack>-ops-<what>, <what> never holding "-ops-"
UNTAG_BATCH = 20  # UntagResources' limit
DELETE_ALARMS_BATCH = 100  # DeleteAlarms' limit
DELETE_ITEMS_BATCH = 25  # BatchWriteItem's limit
DELETE_OBJECTS_BATCH = 1000  # DeleteObjects' limit

# What the person running it needs: the reads of a dry run, and with --yes the removals.
READ_PERMISSIONS = needs(
    "cloudformation:DescribeStacks",
    "tag:GetResources",
    "cloudwatch:DescribeAlarms",
    "dynamodb:Scan",
    "s3:ListAllMyBuckets",
    "s3:GetBucketLocation",
    "s3:ListBucket",
)
REMOVE_PERMISSIONS = needs(
    "tag:UntagResources",
    "ec2:DeleteTags",
    "sagemaker:DeleteTags",
    "cloudwatch:DeleteAlarms",
    "dynamodb:BatchWriteItem",
    "s3:DeleteObject",
    "s3:DeleteBucket",
)
PERMISSIONS = READ_PERMISSIONS | REMOVE_PERMISSIONS


class UninstallError(Exception):
    """What stops `costguard uninstall`, in one sentence."""


@dataclass
class Stack:
    name: str
    exists: bool
    outputs: dict[str, str] = field(default_factory=dict)
    parameters: dict[str, str] = field(default_factory=dict)
    status: str = ""


@dataclass(frozen=True)
class LiveStack:
    """A costguard stack deployed in the region: its functions still mark, snooze and alarm."""

    name: str
    status: str

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"


@dataclass
class Leftovers:
    """What costguard left in one account and region, and what of it this run removes."""

    region: str
    stack: Stack
    tags: dict[str, list[str]] = field(default_factory=dict)  # tag key -> ARNs of the resources carrying it
    kept_tags: dict[str, list[str]] = field(default_factory=dict)  # the protect tag and snoozes, unless asked
    alarms: list[str] = field(default_factory=list)
    kept_alarms: list[str] = field(default_factory=list)  # the stack's own, while it exists
    state_table: str | None = None
    state_items: int = 0
    buckets: dict[str, int] = field(default_factory=dict)  # the audit buckets, with their object counts
    empty_bucket: bool = False
    notes: list[str] = field(default_factory=list)
    live: list[LiveStack] = field(default_factory=list)  # costguard stacks deployed here: --yes refuses

    @property
    def nothing(self) -> bool:
        return not (self.tags or self.alarms or self.state_items or (self.buckets and self.empty_bucket))


# -- finding ---------------------------------------------------------------------------------------------


def describe_stack(name: str, region: str) -> Stack:
    from botocore.exceptions import ClientError

    try:
        [found] = clients.client("cloudformation", region).describe_stacks(StackName=name)["Stacks"]
    except ClientError as error:
        if "does not exist" in str(error.response.get("Error", {}).get("Message", "")):
            return Stack(name, exists=False)
        raise
    return Stack(
        name,
        exists=found.get("StackStatus") != "DELETE_COMPLETE",
        outputs={o["OutputKey"]: o["OutputValue"] for o in found.get("Outputs", [])},
        parameters={p["ParameterKey"]: p.get("ParameterValue", "") for p in found.get("Parameters", [])},
        status=str(found.get("StackStatus", "")),
    )


def is_costguard(stack: dict[str, Any]) -> bool:
    """A DescribeStacks stack deployed from template.yaml or member.yaml (by its description or its outputs)."""
    description = str(stack.get("Description") or "").strip().lower()
    outputs = {o.get("OutputKey") for o in stack.get("Outputs", [])}
    return description.startswith(COSTGUARD_DESCRIPTION) or bool(outputs & COSTGUARD_OUTPUTS)


def live_stacks(region: str, named: Stack) -> list[LiveStack]:
    """The costguard stacks deployed in ``region``: the named one while it exists (whatever its template), and
    every other stack that is costguard's and not DELETE_COMPLETE."""
    found = [LiveStack(named.name, named.status or "exists")] if named.exists else []
    cloudformation = clients.client("cloudformation", region)
    for page in cloudformation.get_paginator("describe_stacks").paginate():
        for stack in page.get("Stacks", []):
            name, status = str(stack.get("StackName", "")), str(stack.get("StackStatus", ""))
            if name != named.name and status != "DELETE_COMPLETE" and is_costguard(stack):
                found.append(LiveStack(name, status))
    return found


def tagged(region: str, key: str) -> list[str]:
    """The ARNs of every resource of the region carrying tag ``key`` (any value), whatever its service."""
    tagging = clients.client("resourcegroupstaggingapi", region)
    found: list[str] = []
    for page in tagging.get_paginator("get_resources").paginate(TagFilters=[{"Key": key}]):
        found += [
            item["ResourceARN"]
            for item in page.get("ResourceTagMappingList", [])
            if any(tag["Key"] == key for tag in item.get("Tags", []))
        ]
    return sorted(found)


def ops_alarms(region: str, stack_name: str) -> list[str]:
    """The named stack's own alarms, ``<stack>-ops-<what>``: not those of a stack whose name only starts like
    them (``costguard-ops-x``'s ``costguard-ops-x-ops-notifier``)."""
    prefix = f"{stack_name}{OPS_INFIX}"
    return [name for name in alarms_under(region, prefix) if OPS_INFIX not in name[len(prefix) :]]


def alarms_under(region: str, prefix: str) -> list[str]:
    cloudwatch = clients.client("cloudwatch", region)
    names: list[str] = []
    pages = cloudwatch.get_paginator("describe_alarms").paginate(
        AlarmNamePrefix=prefix, AlarmTypes=["MetricAlarm", "CompositeAlarm"]
    )
    for page in pages:
        names += [a["AlarmName"] for kind in ("MetricAlarms", "CompositeAlarms") for a in page.get(kind, [])]
    return sorted(names)


def _table_keys(region: str, table: str) -> Iterator[dict[str, Any]]:
    dynamodb = clients.client("dynamodb", region)
    for page in dynamodb.get_paginator("scan").paginate(TableName=table, ProjectionExpression="id"):
        yield from page.get("Items", [])


def _audit_buckets(region: str, stack: Stack, given: str | None) -> list[str]:
    """The stack's audit buckets: as given, from the stack's outputs, else those in ``region`` whose name says
    CloudFormation made them for a stack of this name (``<stack>-auditreportsbucket-<suffix>``, one kept by
    each `sam delete`)."""
    if given:
        return [given]
    if stack.outputs.get("AuditReportsBucketName"):
        return [stack.outputs["AuditReportsBucketName"]]
    prefix = f"{stack.name.lower()}-auditreportsbucket-"
    s3 = clients.client("s3", region)
    named = sorted(b["Name"] for b in s3.list_buckets().get("Buckets", []) if b["Name"].startswith(prefix))
    # us-east-1's buckets have no LocationConstraint.
    return [
        n
        for n in named
        if (s3.get_bucket_location(Bucket=n).get("LocationConstraint") or "us-east-1") == region
    ]


def _objects(region: str, bucket: str) -> Iterator[str]:
    s3 = clients.client("s3", region)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        yield from (item["Key"] for item in page.get("Contents", []))


def find(
    region: str,
    stack_name: str = DEFAULT_STACK,
    *,
    include_protect: bool = False,
    include_snoozes: bool = False,
    protect_tag_key: str | None = None,
    state_table: str | None = None,
    audit_bucket: str | None = None,
    empty_audit_bucket: bool = False,
) -> Leftovers:
    """Everything costguard left in ``region``: reads only."""
    stack = describe_stack(stack_name, region)
    found = Leftovers(region, stack, state_table=state_table, empty_bucket=empty_audit_bucket)
    found.live = live_stacks(region, stack)
    protect = protect_tag_key or stack.parameters.get("ProtectTagKey") or DEFAULT_PROTECT_TAG_KEY
    if arns := tagged(region, MARK_TAG_KEY):
        found.tags[MARK_TAG_KEY] = arns
    if arns := tagged(region, SNOOZE_TAG_KEY):
        (found.tags if include_snoozes else found.kept_tags)[SNOOZE_TAG_KEY] = arns
    if arns := tagged(region, protect):
        (found.tags if include_protect else found.kept_tags)[protect] = arns
    found.alarms = alarms_under(region, ALARM_PREFIX)
    ops = ops_alarms(region, stack_name)
    if stack.exists:
        found.kept_alarms = ops
        found.notes.append(
            f"the stack {stack_name} still exists: its functions mark, snooze and alarm until `sam delete`; "
            "delete it first (README Uninstall)"
        )
    else:
        found.alarms += ops
    if state_table:
        found.state_items = sum(1 for _ in _table_keys(region, state_table))
    elif stack.exists:
        table = stack.outputs.get("StateTableName", "of the stack")
        found.notes.append(f"the state table {table} goes with the stack (`sam delete`)")
    else:
        found.notes.append("the state table went with the stack")
    buckets = _audit_buckets(region, stack, audit_bucket)
    if not buckets and empty_audit_bucket:
        found.notes.append(
            f"no audit bucket named {stack_name.lower()}-auditreportsbucket-* here (--audit-bucket names it)"
        )
    if buckets and empty_audit_bucket and stack.exists:
        raise UninstallError(
            f"the stack {stack_name} still writes to {buckets[0]}: run `sam delete` before --empty-audit-bucket"
        )
    found.buckets = {bucket: sum(1 for _ in _objects(region, bucket)) for bucket in buckets}
    return found


# -- removing -------------------------------------------------------------------------------------------


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def untag(region: str, key: str, arns: Sequence[str]) -> None:
    """That one tag key off each resource (UntagResources names the key: no other tag is touched)."""
    tagging = clients.client("resourcegroupstaggingapi", region)
    for chunk in _chunks(arns, UNTAG_BATCH):
        failed = tagging.untag_resources(ResourceARNList=list(chunk), TagKeys=[key]).get(
            "FailedResourcesMap", {}
        )
        if failed:
            arn, why = next(iter(failed.items()))
            raise UninstallError(
                f"{key} could not be removed from {len(failed)} resources, {arn} first: "
                f"{why.get('ErrorCode', '')} {why.get('ErrorMessage', '')}".strip()
            )


def delete_alarms(region: str, names: Sequence[str]) -> None:
    cloudwatch = clients.client("cloudwatch", region)
    for chunk in _chunks(names, DELETE_ALARMS_BATCH):
        cloudwatch.delete_alarms(AlarmNames=list(chunk))


def delete_items(region: str, table: str) -> int:
    """Every item of the table, by key, 25 a call (unprocessed ones sent again)."""
    dynamodb = clients.client("dynamodb", region)
    keys = list(_table_keys(region, table))
    for chunk in _chunks(keys, DELETE_ITEMS_BATCH):
        requests: dict[str, Any] = {table: [{"DeleteRequest": {"Key": key}} for key in chunk]}
        for _ in range(10):
            requests = dynamodb.batch_write_item(RequestItems=requests).get("UnprocessedItems", {})
            if not requests:
                break
        else:
            raise UninstallError(f"DynamoDB kept refusing to delete items of {table}: run again later")
    return len(keys)


def delete_bucket(region: str, bucket: str) -> None:
    s3 = clients.client("s3", region)
    keys = list(_objects(region, bucket))
    for chunk in _chunks(keys, DELETE_OBJECTS_BATCH):
        errors = s3.delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True}
        ).get("Errors", [])
        if errors:
            raise UninstallError(f"{bucket}: {len(errors)} objects not deleted, {errors[0].get('Key')} first")
    s3.delete_bucket(Bucket=bucket)


def refusal(found: Leftovers) -> str | None:
    """Why ``--yes`` removes nothing here (None: it may remove what is listed)."""
    if not found.live:
        return None
    deletes = "; ".join(f"`sam delete --stack-name {s.name} --region {found.region}`" for s in found.live)
    return (
        f"a costguard stack is deployed in {found.region}: {_stacks(found.live)}; its functions read the snooze and "
        f"mark tags and keep the GPU-idle alarms (which do not say which stack made them), so nothing was changed: "
        f"delete it first ({deletes}), then run again"
    )


def remove(found: Leftovers) -> None:
    """Remove what ``find`` listed for removal; nothing while a costguard stack is deployed (UninstallError)."""
    if (why := refusal(found)) is not None:
        raise UninstallError(why)
    for key, arns in found.tags.items():
        untag(found.region, key, arns)
    delete_alarms(found.region, found.alarms)
    if found.state_table and found.state_items:
        delete_items(found.region, found.state_table)
    if found.empty_bucket:
        for bucket in found.buckets:
            delete_bucket(found.region, bucket)


# -- the command ------------------------------------------------------------------------------------------


def _stacks(live: Sequence[LiveStack]) -> str:
    return ", ".join(str(s) for s in live)


def _short(arn: str) -> str:
    return arn.rsplit("/", 1)[-1] if "/" in arn else arn.rsplit(":", 1)[-1]


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}" if n == 1 else f"{n} {thing}s"


def _some(items: Sequence[str], shown: int = 5) -> str:
    listed = ", ".join(_short(i) for i in items[:shown])
    return listed + (f" and {len(items) - shown} more" if len(items) > shown else "")


def report(found: Leftovers, *, done: bool) -> list[str]:
    verb = "removed" if done else "would remove"
    where = f"stack {found.stack.name} {'exists' if found.stack.exists else 'is gone'}"
    lines = [f"costguard uninstall in {found.region} ({where}){'' if done else ', a dry run'}:"]
    if found.live and not done:
        lines.append(
            f"  --yes removes nothing while a costguard stack is deployed here: {_stacks(found.live)}; "
            "once it is deleted, it would remove:"
        )
    for key, arns in found.tags.items():
        lines.append(f"  {verb} tag {key} from {_count(len(arns), 'resource')}: {_some(arns)}")
    for key, arns in found.kept_tags.items():
        if key == SNOOZE_TAG_KEY:
            lines.append(
                f"  keeps the snooze tag {key} on {_count(len(arns), 'resource')} (a person's decision; "
                "--include-snoozes removes it)"
            )
        else:
            lines.append(
                f"  keeps the protect tag {key} on {_count(len(arns), 'resource')} (--include-protect removes it)"
            )
    if found.alarms:
        lines.append(f"  {verb} {_count(len(found.alarms), 'alarm')}: {_some(found.alarms)}")
    if found.kept_alarms:
        lines.append(f"  leaves the stack's {_count(len(found.kept_alarms), 'alarm')} to `sam delete`")
    if found.state_table:
        lines.append(f"  {verb} {_count(found.state_items, 'item')} of the state table {found.state_table}")
    for bucket, count in found.buckets.items():
        objects = _count(count, "object")
        if found.empty_bucket:
            lines.append(f"  {verb} the audit bucket {bucket} and its {objects}")
        else:
            lines.append(
                f"  keeps the audit bucket {bucket} ({objects}; --empty-audit-bucket empties and deletes it)"
            )
    lines += [f"  note: {note}" for note in found.notes]
    if found.nothing:
        lines.append("  nothing of costguard's to remove here")
    elif found.live and not done:
        lines.append("Nothing was changed: delete the stack first (`sam delete`), then run again with --yes.")
    elif not done:
        lines.append("Nothing was changed: run again with --yes to remove what is listed.")
    return lines


def run(args: argparse.Namespace, out: Callable[[str], None] = print) -> Leftovers:
    from costguard.ops.samconfig import configured_region

    region = args.region or configured_region()
    if not region:
        raise UninstallError("no AWS region is set: give --region, or set AWS_REGION")
    found = find(
        region,
        args.stack,
        include_protect=args.include_protect,
        include_snoozes=args.include_snoozes,
        protect_tag_key=args.protect_tag_key,
        state_table=args.state_table,
        audit_bucket=args.audit_bucket,
        empty_audit_bucket=args.empty_audit_bucket,
    )
    if args.yes and (why := refusal(found)) is not None:
        raise UninstallError(why)  # before anything is removed or printed
    if args.yes and not found.nothing:
        remove(found)
    for line in report(found, done=args.yes and not found.nothing):
        out(printable(line))  # ARNs and alarm names are AWS's, but an alarm may be named anything
    return found


def cmd_uninstall(args: argparse.Namespace) -> int:
    from costguard.local.aws_errors import explain

    if args.world is not None:
        from costguard.ops.preview import preview_uninstall

        return preview_uninstall(args)  # this function again, on the world played; never with --yes
    try:
        run(args)
    except UninstallError as error:
        print(f"costguard uninstall: {printable(error)}", file=sys.stderr)
        return 2
    except Exception as error:
        sentence = explain(error, "give --region, or set AWS_REGION")
        if sentence is None:
            raise  # not AWS's: a bug, shown as one
        print(f"costguard uninstall: {sentence}", file=sys.stderr)
        return 2
    return 0


def add_command(commands: Any) -> None:
    """`costguard uninstall`'s parser, under the command line's subcommands."""
    un = commands.add_parser(
        "uninstall",
        help="list what costguard left in an account and region (tags, alarms, state, audit bucket); "
        "--yes removes it",
    )
    un.add_argument("--stack", default=DEFAULT_STACK, help="the stack's name (default: costguard)")
    un.add_argument("--region", help="default: your AWS configuration's region")
    un.add_argument("--yes", action="store_true", help="remove what is listed (default: a dry run)")
    un.add_argument(
        "--include-protect", action="store_true", help="remove the protect tag too (it is the user's)"
    )
    un.add_argument(
        "--include-snoozes",
        action="store_true",
        help="remove the snooze tag too (a person's keep-until; a costguard deployed again would honour it)",
    )
    un.add_argument("--protect-tag-key", help="default: the stack's ProtectTagKey, else costguard:protect")
    un.add_argument("--state-table", help="a state table that remains: delete its items")
    un.add_argument("--audit-bucket", help="the audit bucket, when it cannot be found by the stack's name")
    un.add_argument(
        "--empty-audit-bucket",
        action="store_true",
        help="empty and delete the audit bucket (its reports are kept otherwise)",
    )
    from costguard.ops.preview import add_world_option

    add_world_option(un, "what it would remove from a world (a dry run: not with --yes)")
    un.set_defaults(run=cmd_uninstall)
