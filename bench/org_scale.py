"""Benchmark case: an organization of 1,000 accounts x 17 regions, GPU resources in 5% of its account-regions,
swept end to end by the organization fan-out (flows/org.py): the census hour and the sweeps between censuses.

The hub's real code runs (``fan_out``: Organizations' accounts, the census in the state table, the items sized
to the concurrency cap and queued; each item as ``run_items`` runs it: ``sweep_item``, the census probe, the
census writes); only the clients are in memory and count their calls. What a member account-region's sweep
calls is measured, not assumed: bench/fleet.py's real GPU sweep of a region of ``INSTANCES_PER_REGION`` GPU
instances (its calls counted through boto3). Seventeen thousand items on moto would measure moto.

Time is computed, never measured: each item's calls times the per-call latencies stated in ``LATENCY_SECONDS``,
plus ``ITEM_OVERHEAD_SECONDS``, run on the event source mapping's workers (at most the cap, scaling from 5 by up to
300 more a minute, as AWS documents for SQS event sources) in queue order. ``python bench/org_scale.py`` merges
its figures into bench/results.json under ``organization_scale``.

``dynamodb_keys``: what each key of the hub's state table receives (reads, writes, request units from the item
sizes) at the census, between censuses and over an hour, against DynamoDB's per-partition limits.
"""

from __future__ import annotations

import heapq
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ACCOUNTS = 1_000
REGIONS = (
    "us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1", "sa-east-1", "eu-west-1", "eu-west-2",
    "eu-west-3", "eu-central-1", "eu-north-1", "ap-south-1", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3",
    "ap-southeast-1", "ap-southeast-2",
)  # fmt: skip
PRESENT_EVERY = 20  # one account-region in 20 holds GPU resources: 5%
INSTANCES_PER_REGION = 3  # GPU instances in each such account-region (bench/fleet.py's mixed fleet)
CAP = 50  # SweepConcurrencyCap for this organization
HUB = "111111111111"
NOON = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SWEEP_SECONDS = 300  # the GPU sweep's interval

# Stated per-call latencies (seconds, one call after another within an item), typical of a same-region call
# from Lambda; not measured here.
LATENCY_SECONDS = {
    "sts:AssumeRole": 0.25,
    "ec2:DescribeInstances": 0.25,
    "ec2:DescribeInstanceTypes": 0.20,
    "cloudwatch:GetMetricData": 0.40,
    "cloudwatch:ListMetrics": 0.20,
    "dynamodb": 0.01,  # any DynamoDB call of the hub's state table
    "sqs": 0.02,  # any SQS call of the hub
    "organizations:ListAccounts": 0.30,
}
ITEM_OVERHEAD_SECONDS = 0.10  # the event source's delivery, a warm invocation, the delete
COLD_START_SECONDS = 1.0  # a worker's first item: the handler's cold import and init (bench: cold_imports)
ESM_START, ESM_RAMP_PER_MINUTE = 5, 300  # Lambda's SQS scaling: 5 at first, up to 300 more a minute
LIST_ACCOUNTS_PAGE = 20  # Organizations' ListAccounts page


def latency(call: str) -> float:
    return LATENCY_SECONDS.get(call, LATENCY_SECONDS.get(call.split(":", 1)[0], 0.2))


class Counted:
    """The hub's own clients in memory (state table, queue, Organizations), counting their calls (and, with
    ``keys``, what each key of the state table receives)."""

    def __init__(self, calls: Counter[str], accounts: int = ACCOUNTS, keys: KeyCounts | None = None) -> None:
        self.calls = calls
        self.accounts = accounts
        self.keys = keys
        self.items: dict[str, dict[str, Any]] = {}
        self.bodies: list[str] = []

    # dynamodb
    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.calls["dynamodb:BatchGetItem"] += 1
        [(table, request)] = RequestItems.items()
        ids = [k["id"]["S"] for k in request["Keys"]]
        if self.keys is not None:
            for key in ids:
                self.keys.read(key, item_bytes(self.items.get(key)), request.get("ConsistentRead", False))
        return {"Responses": {table: [self.items[k] for k in ids if k in self.items]}}

    def update_item(self, **kw: Any) -> None:
        self.calls["dynamodb:UpdateItem"] += 1
        key = kw["Key"]["id"]["S"]
        before = self.items.get(key)
        item = updated(before or {"id": {"S": key}}, kw["UpdateExpression"], kw["ExpressionAttributeValues"])
        self.items[key] = item
        if self.keys is not None:
            self.keys.write(key, item_bytes(before), item_bytes(item))

    # sqs
    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> dict[str, Any]:
        self.calls["sqs:SendMessageBatch"] += 1
        self.bodies += [e["MessageBody"] for e in Entries]
        return {"Successful": [{"Id": e["Id"]} for e in Entries]}

    # organizations
    def get_paginator(self, name: str) -> Counted:
        return self

    def paginate(self, **kw: Any) -> Any:
        accounts = [f"{200000000000 + n:012d}" for n in range(self.accounts)]
        for start in range(0, self.accounts, LIST_ACCOUNTS_PAGE):
            self.calls["organizations:ListAccounts"] += 1
            yield {
                "Accounts": [
                    {"Id": a, "Name": f"team-{a[-4:]}", "Status": "ACTIVE"}
                    for a in accounts[start : start + LIST_ACCOUNTS_PAGE]
                ]
            }


