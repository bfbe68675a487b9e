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
"""

from __future__ import annotations

import heapq
import json
import math
import sys
from collections import Counter
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
    """The hub's own clients in memory (state table, queue, Organizations), counting their calls."""

    def __init__(self, calls: Counter[str]) -> None:
        self.calls = calls
        self.items: dict[str, dict[str, Any]] = {}
        self.bodies: list[str] = []

    # dynamodb
    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.calls["dynamodb:BatchGetItem"] += 1
        [(table, request)] = RequestItems.items()
        return {
            "Responses": {
                table: [self.items[k["id"]["S"]] for k in request["Keys"] if k["id"]["S"] in self.items]
            }
        }

    def update_item(self, **kw: Any) -> None:
        self.calls["dynamodb:UpdateItem"] += 1
        key = kw["Key"]["id"]["S"]
        item = self.items.setdefault(key, {"id": {"S": key}})
        verb, attribute, *_, name = kw["UpdateExpression"].split()
        value = kw["ExpressionAttributeValues"][name]
        if verb == "SET":
            item[attribute] = value
            return
        held = set(item.pop(attribute, {}).get("SS", []))
        held = held | set(value["SS"]) if verb == "ADD" else held - set(value["SS"])
        if held:
            item[attribute] = {"SS": sorted(held)}

    # sqs
    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> dict[str, Any]:
        self.calls["sqs:SendMessageBatch"] += 1
        self.bodies += [e["MessageBody"] for e in Entries]
        return {"Successful": [{"Id": e["Id"]} for e in Entries]}

    # organizations
    def get_paginator(self, name: str) -> Counted:
        return self

    def paginate(self, **kw: Any) -> Any:
        accounts = [f"{200000000000 + n:012d}" for n in range(ACCOUNTS)]
        for start in range(0, ACCOUNTS, LIST_ACCOUNTS_PAGE):
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


def simulate(sweep_calls: dict[str, int]) -> dict[str, Any]:
    """The census sweep at noon and the sweep five minutes later, each fanned out and every item run."""
    from costguard.aws import clients, organization

    calls: Counter[str] = Counter()
    hub = Counted(calls)
    real = clients.client, clients.sqs
    clients.client = lambda service, *a, **k: hub
    clients.sqs = lambda *a, **k: hub  # type: ignore[assignment]
    organization.reset()
    try:
        return _simulate(sweep_calls, calls, hub)
    finally:
        clients.client, clients.sqs = real
        organization.reset()


def _simulate(sweep_calls: dict[str, int], calls: Counter[str], hub: Counted) -> dict[str, Any]:
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
        for n in range(0, ACCOUNTS * len(REGIONS), PRESENT_EVERY)
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
        if minutes:  # a second process: the accounts are listed again (a warm one lists them once an hour)
            organization.reset()
        summary = org.fan_out("gpu", event, settings, census=True, interval=timedelta(seconds=SWEEP_SECONDS))
        fan_out_calls = dict(calls)
        durations: list[float] = []
        item_totals: Counter[str] = Counter()
        swept.clear()
        for body in hub.bodies:
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
    runs = simulate(sweep["api_calls"])
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
    figures = bench_org_scale()
    merge(figures)
    print(json.dumps(figures, indent=2))
