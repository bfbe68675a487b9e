"""What running costguard itself costs a month, from the measured API calls and the published prices.

Every quantity is either measured by this run (bench/fleet.py's call counts, bench/imports.py's cold imports),
read from template.yaml (schedules, memory sizes, alarms) and statemachine/audit.asl.json, or an assumption
named in ASSUMPTIONS; every line of the computation is kept so RESULTS.md can show it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from costguard.local.template import Template

ROOT = Path(__file__).resolve().parents[1]
MONTH_MINUTES = 30 * 24 * 60  # a 30-day month
FLEETS = (100, 1_000)

# us-east-1 public prices, looked up 2026-11-29; free tiers are not subtracted (the figures are an upper bound).
PRICES_AS_OF = "2026-11-29"
PRICES: dict[str, dict[str, Any]] = {
    "lambda_gb_second_arm64": {
        "usd": 0.0000133334,
        "unit": "GB-second (arm64, first 7.5 billion GB-s a month)",
        "source": "https://aws.amazon.com/lambda/pricing/",
    },
    "lambda_request": {
        "usd": 0.20 / 1_000_000,
        "unit": "request ($0.20 per million)",
        "source": "https://aws.amazon.com/lambda/pricing/",
    },
    "sfn_state_transition": {
        "usd": 0.025 / 1000,
        "unit": "standard-workflow state transition ($0.025 per 1,000)",
        "source": "https://aws.amazon.com/step-functions/pricing/",
    },
    "cloudwatch_alarm_metric": {
        "usd": 0.10,
        "unit": "standard-resolution alarm metric a month (a Metrics Insights alarm: per metric its query analyzes)",
        "source": "https://aws.amazon.com/cloudwatch/pricing/",
    },
    "cloudwatch_get_metric_data_metric": {
        "usd": 0.01 / 1000,
        "unit": "metric requested by GetMetricData ($0.01 per 1,000)",
        "source": "https://aws.amazon.com/cloudwatch/pricing/",
    },
    "cloudwatch_api_request": {
        "usd": 0.01 / 1000,
        "unit": "other CloudWatch API request ($0.01 per 1,000)",
        "source": "https://aws.amazon.com/cloudwatch/pricing/",
    },
    "cloudwatch_custom_metric": {
        "usd": 0.30,
        "unit": "custom metric a month (first 10,000)",
        "source": "https://aws.amazon.com/cloudwatch/pricing/",
    },
    "dynamodb_write_request_unit": {
        "usd": 0.625 / 1_000_000,
        "unit": "on-demand write request unit ($0.625 per million)",
        "source": "https://aws.amazon.com/dynamodb/pricing/on-demand/",
    },
    "sqs_request": {
        "usd": 0.40 / 1_000_000,
        "unit": "standard-queue request ($0.40 per million)",
        "source": "https://aws.amazon.com/sqs/pricing/",
    },
    "s3_put_request": {
        "usd": 0.005 / 1000,
        "unit": "S3 Standard PUT request ($0.005 per 1,000)",
        "source": "https://aws.amazon.com/s3/pricing/",
    },
    "s3_get_request": {
        "usd": 0.0004 / 1000,
        "unit": "S3 Standard GET request ($0.0004 per 1,000)",
        "source": "https://aws.amazon.com/s3/pricing/",
    },
}

ASSUMPTIONS: dict[str, float] = {
    "api_latency_seconds": 0.2,  # per AWS call, calls made one after another (in-process answers take ~0)
    "alarms_per_instance_per_day": 1,  # each instance idles once a day: its alarm enters ALARM once
    "state_changes_per_instance_per_day": 2,  # each instance is started and stopped once a day
    "agent_metrics_per_gpu": 2,  # nvidia_smi_utilization_gpu and nvidia_smi_memory_used (the audit reads both)
    "sqs_pollers": 5,  # Lambda's SQS event source starts five long-polling (20 s) pollers
    "cold_start_every_invocation": True,  # scheduled minutes apart: billed init counted on every invocation
    "other_scheduled_seconds": 1.0,  # functions with no GPU fleet to read (SageMaker, ceilings, budgets, capacity)
}


def _rate_minutes(schedule: str) -> float:
    match = re.fullmatch(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)", schedule.strip())
    if not match:
        raise ValueError(f"not a rate() schedule: {schedule!r}")
    count, unit = int(match[1]), match[2].rstrip("s")
    return count * {"minute": 1, "hour": 60, "day": 1440}[unit]


def schedules(template: Template) -> dict[str, float]:
    """Runs a month of every scheduled function or state machine, by logical id and event name."""
    defaults = template.parameter_defaults()
    runs: dict[str, float] = {}
    for logical_id, resource in template.resources.items():
        events = (resource.get("Properties") or {}).get("Events") or {}
        for name, event in events.items():
            if event.get("Type") != "Schedule":
                continue
            schedule = event["Properties"]["Schedule"]
            if isinstance(schedule, dict):
                schedule = defaults[schedule["Ref"]]
            runs[f"{logical_id}.{name}"] = MONTH_MINUTES / _rate_minutes(schedule)
    return runs


def memory_gb(template: Template, logical_id: str) -> float:
    default = template.body["Globals"]["Function"].get("MemorySize", 128)
    props = template.resources[logical_id]["Properties"]
    return float(props.get("MemorySize", default)) / 1024


def ops_alarm_metrics(template: Template) -> int:
    """Metrics the stack's own CloudWatch alarms watch (each MetricStat of a math alarm is one)."""
    count = 0
    for resource in template.resources.values():
        if resource.get("Type") == "AWS::CloudWatch::Alarm":
            props = resource["Properties"]
            count += sum(1 for m in props.get("Metrics", []) if "MetricStat" in m) or 1
    return count