def member_sweep_calls() -> dict[str, Any]:
    """bench/fleet.py's real GPU sweep of one region holding INSTANCES_PER_REGION GPU instances: its calls."""
    sys.path.insert(0, str(ROOT))
    from bench.fleet import bench_fleet

    run = bench_fleet(sizes=(INSTANCES_PER_REGION,), scenarios=("sweep",))[f"sweep_{INSTANCES_PER_REGION}"]
    first = {k.replace("monitoring:", "cloudwatch:"): n for k, n in run["api_calls"].items()}
    return {"api_calls": first, "metrics_requested": run["metrics_requested"]}


def simulate(
    sweep_calls: dict[str, int],
    *,
    accounts: int = ACCOUNTS,
    member_keys: dict[str, list[Touch]] | None = None,
    keys: dict[str, KeyCounts] | None = None,
) -> dict[str, Any]:
    """The census sweep at noon and the sweep five minutes later, each fanned out and every item run. With
    ``keys``, what each key of the state table receives in each (``member_keys``: what one member region's sweep
    reads and writes there at each, by ``member_sweep_keys``)."""
    from costguard.aws import clients, organization

    calls: Counter[str] = Counter()
    hub = Counted(calls, accounts)
    real = clients.client, clients.sqs
    clients.client = lambda service, *a, **k: hub
    clients.sqs = lambda *a, **k: hub  # type: ignore[assignment]
    organization.reset()
    try:
        return _simulate(sweep_calls, calls, hub, member_keys or {}, keys)
    finally:
        clients.client, clients.sqs = real
        organization.reset()


def _simulate(
    sweep_calls: dict[str, int],
    calls: Counter[str],
    hub: Counted,
    member_keys: dict[str, list[Touch]],
    keys: dict[str, KeyCounts] | None,
) -> dict[str, Any]:
    from costguard.aws import clients, organization
    from costguard.events.scheduled import ScheduledEvent
    from costguard.flows import org
    from costguard.pipeline import Report
    from costguard.settings import parse_settings

    settings = parse_settings(
        member_role_name="costguard-member",
        regions=",".join(REGIONS),
        state_table="costguard-state",
        sweep_queue_url="https://sqs.us-east-1.amazonaws.com/111111111111/costguard-GpuIdleSweepQueue",
        sweep_concurrency=str(CAP),
    )
    holding = {
        (f"{200000000000 + n // len(REGIONS):012d}", REGIONS[n % len(REGIONS)])
        for n in range(0, hub.accounts * len(REGIONS), PRESENT_EVERY)
    }
    item_calls: Counter[str] = Counter()
    swept: list[str] = []

    def probe(region: str) -> bool:  # presence.gpu_instances: the role's first call, then DescribeInstances
        item_calls["sts:AssumeRole"] += 1
        item_calls["ec2:DescribeInstances"] += 1
        return (clients.acting_account(), region) in holding

    def sweep(item: org.SweepItem, now: datetime) -> Report:
        if not census_now:
            item_calls["sts:AssumeRole"] += 1  # no container reuse assumed: an upper bound
        item_calls.update(sweep_calls)
        swept.append(item.account)
        if hub.keys is not None:  # the member sweep's own items of the state table, in this account-region
            for touch in member_keys.get(label, []):
                hub.keys.touch(touch.of(item.account, item.region))
        return Report()

    runs: dict[str, Any] = {}
    for label, minutes in (("census", 0), ("between_censuses", 5)):
        at = NOON + timedelta(minutes=minutes)
        event = ScheduledEvent.model_validate(
            {
                "version": "0", "id": f"c0ffee00-0000-4000-8000-0000000012{minutes:02d}",
                "detail-type": "Scheduled Event", "source": "aws.events", "account": HUB,
                "time": at.isoformat().replace("+00:00", "Z"), "region": "us-east-1",
                "resources": ["arn:aws:events:us-east-1:111111111111:rule/costguard-gpu-sweep"], "detail": {},
            }
        )  # fmt: skip
        calls.clear()
        hub.bodies.clear()
        if keys is not None:
            hub.keys = keys[label] = KeyCounts()
        if minutes:  # a second process: the accounts are listed again (a warm one lists them once an hour)
            organization.reset()
        summary = org.fan_out("gpu", event, settings, census=True, interval=timedelta(seconds=SWEEP_SECONDS))
        fan_out_calls = dict(calls)
        durations: list[float] = []
        item_totals: Counter[str] = Counter()
        swept.clear()
        for n, body in enumerate(hub.bodies):
            if hub.keys is not None:
                hub.keys.item = n
            work = org.read_work(body)
            census_now = work.census
            calls.clear()
            item_calls.clear()
            census = org.Census(settings.state_table, work.sweep) if work.census else None
            for item, target in zip(work.items(), work.targets, strict=True):
                org.sweep_item(
                    item, None, at, sweep,  # type: ignore[arg-type]
                    probe=probe if work.census else None, census=census, known=target.present,
                )  # fmt: skip
            item_calls.update(calls)
            item_totals.update(item_calls)
            durations.append(ITEM_OVERHEAD_SECONDS + sum(n * latency(c) for c, n in item_calls.items()))
        finish = makespan(durations, CAP)
        runs[label] = {
            "fan_out": summary,
            "fan_out_calls": fan_out_calls,
            "fan_out_seconds": round(sum(n * latency(c) for c, n in fan_out_calls.items()), 2),
            "items": len(durations),
            "targets": summary["targets"],
            "targets_swept": len(swept),
            "item_calls": dict(sorted(item_totals.items())),
            "calls_total": sum(fan_out_calls.values()) + sum(item_totals.values()),
            "work_seconds": round(sum(durations), 1),
            "longest_item_seconds": round(max(durations, default=0.0), 2),
            "finish_seconds_at_cap": round(finish, 1),
            "finish_seconds_at_5": round(makespan(durations, 5), 1),
        }
    runs["present_account_regions"] = len(holding)
    return runs


def makespan(durations: list[float], cap: int) -> float:
    """Items in queue order on at most ``cap`` workers, worker n available once the event source has scaled to
    it (5 at first, then up to 300 more a minute), each worker's first item a cold start."""
    ready = [(max(0.0, (n - ESM_START + 1) / ESM_RAMP_PER_MINUTE * 60), n) for n in range(cap)]
    heapq.heapify(ready)
    started: set[int] = set()
    end = 0.0
    for d in durations:
        at, worker = heapq.heappop(ready)
        done = at + d + (0.0 if worker in started else COLD_START_SECONDS)
        started.add(worker)
        end = max(end, done)
        heapq.heappush(ready, (done, worker))
    return end


# The state table's keys: how the sweeps' reads and writes spread over DynamoDB's partitions. A key's items live in
# one partition, and "each individual partition is limited to 1,000 write units per second and 3,000 read units per
# second" (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/warm-throughput-scenarios.html).
PARTITION_READ_UNITS = 3_000
PARTITION_WRITE_UNITS = 1_000
# Request units (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/read-write-operations.html): a read
# is one unit a 4 KB strongly consistent and half of it eventually consistent, also of an item not found; a write one
# unit a KB of the larger of the item before and after it (PutItem, UpdateItem, each put of a BatchWriteItem). Item
# sizes as DynamoDB counts them: item_bytes.
READ_UNIT_BYTES, WRITE_UNIT_BYTES = 4096, 1024
# What a member region's sweep does in the state table is recorded on bench/fleet.py's region, its instances one in
# IDLE_EVERY idle (the calls' sweep above is all busy) so that a finding is told and the repeat gate's items are
# among the keys; each key is then the same in every GPU account-region, with its account and region (PLACE).
IDLE_EVERY = 3
PLACE = "<account>/<region>"
FAN_OUT = -1  # the work item index of the fan-out's own reads and writes
SWEEPS_AN_HOUR = {"census": 1, "between_censuses": 3600 // SWEEP_SECONDS - 1}
HOT_SHARE = 0.02  # a key every item touches is hot from this share of a partition's limit


def item_bytes(item: dict[str, Any] | None) -> int:
    """An item's size as DynamoDB counts it, its attribute names and values
    (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html); 0: none."""
    return sum(len(name.encode()) + _value_bytes(value) for name, value in (item or {}).items())


def _value_bytes(value: dict[str, Any]) -> int:
    [(kind, held)] = value.items()
    if kind == "S":
        return len(held.encode("utf-8", "surrogatepass"))
    if kind == "N":
        return _number_bytes(held)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "B":
        return len(held)
    if kind == "SS":
        return sum(len(s.encode("utf-8", "surrogatepass")) for s in held)
    if kind == "NS":
        return sum(_number_bytes(n) for n in held)
    if kind == "BS":
        return sum(len(b) for b in held)
    if kind == "L":  # 3 bytes, and 1 an element
        return 3 + sum(1 + _value_bytes(v) for v in held)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + _value_bytes(v) for k, v in held.items())
    raise ValueError(f"not a DynamoDB attribute value: {kind}")