def audit_transitions() -> int:
    """State transitions of one successful audit over one region: each state entered is one."""
    definition = json.loads((ROOT / "statemachine" / "audit.asl.json").read_text())

    def path(states: dict[str, Any], start: str) -> int:
        entered, name = 0, start
        while name:
            state = states[name]
            entered += 1
            inner = state.get("ItemProcessor") or state.get("Iterator")
            if inner:
                entered += path(inner["States"], inner["StartAt"])  # one region
            name = state.get("Next")
        return entered

    return path(definition["States"], definition["StartAt"])


def _api(calls: dict[str, int], prefix: str) -> int:
    return sum(n for k, n in calls.items() if k.startswith(prefix))


def monthly_cost(
    instances: int, fleet: dict[str, Any], imports: dict[str, Any], template: Template
) -> dict[str, Any]:
    """The month's bill for ``instances`` GPU instances, line by line."""
    sweep, reconcile, audit = (fleet[f"{s}_{instances}"] for s in ("sweep", "reconcile", "audit"))
    runs = schedules(template)
    latency = ASSUMPTIONS["api_latency_seconds"]
    init = {name: row["median_ms"] / 1000 for name, row in imports["handlers"].items()}
    gpus = sweep["gpu_series"]
    sweeps = runs["GpuIdleFunction.Sweep"]
    reconciles = runs["GpuAlarmsFunction.Reconcile"]
    audits = runs["AuditStateMachine.Weekly"]
    alarm_events = int(instances * ASSUMPTIONS["alarms_per_instance_per_day"] * 30)
    state_events = int(instances * ASSUMPTIONS["state_changes_per_instance_per_day"] * 30)
    alarm = sweep["one_alarm"]
    lines: list[dict[str, Any]] = []

    def line(item: str, quantity: float, price: str, how: str) -> None:
        usd = quantity * PRICES[price]["usd"]
        lines.append(
            {"item": item, "quantity": round(quantity, 1), "price": price, "usd": round(usd, 2), "how": how}
        )

    def gb(function: str) -> str:
        return f"{memory_gb(template, function):g} GB"

    # Lambda: each invocation billed for its init (measured cold import), its in-process time and its calls.
    def seconds(function: str, wall: float, calls: int) -> float:
        return float(init[function] + wall + calls * latency)

    sweep_s = seconds("GpuIdleFunction", sweep["wall_seconds_in_process"], sweep["api_calls_total"])
    alarm_s = seconds("GpuIdleFunction", 0.0, sum(alarm["api_calls"].values()))
    reconcile_s = seconds(
        "GpuAlarmsFunction", reconcile["wall_seconds_in_process"], reconcile["api_calls_total"]
    )
    state_s = seconds("GpuAlarmsFunction", 0.0, 2)  # DescribeInstances, then PutMetricAlarm or DeleteAlarms
    notice_s = seconds(
        "NotifierFunction", 0.0, 3
    )  # the secret (cached), the Slack POST, the idempotency record
    audit_gb_s = sum(
        memory_gb(template, step) * seconds(step, row["wall_seconds_in_process"], row["api_calls"])
        for step, row in audit["steps"].items()
    ) + memory_gb(template, "AuditPlanFunction") * seconds("AuditPlanFunction", 0.0, 0)
    others = {
        k: v for k, v in runs.items() if k.split(".")[0] not in ("GpuIdleFunction", "GpuAlarmsFunction")
    }
    others.pop("AuditStateMachine.Weekly")
    other_gb_s = sum(
        n
        * memory_gb(template, k.split(".")[0])
        * (init[k.split(".")[0]] + ASSUMPTIONS["other_scheduled_seconds"])
        for k, n in others.items()
    )
    gb_s = (
        sweeps * memory_gb(template, "GpuIdleFunction") * sweep_s
        + alarm_events * memory_gb(template, "GpuIdleFunction") * alarm_s
        + reconciles * memory_gb(template, "GpuAlarmsFunction") * reconcile_s
        + state_events * memory_gb(template, "GpuAlarmsFunction") * state_s
        + alarm_events * memory_gb(template, "NotifierFunction") * notice_s
        + audits * audit_gb_s
        + other_gb_s
    )
    line(
        "Lambda compute",
        gb_s,
        "lambda_gb_second_arm64",
        f"sweep {sweeps:,.0f} x {gb('GpuIdleFunction')} x {sweep_s:.2f} s"
        f" + alarm {alarm_events:,} x {gb('GpuIdleFunction')} x {alarm_s:.2f} s"
        f" + reconcile {reconciles:,.0f} x {gb('GpuAlarmsFunction')} x {reconcile_s:.2f} s"
        f" + state change {state_events:,} x {gb('GpuAlarmsFunction')} x {state_s:.2f} s"
        f" + notice {alarm_events:,} x {gb('NotifierFunction')} x {notice_s:.2f} s"
        f" + audit {audits:.2f} x {audit_gb_s:.1f} GB-s (5 tasks) + other schedules {other_gb_s:,.0f} GB-s",
    )
    invocations = sweeps + reconciles + 2 * alarm_events + state_events + audits * 5 + sum(others.values())
    line(
        "Lambda requests",
        invocations,
        "lambda_request",
        f"{sweeps:,.0f} sweeps + {reconciles:,.0f} reconciles + {alarm_events:,} alarms x 2 (verdict, notice)"
        f" + {state_events:,} state changes + {audits:.2f} audits x 5 tasks + {sum(others.values()):,.0f} other",
    )
    transitions = audit_transitions()
    line(
        "Step Functions",
        audits * transitions,
        "sfn_state_transition",
        f"{audits:.2f} audits x {transitions} transitions (one region)",
    )
    ops = ops_alarm_metrics(template)
    line(
        "CloudWatch alarms",
        gpus + ops,
        "cloudwatch_alarm_metric",
        f"{gpus:,} GPU series under the per-instance Metrics Insights alarms + {ops} metrics of the ops alarms",
    )
    gmd = (
        sweeps * sweep["metrics_requested"]
        + alarm_events * alarm["metrics_requested"]
        + audits * audit["metrics_requested"]
    )
    line(
        "CloudWatch GetMetricData",
        gmd,
        "cloudwatch_get_metric_data_metric",
        f"{sweeps:,.0f} sweeps x {sweep['metrics_requested']:,} metrics + {alarm_events:,} alarms x"
        f" {alarm['metrics_requested']} + {audits:.2f} audits x {audit['metrics_requested']:,}",
    )
    other_cw = (
        sweeps * _api(sweep["api_calls"], "cloudwatch:ListMetrics")
        + alarm_events * _api(alarm["api_calls"], "cloudwatch:ListMetrics")
        + reconciles * _api(reconcile["api_calls"], "cloudwatch:")
        + state_events
        + audits * _api(audit["api_calls"], "cloudwatch:ListMetrics")
    )
    line(
        "CloudWatch other API requests",
        other_cw,
        "cloudwatch_api_request",
        f"ListMetrics {_api(sweep['api_calls'], 'cloudwatch:ListMetrics')} a sweep and 1 an alarm,"
        f" DescribeAlarms {_api(reconcile['api_calls'], 'cloudwatch:')} a reconcile,"
        " one PutMetricAlarm or DeleteAlarms a state change",
    )
    writes = alarm_events * 5 + state_events * 2
    line(
        "DynamoDB",
        writes,
        "dynamodb_write_request_unit",
        f"{alarm_events:,} alarms x 5 (idempotency 2, repeat gate 1, notifier idempotency 2)"
        f" + {state_events:,} state changes x 2 (idempotency)",
    )
    polls = int(ASSUMPTIONS["sqs_pollers"]) * 3 * MONTH_MINUTES  # a 20-second long poll: 3 a minute each
    line(
        "SQS",
        alarm_events * 2 + polls,
        "sqs_request",
        f"{alarm_events:,} notices x 2 (send, delete) + {ASSUMPTIONS['sqs_pollers']:g} pollers x 3 a minute x"
        f" {MONTH_MINUTES:,} minutes",
    )
    line(
        "S3 (audit reports)",
        audits * _api(audit["api_calls"], "s3:PutObject"),
        "s3_put_request",
        f"{audits:.2f} audits x {_api(audit['api_calls'], 's3:PutObject')} PutObject",
    )
    line(
        "S3 reads (audit steps)",
        audits * _api(audit["api_calls"], "s3:GetObject"),
        "s3_get_request",
        f"{audits:.2f} audits x {_api(audit['api_calls'], 's3:GetObject')} GetObject",
    )
    agent = int(gpus * ASSUMPTIONS["agent_metrics_per_gpu"])
    prerequisite = {
        "item": "CloudWatch agent GPU metrics (the fleet's, not costguard's)",
        "quantity": agent,
        "price": "cloudwatch_custom_metric",
        "usd": round(agent * PRICES["cloudwatch_custom_metric"]["usd"], 2),
        "how": f"{gpus:,} GPUs x {ASSUMPTIONS['agent_metrics_per_gpu']:g} metrics",
    }
    return {
        "instances": instances,
        "gpus": gpus,
        "lines": lines,
        "total_usd": round(sum(item["usd"] for item in lines), 2),
        "prerequisite": prerequisite,
    }


def bench_costs(fleet: dict[str, Any], imports: dict[str, Any]) -> dict[str, Any]:
    template = Template.load(ROOT / "template.yaml")
    return {
        "prices_as_of": PRICES_AS_OF,
        "region": "us-east-1",
        "prices": PRICES,
        "assumptions": ASSUMPTIONS,
        "fleets": {str(n): monthly_cost(n, fleet, imports, template) for n in FLEETS},
    }