def _number_bytes(text: str) -> int:
    digits = text.lstrip("-").replace(".", "").strip("0")
    return (len(digits) + 1) // 2 + 1  # a byte per two significant digits, and one


_CLAUSE = re.compile(r"\b(SET|ADD|DELETE|REMOVE)\b")


def updated(
    item: dict[str, Any], expression: str, values: dict[str, Any], names: dict[str, str] | None = None
) -> dict[str, Any]:
    """The item after an UpdateItem of the shapes the code writes: ``SET a = :v``, ``ADD a :v`` (a number or a
    set), ``DELETE a :v`` (a set), ``REMOVE a``; a SET's value is its last ``:value``."""
    out = dict(item)
    parts = _CLAUSE.split(expression)
    for verb, body in zip(parts[1::2], parts[2::2], strict=True):
        for action in filter(None, (a.strip() for a in re.split(r",(?![^(]*\))", body))):
            if verb == "REMOVE":
                out.pop((names or {}).get(action, action), None)
                continue
            if verb == "SET":
                name, _, operand = action.partition("=")
                token = re.findall(r":\w+", operand)[-1]
            else:
                name, token = action.split()
            name = (names or {}).get(name.strip(), name.strip())
            value = values[token]
            if verb == "SET":
                out[name] = value
            elif "N" in value:
                out[name] = {"N": str(int(out.get(name, {"N": "0"})["N"]) + int(value["N"]))}
            else:
                [(kind, members)] = value.items()
                held = set(out.get(name, {}).get(kind, []))
                held = held | set(members) if verb == "ADD" else held - set(members)
                out.pop(name, None)
                if held:
                    out[name] = {kind: sorted(held)}
    return out


@dataclass(frozen=True)
class Touch:
    """One read or write of one key: the item's size as read, or (a write) the larger of before and after."""

    key: str
    write: bool
    bytes: int
    consistent: bool = False

    @property
    def units(self) -> float:
        if self.write:
            return float(max(1, math.ceil(self.bytes / WRITE_UNIT_BYTES)))
        return max(1, math.ceil(self.bytes / READ_UNIT_BYTES)) * (1.0 if self.consistent else 0.5)

    def of(self, account: str, region: str) -> Touch:
        """The same in this account-region (a member sweep's, recorded with PLACE)."""
        return Touch(self.key.replace(PLACE, f"{account}/{region}"), self.write, self.bytes, self.consistent)


@dataclass
class Tally:
    """What one key received in a sweep."""

    reads: int = 0
    read_units: float = 0.0
    writes: int = 0
    write_units: float = 0.0
    units_by_item: dict[int, float] = field(default_factory=dict)  # FAN_OUT: the fan-out's
    writes_by_item: Counter[int] = field(default_factory=Counter)

    @property
    def load(self) -> float:
        """Its share of one partition's limits (the larger of reads and writes), were it all in one second."""
        return max(self.read_units / PARTITION_READ_UNITS, self.write_units / PARTITION_WRITE_UNITS)


class KeyCounts:
    """Each key's reads and writes of the state table, and which work item made them (``item``)."""

    def __init__(self) -> None:
        self.keys: dict[str, Tally] = {}
        self.item = FAN_OUT

    def read(self, key: str, size: int, consistent: bool) -> None:
        self.touch(Touch(key, False, size, consistent))

    def write(self, key: str, before: int, after: int) -> None:
        self.touch(Touch(key, True, max(before, after)))

    def touch(self, touch: Touch) -> None:
        tally = self.keys.setdefault(touch.key, Tally())
        units = touch.units
        tally.units_by_item[self.item] = tally.units_by_item.get(self.item, 0.0) + units
        if touch.write:
            tally.writes += 1
            tally.write_units += units
            tally.writes_by_item[self.item] += 1
        else:
            tally.reads += 1
            tally.read_units += units

    @classmethod
    def summed(cls, parts: list[tuple[KeyCounts, int]]) -> KeyCounts:
        """Several sweeps' counts, each ``n`` times (the items are no longer told apart)."""
        out = cls()
        for counts, n in parts:
            for key, t in counts.keys.items():
                into = out.keys.setdefault(key, Tally())
                into.reads += n * t.reads
                into.read_units += n * t.read_units
                into.writes += n * t.writes
                into.write_units += n * t.write_units
        return out


def member_sweep_keys() -> dict[str, list[Touch]]:
    """What one member region's GPU sweep reads and writes in the state table at the census hour (its first sweep)
    and five minutes later: bench/fleet.py's region of INSTANCES_PER_REGION GPU instances (one in IDLE_EVERY idle)
    swept by the real sweep (flows/gpu.evaluate) in a subprocess with the sweep function's environment, as
    bench/fleet.py runs it, every key and item size recorded."""
    sys.path.insert(0, str(ROOT))
    from moto.ec2.models.instance_types import INSTANCE_TYPES  # DescribeInstanceTypes' data, offline

    from bench.fleet import KINDS
    from bench.imports import handler_environment
    from costguard.local.template import Template

    types = json.dumps({t: INSTANCE_TYPES[t] for t in KINDS})
    base = {k: v for k, v in os.environ.items() if not k.startswith(("COSTGUARD_", "POWERTOOLS_"))}
    env = base | handler_environment(Template.load(ROOT / "template.yaml"), "GpuIdleFunction")
    done = subprocess.run(
        [sys.executable, str(Path(__file__)), "member-keys", types],
        env=env | {"POWERTOOLS_LOG_LEVEL": "ERROR"},
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"member sweep keys failed:\n{done.stderr[-3000:]}")
    recorded = json.loads(done.stdout.strip().splitlines()[-1])
    return {label: [Touch(*touch) for touch in touches] for label, touches in recorded.items()}


def _record_member_keys(types: dict[str, Any]) -> dict[str, list[list[Any]]]:
    """(The subprocess of member_sweep_keys.) bench/fleet.py's answers, each state-table call recorded."""
    from bench import fleet
    from costguard.aws import clients, inventory
    from costguard.flows.gpu import evaluate
    from costguard.runtime import runtime

    class Recorded(fleet.FleetAws):
        def __init__(self, bucket: Path) -> None:
            super().__init__(INSTANCES_PER_REGION, bucket, types, idle_every=IDLE_EVERY)
            self.touches: list[Touch] = []
            self.answers |= {
                "UpdateItem": self.update_item,
                "PutItem": self.put_item,
                "DeleteItem": self.delete_item,
                "SendMessageBatch": lambda p: {"Successful": [{"Id": e["Id"]} for e in p["Entries"]]},
            }

        def batch_get_item(self, params: dict[str, Any]) -> dict[str, Any]:
            for request in params["RequestItems"].values():
                for key in request["Keys"]:
                    size = item_bytes(self.items.get(key["id"]["S"]))
                    self.touches.append(
                        Touch(key["id"]["S"], False, size, request.get("ConsistentRead", False))
                    )
            return super().batch_get_item(params)

        def batch_write_item(self, params: dict[str, Any]) -> dict[str, Any]:
            for writes in params["RequestItems"].values():
                for write in writes:
                    self._put(write["PutRequest"]["Item"])
            return {"UnprocessedItems": {}}

        def _put(self, item: dict[str, Any]) -> None:
            key = item["id"]["S"]
            self.touches.append(Touch(key, True, max(item_bytes(self.items.get(key)), item_bytes(item))))
            self.items[key] = item

        def put_item(self, params: dict[str, Any]) -> dict[str, Any]:
            self._put(params["Item"])
            return {}

        def update_item(self, params: dict[str, Any]) -> dict[str, Any]:
            key = params["Key"]["id"]["S"]
            before = self.items.get(key, {"id": {"S": key}})
            values = params.get("ExpressionAttributeValues", {})
            self._put(
                updated(before, params["UpdateExpression"], values, params.get("ExpressionAttributeNames"))
            )
            return {}

        def delete_item(self, params: dict[str, Any]) -> dict[str, Any]:
            key = params["Key"]["id"]["S"]
            self.touches.append(Touch(key, True, item_bytes(self.items.pop(key, None))))
            return {}

    place = f"{fleet.ACCOUNT}/{fleet.REGION}"
    recorded: dict[str, list[list[Any]]] = {}
    with tempfile.TemporaryDirectory() as bucket:
        aws = Recorded(Path(bucket))
        clients.reset()
        inventory.catalog = inventory.AcceleratorCatalog()
        for service in ("ec2", "cloudwatch"):
            aws.install(clients.client(service, fleet.REGION))
        aws.install(clients.client("dynamodb"))
        aws.install(clients.sqs())  # the notices of the idle instance's finding
        for label, minutes in (("census", 0), ("between_censuses", 5)):
            aws.touches.clear()
            evaluate(fleet.REGION, runtime(), NOON + timedelta(minutes=minutes))
            recorded[label] = [
                [t.key.replace(place, PLACE), t.write, t.bytes, t.consistent] for t in aws.touches
            ]
    return recorded


def key_figures(counts: KeyCounts, seconds: float, items: int | None = None) -> dict[str, Any]:
    """What the keys received over ``seconds`` (a sweep's: its finish time at the cap, its ``items`` work items;
    without ``items``: an hour of sweeps)."""
    tallies = counts.keys
    units = {k: t.read_units + t.write_units for k, t in tallies.items()}
    total = sum(units.values())
    busiest = max(tallies, key=lambda k: (tallies[k].load, k))
    top = sorted(units, key=lambda k: -units[k])[:5]
    prefixes: dict[str, list[str]] = {}
    for key in sorted(tallies):
        prefixes.setdefault(key.split("#", 1)[0], []).append(key)
    b = tallies[busiest]
    figures: dict[str, Any] = {
        "keys": len(tallies),
        "reads": sum(t.reads for t in tallies.values()),
        "read_units": round(sum(t.read_units for t in tallies.values()), 1),
        "writes": sum(t.writes for t in tallies.values()),
        "write_units": round(sum(t.write_units for t in tallies.values()), 1),
        "seconds": seconds,
        "busiest_key": {
            "key": busiest,
            "reads": b.reads,
            "read_units": b.read_units,
            "writes": b.writes,
            "write_units": b.write_units,
            "read_units_per_second": round(b.read_units / seconds, 3),
            "write_units_per_second": round(b.write_units / seconds, 3),
            "share_of_partition_limit": _share(b.load / seconds),
        },
        "top5_keys": top,
        "top5_share_of_units": round(sum(units[k] for k in top) / total, 4),
        "by_prefix": {
            prefix: {
                "keys": len(named),
                "read_units": round(sum(tallies[k].read_units for k in named), 1),
                "write_units": round(sum(tallies[k].write_units for k in named), 1),
                "share_of_units": round(sum(units[k] for k in named) / total, 4),
            }
            for prefix, named in prefixes.items()
        },
    }
    if items is None:
        return figures
    # Keys more than one work item touches (or the fan-out): the only ones a sweep's items share.
    shared = {k: t for k, t in tallies.items() if len(t.units_by_item) > 1 or FAN_OUT in t.units_by_item}
    widest = max(tallies, key=lambda k: (len(tallies[k].units_by_item.keys() - {FAN_OUT}), k))
    every = [k for k, t in tallies.items() if len(t.units_by_item.keys() - {FAN_OUT}) >= items]
    burst = max(tallies, key=lambda k: (max(tallies[k].units_by_item.values()), k))
    return figures | {
        "work_items": items,
        "shared_keys": {
            "keys": len(shared),
            "prefix": _common_prefix(list(shared)),
            "read_units": round(sum(t.read_units for t in shared.values()), 1),
            "write_units": round(sum(t.write_units for t in shared.values()), 1),
            "share_of_units": round(sum(units[k] for k in shared) / total, 4),
        },
        "widest_key": {
            "key": widest,
            "work_items": len(tallies[widest].units_by_item.keys() - {FAN_OUT}),
            "share_of_work_items": round(len(tallies[widest].units_by_item.keys() - {FAN_OUT}) / items, 4),
        },
        "keys_every_item_touches": every,
        "most_writes_to_one_key_by_one_item": max(
            (n for t in tallies.values() for n in t.writes_by_item.values()), default=0
        ),
        "most_units_to_one_key_by_one_item": {
            "key": burst,
            "units": max(tallies[burst].units_by_item.values()),
        },
    }


def _share(x: float) -> float:
    return float(f"{x:.3g}")


def _common_prefix(keys: list[str]) -> str:
    first, last = min(keys, default=""), max(keys, default="")
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    return first[:n]


def stop_counter(runs: dict[str, Any]) -> dict[str, Any]:
    """The one item any stop in the organization touches, the hour's stop counter (act/limits.py: ``stops#<hour>``),
    were every swept account-region to decide a stop in the sweep between censuses: computed, not simulated (the
    deployed default is notify mode, which stops nothing). Each worker process tries its one conditional UpdateItem
    until the hour is full (a refused one is still a write), then reads the counter (a consistent GetItem) once an
    item; the item is under 1 KB: one unit each."""
    from costguard.settings import Settings

    per_hour = int(Settings.model_fields["max_stops_per_hour"].default)
    run = runs["between_censuses"]
    seconds = run["finish_seconds_at_cap"]
    reads = run["targets_swept"]
    writes = min(reads, per_hour + min(CAP, run["items"]))
    return {
        "key": "stops#<hour>",
        "writes_at_most": writes,
        "reads_at_most": reads,
        "write_units_per_second": round(writes / seconds, 2),
        "read_units_per_second": round(reads / seconds, 2),
        "share_of_partition_limit": _share(
            max(writes / seconds / PARTITION_WRITE_UNITS, reads / seconds / PARTITION_READ_UNITS)
        ),
    }


def dynamodb_keys(runs: dict[str, Any], keys: dict[str, KeyCounts]) -> dict[str, Any]:
    """The state table's keys at the census, between censuses and over a steady hour (one census and eleven
    sweeps between), and whether any takes more than its share of a partition."""
    sweeps = {
        label: key_figures(keys[label], runs[label]["finish_seconds_at_cap"], runs[label]["items"])
        for label in SWEEPS_AN_HOUR
    }
    hour = key_figures(KeyCounts.summed([(keys[k], n) for k, n in SWEEPS_AN_HOUR.items()]), 3600.0)
    hot = []
    for label, figures in sweeps.items():
        for key in figures["keys_every_item_touches"]:
            share = keys[label].keys[key].load / figures["seconds"]
            if share > HOT_SHARE:
                hot.append({"sweep": label, "key": key, "share_of_partition_limit": _share(share)})
    return {
        "how": (
            "every read and write of the state table counted by key, measured: the hub's (fan-out, census probes) "
            "as the simulation runs its real code, each swept account-region's as recorded on one member region's "
            f"real sweep (bench/fleet.py's, {INSTANCES_PER_REGION} GPU instances, one in {IDLE_EVERY} idle) with "
            "its own account and region; the census is the first (an empty table: every present account-region is "
            "written, as each region's first read schedule is); units from the sizes of the items as written; per "
            "second over the sweep's finish time at the cap (computed), an hour's over the hour"
        ),
        "partition_limits_per_second": {
            "read_units": PARTITION_READ_UNITS,
            "write_units": PARTITION_WRITE_UNITS,
        },
        "census": sweeps["census"],
        "between_censuses": sweeps["between_censuses"],
        "steady_hour": hour,
        "stop_counter_if_every_swept_item_stops": stop_counter(runs),
        "hot_keys": hot,
    }


def monthly(runs: dict[str, Any], sweep: dict[str, Any]) -> dict[str, Any]:
    """The GPU sweep's organization bill a month: an hour is one census and eleven sweeps between censuses."""
    from bench.costs import MONTH_HOURS, PRICES, memory_gb
    from costguard.local.template import Template

    template = Template.load(ROOT / "template.yaml")
    gb = memory_gb(template, "GpuIdleFunction")
    per_hour = {"census": 1, "between_censuses": SWEEP_SECONDS and 3600 // SWEEP_SECONDS - 1}
    lines: dict[str, dict[str, Any]] = {}

    def line(name: str, quantity: float, price: str, how: str) -> None:
        usd = quantity * PRICES[price]["usd"]
        lines[name] = {
            "quantity": round(quantity),
            "unit_usd": PRICES[price]["usd"],
            "usd": round(usd, 2),
            "how": how,
        }

    hours = MONTH_HOURS
    invocations = sum(per_hour[k] * (runs[k]["items"] + 1) for k in per_hour) * hours
    line("Lambda requests", invocations, "lambda_request", "(items + the fan-out) a sweep, 12 sweeps an hour")
    seconds = (
        sum(per_hour[k] * (runs[k]["work_seconds"] + runs[k]["fan_out_seconds"]) for k in per_hour) * hours
    )
    cold = sum(per_hour[k] * min(CAP, runs[k]["items"]) for k in per_hour) * hours * COLD_START_SECONDS
    line(
        "Lambda compute",
        (seconds + cold) * gb,
        "lambda_gb_second_arm64",
        f"computed seconds of every item and fan-out + a cold start a worker a sweep, x {gb} GB (waiting on AWS "
        "is billed time)",
    )
    sqs = (
        sum(
            per_hour[k] * (runs[k]["fan_out_calls"].get("sqs:SendMessageBatch", 0) + 2 * runs[k]["items"])
            for k in per_hour
        )
        * hours
    )
    line(
        "SQS requests",
        sqs,
        "sqs_request",
        "SendMessageBatch + a receive and a delete an item (idle polls: the fleet bill)",
    )
    # Priced from the read schedule (bench/results.json read_schedule), as the fleet bill is: reads an
    # instance-hour of the instance's GPU series, plus the evidence metrics.
    schedule = read_schedule()
    instances = runs["present_account_regions"] * INSTANCES_PER_REGION
    gpus = sweep["metrics_requested"] / INSTANCES_PER_REGION  # the first sweep reads every GPU series once
    per_instance_hour = (
        schedule["reads_per_instance_hour"] * gpus + schedule["evidence_metrics_per_instance_hour"]
    )
    line(
        "CloudWatch GetMetricData (member accounts)",
        instances * hours * per_instance_hour,
        "cloudwatch_get_metric_data_metric",
        f"{instances:,} GPU instances x {per_instance_hour:.2f} metrics an instance-hour (read schedule: "
        f"{schedule['reads_per_instance_hour']} reads of {gpus:.2f} GPU series + "
        f"{schedule['evidence_metrics_per_instance_hour']} evidence); every instance at every sweep would be "
        f"{12 * gpus:.1f}",
    )
    list_metrics = (
        sum(per_hour[k] * runs[k]["item_calls"].get("cloudwatch:ListMetrics", 0) for k in per_hour) * hours
    )
    line("CloudWatch ListMetrics", list_metrics, "cloudwatch_api_request", "as counted")
    writes = (
        sum(
            per_hour[k]
            * (
                runs[k]["item_calls"].get("dynamodb:UpdateItem", 0)
                + runs[k]["fan_out_calls"].get("dynamodb:UpdateItem", 0)
                + runs[k]["item_calls"].get("dynamodb:BatchWriteItem", 0)
            )
            for k in per_hour
        )
        * hours
    )
    line(
        "DynamoDB writes",
        writes,
        "dynamodb_write_request_unit",
        "census writes (on change only) and the sweeps' own, 1 WRU each",
    )
    census_kb = runs["present_account_regions"] * 28 / 1024
    reads = (
        sum(
            per_hour[k]
            * (math.ceil(census_kb / 4) + 9 + runs[k]["item_calls"].get("dynamodb:BatchGetItem", 0))
            for k in per_hour
        )
        * hours
    )
    line(
        "DynamoDB reads",
        reads,
        "dynamodb_read_request_unit",
        f"the census ({census_kb:.0f} KB over 9 items, consistent) a sweep + the sweeps' own",
    )
    line("CloudWatch ops alarms", 4, "cloudwatch_alarm_metric", "the four sweeps' age-of-oldest-item alarms")
    return {"lines": lines, "usd": round(sum(v["usd"] for v in lines.values()), 2)}


def read_schedule() -> dict[str, float]:
    results = ROOT / "bench" / "results.json"
    found = json.loads(results.read_text()).get("read_schedule") if results.exists() else None
    if found:
        return {k: found[k] for k in ("reads_per_instance_hour", "evidence_metrics_per_instance_hour")}
    return {"reads_per_instance_hour": 12.0, "evidence_metrics_per_instance_hour": 0.0}  # every sweep reads


def bench_org_scale() -> dict[str, Any]:
    sweep = member_sweep_calls()
    keys: dict[str, KeyCounts] = {}
    runs = simulate(sweep["api_calls"], member_keys=member_sweep_keys(), keys=keys)
    return {
        "organization": {
            "accounts": ACCOUNTS,
            "regions": len(REGIONS),
            "account_regions": ACCOUNTS * len(REGIONS),
            "with_gpu_resources": runs["present_account_regions"],
            "gpu_instances_each": INSTANCES_PER_REGION,
        },
        "sweep_concurrency_cap": CAP,
        "sweep_interval_seconds": SWEEP_SECONDS,
        "latency_seconds": LATENCY_SECONDS,
        "item_overhead_seconds": ITEM_OVERHEAD_SECONDS,
        "cold_start_seconds": COLD_START_SECONDS,
        "member_region_sweep": sweep,
        "census": runs["census"],
        "between_censuses": runs["between_censuses"],
        "monthly_cost_gpu_sweep": monthly(runs, sweep),
        "dynamodb_keys": dynamodb_keys(runs, keys),
        "before": {
            "items": ACCOUNTS * len(REGIONS),
            "finish_seconds_at_5": round(ACCOUNTS * len(REGIONS) * 2.0 / 5, 0),
            "how": "one item per account-region every sweep at the former concurrency of 5, 2 s an item",
        },
    }


def merge(figures: dict[str, Any], path: Path = ROOT / "bench" / "results.json") -> None:
    results = json.loads(path.read_text()) if path.exists() else {}
    results["organization_scale"] = figures | {"measured_at": datetime.now(UTC).isoformat(timespec="seconds")}
    path.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    if sys.argv[1:2] == ["member-keys"]:  # member_sweep_keys's subprocess
        print(json.dumps(_record_member_keys(json.loads(sys.argv[2]))))
        sys.exit()
    figures = bench_org_scale()
    merge(figures)
    print(json.dumps(figures, indent=2))
