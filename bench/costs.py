"""What running costguard itself costs a month, from the measured API calls and the published prices.

The fleet is bench/fleet.py's mixed one (1, 4 and 8 NVIDIA GPUs an instance in equal thirds: 4.33 on average),
running all month, with findings: each instance has an episode (an idle night, say) at the rate and length named
in ASSUMPTIONS, and each episode costs its writes (DynamoDB only when something changes, SQS only for news) and
its notices. The per-instance GPU-idle alarms are an option (``GpuAlarms``, off by default): the bill is worked
out for the default and again with them on.

The sweep's GetMetricData is priced from the read schedule: reads per instance-hour, GPU metrics per read and
the evidence metrics (CPU, network) per instance-hour, as bench/results.json's ``read_schedule`` gives them.
Without one, every instance is read at every 5-minute sweep (12 reads an instance-hour), and the output says so.

Every other quantity is either measured by this run (bench/fleet.py's call counts and durations,
bench/imports.py's cold imports), read from template.yaml (schedules and whether they are enabled, memory sizes,
alarms, SQS event sources) and statemachine/audit.asl.json, or an assumption named in ASSUMPTIONS; every line
keeps its quantity, unit price, source and how it was computed, so RESULTS.md can show it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from costguard.local.template import Template

ROOT = Path(__file__).resolve().parents[1]

MONTH_MINUTES = 30 * 24 * 60  # a 30-day month
MONTH_HOURS = MONTH_MINUTES // 60
MONTH_DAYS = 30
SWEEPS_AN_HOUR = 12  # the GPU sweep runs every 5 minutes
FLEETS = (100, 1_000, 10_000)
# CloudWatch's default quota of Metrics Insights alarms per account and region (Service Quotas, adjustable).
METRICS_INSIGHTS_ALARM_QUOTA = 200
QUERIES_PER_GET_METRIC_DATA = 500
ALARMS_OPTION = "GpuAlarms"

# us-east-1 public prices, looked up 2026-11-29; free tiers are not subtracted (the figures are an upper bound).
PRICES_AS_OF = "2026-11-29"
_LAMBDA = "https://aws.amazon.com/lambda/pricing/"
_CLOUDWATCH = "https://aws.amazon.com/cloudwatch/pricing/"
_DYNAMODB = "https://aws.amazon.com/dynamodb/pricing/on-demand/"
PRICES: dict[str, dict[str, Any]] = {
    "lambda_gb_second_arm64": {
        "usd": 0.0000133334,
        "unit": "GB-second (arm64, first 7.5 billion GB-s a month)",
        "source": _LAMBDA,
    },
    "lambda_request": {"usd": 0.20 / 1_000_000, "unit": "request ($0.20 per million)", "source": _LAMBDA},
    "sfn_state_transition": {
        "usd": 0.025 / 1000,
        "unit": "standard-workflow state transition ($0.025 per 1,000)",
        "source": "https://aws.amazon.com/step-functions/pricing/",
    },
    "cloudwatch_alarm_metric": {
        "usd": 0.10,
        "unit": "standard-resolution alarm metric a month (a Metrics Insights alarm: per metric its query analyzes)",
        "source": _CLOUDWATCH,
    },
    "cloudwatch_get_metric_data_metric": {
        "usd": 0.01 / 1000,
        "unit": "metric requested by GetMetricData ($0.01 per 1,000)",
        "source": _CLOUDWATCH,
    },
    "cloudwatch_api_request": {
        "usd": 0.01 / 1000,
        "unit": "other CloudWatch API request ($0.01 per 1,000)",
        "source": _CLOUDWATCH,
    },
    "cloudwatch_dashboard": {
        "usd": 3.00,
        "unit": "dashboard a month (beyond the account's first three)",
        "source": _CLOUDWATCH,
    },
    "cloudwatch_custom_metric": {
        "usd": 0.30,
        "unit": "custom metric a month (first 10,000)",
        "source": _CLOUDWATCH,
    },
    "cloudwatch_logs_ingestion_gb": {
        "usd": 0.50,
        "unit": "GB of logs ingested (standard class)",
        "source": _CLOUDWATCH,
    },
    "dynamodb_write_request_unit": {
        "usd": 0.625 / 1_000_000,
        "unit": "on-demand write request unit ($0.625 per million)",
        "source": _DYNAMODB,
    },
    "dynamodb_read_request_unit": {
        "usd": 0.125 / 1_000_000,
        "unit": "on-demand read request unit ($0.125 per million)",
        "source": _DYNAMODB,
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
    "xray_trace_recorded": {
        "usd": 5.00 / 1_000_000,
        "unit": "X-Ray trace recorded ($5.00 per million)",
        "source": "https://aws.amazon.com/xray/pricing/",
    },
    "secrets_manager_secret": {
        "usd": 0.40,
        "unit": "secret a month",
        "source": "https://aws.amazon.com/secrets-manager/pricing/",
    },
    "secrets_manager_api_call": {
        "usd": 0.05 / 10_000,
        "unit": "API call ($0.05 per 10,000)",
        "source": "https://aws.amazon.com/secrets-manager/pricing/",
    },
}

ASSUMPTIONS: dict[str, float | bool] = {
    "api_latency_seconds": 0.2,  # per AWS call, calls made one after another (in-process answers take ~0)
    "cold_start_every_invocation": True,  # scheduled minutes apart: billed init counted on every invocation
    # Findings: each instance has this many episodes a day (an idle night, a stalled job), each this long.
    "episodes_per_instance_per_day": 1,
    "episode_hours": 2,
    # Written only when something changes: opened, marked, stopped (or busy again), ended; 1 WRU each (< 1 KB).
    "dynamodb_writes_per_episode": 4,
    # Queued only for news: the finding, then what followed (the mark, the stop) as one more.
    "notices_per_episode": 2,
    # The sweep's calls for an episode: mark tag, stop-protection read, stop, its writes and its SQS send.
    "sweep_calls_per_episode": 9,
    "notifier_calls_per_notice": 3,  # the secret (cached), the Slack POST, the idempotency record
    "notifier_writes_per_notice": 2,  # powertools idempotency: in progress, then completed
    "sqs_requests_per_notice": 3,  # send, receive (one a notice: batching only lowers it), delete
    "idempotency_writes_per_event": 2,  # OncePerEvent on an alarm event: in progress, then completed
    "start_stop_cycles_per_instance_per_day": 1,  # each gives 3 state changes the rule takes
    "alarms_per_instance_per_day": 1,  # GpuAlarms on: each instance's alarm enters ALARM once a day
    "agent_metrics_per_gpu": 2,  # nvidia_smi_utilization_gpu and nvidia_smi_memory_used (the audit reads both)
    "sqs_pollers_per_source": 5,  # Lambda's SQS event source keeps five long-polling (20 s) pollers
    "other_scheduled_seconds": 1.0,  # functions with no GPU fleet to read (SageMaker, ceilings, budgets, capacity)
    "log_kb_per_invocation": 4,  # START/END/REPORT, structured logs and EMF metrics of one invocation
    "emf_metrics_published": 3,  # custom metrics an ordinary month publishes (NoticesDelivered and the like)
    # The read schedule's entries (aws/read_plan.py): spread over this many items per account and region, each
    # entry this many bytes; every sweep reads every item (strongly consistent, an upper bound) and writes back
    # the items with an entry changed (each read may change its instance's entry: an upper bound).
    "read_schedule_shards": 64,
    "read_schedule_entry_bytes": 60,
    # Evidence records (act/arming.py, act/marks.py): this share of the fleet carries an arming tag (a ceiling, an
    # opt-in), each such resource new every day (an upper bound: its record written once a day); every sweep of
    # an armable kind takes one census (UpdateItem) and reads every armed resource's record (consistent, 1 RRU:
    # an upper bound, each reads only its own kind's).
    "armed_share": 0.1,
    # A live mark's record: written with the mark tag, deleted with the unmark or the stop.
    "mark_record_writes_per_episode": 2,
    # EC2's own CPU, NetworkIn and NetworkOut (flows/gpu.py with_host_evidence), read for an idle instance only at
    # the sweeps that may mark or stop it: the first idle reading (which reads its CPU for the message anyway: two
    # more) and the stop (three). An upper bound: every episode marked and stopped.
    "host_evidence_metrics_per_episode": 5,
    # job_hung (flows/training_ceilings.py hang_findings): the fleet runs this many in-progress training jobs per
    # GPU instance, on this many hosts each. At this share of the training sweeps a job's own metrics are quiet (it
    # defines none, or pauses longer than its silence): its streams are listed and searched (DescribeLogStreams and
    # FilterLogEvents, one each); at this share its logs are silent too: its hosts' GPUs read (one metric a host)
    # and their newest events (GetLogEvents, one a host). CloudWatch Logs' reads are priced as CloudWatch's other
    # API requests: an upper bound.
    "training_jobs_per_instance": 0.1,
    "hosts_per_training_job": 2,
    "hang_quiet_share": 0.1,
    "hang_silent_share": 0.005,
    # The savings ledger (act/ledger_book.py): an upper bound, every episode ends in a stop made (or, in notify
    # mode, kept) and the resource's return. A stop writes its open marker, its entry (and the entry's copy in the
    # ledger index) and the teams' set; a return reads the marker (consistent), updates the entry (and its index
    # copy) and deletes the marker.
    "ledger_writes_per_stop": 4,
    "ledger_writes_per_return": 3,
    "ledger_reads_per_return": 1,
    # The ledger's daily report (flows/ledger_report.py): one Query per team over the last 35 days, each entry
    # about this many bytes as the index returns it; its six metric series (three figures x two modes) are
    # written once a day, and CloudWatch prorates a custom metric by the hours it is sent in.
    "ledger_report_days": 35,
    "ledger_entry_bytes": 600,
    "ledger_report_teams": 10,
    "ledger_metric_series": 6,
    # Returns seen by the SageMaker and EKS sweeps (every 15 minutes): each InService GPU notebook and each EKS
    # workload with GPU pods has its open marker read (consistent, one BatchGetItem per 100), whether or not
    # costguard stopped it; counted as this share of the fleet.
    "ledger_return_watched_share": 0.05,
}

# Every instance read at every sweep: what the sweep did before the read schedule.
NO_SCHEDULE_READS_PER_INSTANCE_HOUR = float(SWEEPS_AN_HOUR)


def _rate_minutes(schedule: str) -> float:
    """The minutes between two runs of a rate() schedule, or of a daily cron() (a fixed minute and hour)."""
    if re.fullmatch(r"cron\(\d{1,2} \d{1,2} \* \* \? \*\)", schedule.strip()):
        return 1440.0
    match = re.fullmatch(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)", schedule.strip())
    if not match:
        raise ValueError(f"not a rate() or daily cron() schedule: {schedule!r}")
    count, unit = int(match[1]), match[2].rstrip("s")
    return count * {"minute": 1, "hour": 60, "day": 1440}[unit]


def _enabled(state: Any, conditions: Mapping[str, bool]) -> bool:
    """A rule's State: absent or ENABLED, or ``!If [condition, ENABLED, DISABLED]`` under ``conditions``."""
    if isinstance(state, dict) and "Fn::If" in state:
        name, when_true, when_false = state["Fn::If"]
        state = when_true if conditions[name] else when_false
    return state in (None, "ENABLED")


def schedules(template: Template, conditions: Mapping[str, bool] | None = None) -> dict[str, float]:
    """Runs a month of every enabled scheduled function or state machine, by logical id and event name."""
    conditions = template.conditions() if conditions is None else conditions
    defaults = template.parameter_defaults()
    runs: dict[str, float] = {}
    for logical_id, resource in template.resources.items():
        events = (resource.get("Properties") or {}).get("Events") or {}
        for name, event in events.items():
            if event.get("Type") != "Schedule" or not _enabled(event["Properties"].get("State"), conditions):
                continue
            schedule = event["Properties"]["Schedule"]
            if isinstance(schedule, dict):
                schedule = defaults[schedule["Ref"]]
            runs[f"{logical_id}.{name}"] = MONTH_MINUTES / _rate_minutes(schedule)
    return runs


def sqs_sources(template: Template, conditions: Mapping[str, bool] | None = None) -> int:
    """The functions' SQS event sources enabled under ``conditions`` (default: the template's defaults): each
    keeps Lambda's pollers asking, queue empty or not. A function or mapping whose condition is false is not
    there (``Condition``), or does not poll (``Enabled: !If [...]``)."""
    conditions = template.conditions() if conditions is None else conditions
    count = 0
    for resource in template.resources.values():
        if "Condition" in resource and not conditions[resource["Condition"]]:
            continue
        for event in ((resource.get("Properties") or {}).get("Events") or {}).values():
            if event.get("Type") == "SQS" and _on(event["Properties"].get("Enabled", True), conditions):
                count += 1
    return count


def _on(value: Any, conditions: Mapping[str, bool]) -> bool:
    """A boolean property, or ``!If [condition, true, false]`` under ``conditions``."""
    if isinstance(value, dict) and "Fn::If" in value:
        name, when_true, when_false = value["Fn::If"]
        value = when_true if conditions[name] else when_false
    return value is True or str(value).lower() == "true"


def memory_gb(template: Template, logical_id: str) -> float:
    default = template.body["Globals"]["Function"].get("MemorySize", 128)
    props = template.resources[logical_id]["Properties"]
    return float(props.get("MemorySize", default)) / 1024


def ops_alarm_metrics(template: Template, conditions: Mapping[str, bool] | None = None) -> int:
    """Metrics the stack's own CloudWatch alarms watch (each MetricStat of a math alarm is one), of the alarms
    created under ``conditions`` (default: the template's defaults)."""
    conditions = template.conditions() if conditions is None else conditions
    count = 0
    for resource in template.resources.values():
        if resource.get("Type") != "AWS::CloudWatch::Alarm":
            continue
        if "Condition" in resource and not conditions[resource["Condition"]]:
            continue
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


def read_schedule(results: Mapping[str, Any], fleet: Mapping[str, Any]) -> dict[str, Any]:
    """The sweep's reads: bench/results.json's measured ``read_schedule`` when present, else every instance at
    every sweep (12 reads an instance-hour), with where the figures come from."""
    measured = results.get("read_schedule")
    if isinstance(measured, Mapping) and "reads_per_instance_hour" in measured:
        schedule = {k: float(measured[k]) for k in READ_SCHEDULE_KEYS if k in measured}
        schedule.setdefault("gpu_metrics_per_instance", _fleet_gpus_per_instance(fleet))
        # Not given: CPU and network at every read, as the measured sweep reads them.
        schedule.setdefault(
            "evidence_metrics_per_instance_hour",
            _evidence_per_read(fleet) * schedule["reads_per_instance_hour"],
        )
        return schedule | {"source": "measured: bench/results.json read_schedule"}
    return no_schedule(fleet)


READ_SCHEDULE_KEYS = (
    "reads_per_instance_hour",
    "gpu_metrics_per_instance",
    "evidence_metrics_per_instance_hour",
)


def no_schedule(fleet: Mapping[str, Any]) -> dict[str, Any]:
    """Every instance read at every sweep: its GPUs, CPU and network, 12 times an hour (the measured sweep)."""
    return {
        "reads_per_instance_hour": NO_SCHEDULE_READS_PER_INSTANCE_HOUR,
        "gpu_metrics_per_instance": _fleet_gpus_per_instance(fleet),
        "evidence_metrics_per_instance_hour": _evidence_per_read(fleet) * NO_SCHEDULE_READS_PER_INSTANCE_HOUR,
        "source": "no read schedule in bench/results.json: every instance read at every 5-minute sweep",
    }


def _evidence_per_read(fleet: Mapping[str, Any]) -> float:
    """The metrics a read of one instance requested besides its GPUs before the read schedule: its CPU and
    network (aws/metrics.evidence_queries), at every read. The sweep now reads them only for a verdict that is
    news (the measured busy fleet requests none), so this is the comparison's figure, and the schedule's when
    bench/results.json does not give its own."""
    return 2.0


def _fleet_gpus_per_instance(fleet: Mapping[str, Any]) -> float:
    sweep = fleet["sweep_1000"]
    return round(sweep["gpu_series"] / sweep["instances"], 2)


class Bill:
    """The lines of one month's bill: each its quantity, unit price, source and how it was computed."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def line(self, item: str, quantity: float, price: str, how: str) -> None:
        unit = PRICES[price]
        self.lines.append(
            {
                "item": item,
                "quantity": round(quantity, 1),
                "price": price,
                "unit_usd": unit["usd"],
                "usd": round(quantity * unit["usd"], 2),
                "source": unit["source"],
                "how": how,
            }
        )

    @property
    def total(self) -> float:
        return round(sum(line["usd"] for line in self.lines), 2)


class Month:
    """What one month of a fleet of ``instances`` makes happen: invocations, calls, episodes, notices."""

    def __init__(
        self,
        instances: int,
        fleet: Mapping[str, Any],
        imports: Mapping[str, Any],
        template: Template,
        schedule: Mapping[str, Any],
        alarms_on: bool,
    ) -> None:
        self.instances, self.template, self.alarms_on = instances, template, alarms_on
        self.sweep, self.reconcile, self.audit = (
            fleet[f"{s}_{instances}"] for s in ("sweep", "reconcile", "audit")
        )
        self.gpus = int(self.sweep["gpu_series"])
        self.init = {name: row["median_ms"] / 1000 for name, row in imports["handlers"].items()}
        conditions = template.conditions({ALARMS_OPTION: "on" if alarms_on else "off"})
        self.conditions = conditions
        self.runs = schedules(template, conditions)
        self.schedule = dict(schedule)
        a = ASSUMPTIONS
        self.sweeps = self.runs["GpuIdleFunction.Sweep"]
        self.reconciles = self.runs.get("GpuAlarmsFunction.Reconcile", 0.0)
        self.audits = self.runs["AuditStateMachine.Weekly"]
        self.episodes = instances * float(a["episodes_per_instance_per_day"]) * MONTH_DAYS
        self.notices = self.episodes * float(a["notices_per_episode"])
        self.cycles = instances * float(a["start_stop_cycles_per_instance_per_day"]) * MONTH_DAYS
        self.state_events = 3 * self.cycles  # running, stopping, stopped
        self.alarm_events = (
            instances * float(a["alarms_per_instance_per_day"]) * MONTH_DAYS if alarms_on else 0.0
        )
        # GPU metrics of one alarm's read on the mixed fleet: its GPUs, plus what the measured alarm read beside them.
        one = self.sweep["one_alarm"]
        self.alarm_metrics = self.gpus / instances + (one["metrics_requested"] - one["gpus"])

    def seconds(self, function: str, wall: float, calls: float) -> float:
        return float(self.init[function] + wall + calls * float(ASSUMPTIONS["api_latency_seconds"]))

    def gb(self, function: str) -> float:
        return memory_gb(self.template, function)

    @property
    def sweep_metrics(self) -> float:
        """Metrics one sweep requests on average under the read schedule."""
        s = self.schedule
        per_hour = (
            s["reads_per_instance_hour"] * s["gpu_metrics_per_instance"]
            + s["evidence_metrics_per_instance_hour"]
        )
        return self.instances * per_hour / SWEEPS_AN_HOUR

    @property
    def sweep_calls(self) -> float:
        """The measured sweep's calls, with its GetMetricData calls as many as the scheduled reads need."""
        other = self.sweep["api_calls_total"] - _api(self.sweep["api_calls"], "cloudwatch:GetMetricData")
        return other + math.ceil(self.sweep_metrics / QUERIES_PER_GET_METRIC_DATA)

    @property
    def open_findings(self) -> float:
        """Findings a sweep sees on average: episodes in progress."""
        a = ASSUMPTIONS
        return self.instances * float(a["episodes_per_instance_per_day"]) * float(a["episode_hours"]) / 24

    def other_schedules(self) -> dict[str, float]:
        gpu = ("GpuIdleFunction", "GpuAlarmsFunction", "AuditStateMachine")
        return {k: v for k, v in self.runs.items() if k.split(".")[0] not in gpu}


def _lambda(bill: Bill, m: Month) -> None:
    a = ASSUMPTIONS
    latency = float(a["api_latency_seconds"])
    sweep_s = m.seconds("GpuIdleFunction", m.sweep["wall_seconds_in_process"], m.sweep_calls)
    episode_s = float(a["sweep_calls_per_episode"]) * latency
    one_alarm = m.sweep["one_alarm"]["api_calls"]
    alarm_s = m.seconds(
        "GpuIdleFunction", 0.0, sum(one_alarm.values()) + float(a["idempotency_writes_per_event"])
    )
    reconcile_s = m.seconds(
        "GpuAlarmsFunction", m.reconcile["wall_seconds_in_process"], m.reconcile["api_calls_total"]
    )
    # A cycle's running event: DescribeInstances and PutMetricAlarm with the alarms on, no call off; its stopping
    # and stopped events: one DeleteAlarms each.
    cycle_calls = (2 if m.alarms_on else 0) + 2
    state_s = 3 * m.seconds("GpuAlarmsFunction", 0.0, 0) + cycle_calls * latency
    notice_s = m.seconds("NotifierFunction", 0.0, float(a["notifier_calls_per_notice"]))
    audit_gb_s = sum(
        m.gb(step) * m.seconds(step, row["wall_seconds_in_process"], row["api_calls"])
        for step, row in m.audit["steps"].items()
    ) + m.gb("AuditPlanFunction") * m.seconds("AuditPlanFunction", 0.0, 0)
    others = m.other_schedules()
    # A function the measured results do not list yet (a new one, before `bench/run.py` is run again) is given
    # the slowest measured cold start: the bill errs high, never low.
    slowest = max(m.init.values(), default=0.0)
    other_gb_s = sum(
        n
        * m.gb(k.split(".")[0])
        * (m.init.get(k.split(".")[0], slowest) + float(a["other_scheduled_seconds"]))
        for k, n in others.items()
    )
    gpu, alarms, notifier = m.gb("GpuIdleFunction"), m.gb("GpuAlarmsFunction"), m.gb("NotifierFunction")
    gb_s = (
        m.sweeps * gpu * sweep_s
        + m.episodes * gpu * episode_s
        + m.alarm_events * gpu * alarm_s
        + m.reconciles * alarms * reconcile_s
        + m.cycles * alarms * state_s
        + m.notices * notifier * notice_s
        + m.audits * audit_gb_s
        + other_gb_s
    )
    how = (
        f"sweep {m.sweeps:,.0f} x {gpu:g} GB x {sweep_s:.2f} s ({m.sweep_calls:,.0f} calls)"
        f" + episode work {m.episodes:,.0f} x {gpu:g} GB x {episode_s:.2f} s"
        + (f" + alarm {m.alarm_events:,.0f} x {gpu:g} GB x {alarm_s:.2f} s" if m.alarms_on else "")
        + (f" + reconcile {m.reconciles:,.0f} x {alarms:g} GB x {reconcile_s:.2f} s" if m.alarms_on else "")
        + f" + state changes {m.cycles:,.0f} cycles x {alarms:g} GB x {state_s:.2f} s"
        f" + notice {m.notices:,.0f} x {notifier:g} GB x {notice_s:.2f} s"
        f" + audit {m.audits:.2f} x {audit_gb_s:.1f} GB-s + other schedules {other_gb_s:,.0f} GB-s"
    )
    bill.line("Lambda compute", gb_s, "lambda_gb_second_arm64", how)
    invocations = _invocations(m)
    bill.line(
        "Lambda requests",
        invocations,
        "lambda_request",
        f"{m.sweeps:,.0f} sweeps + {m.reconciles:,.0f} reconciles + {m.alarm_events:,.0f} alarms"
        f" + {m.state_events:,.0f} state changes + {m.notices:,.0f} notices (one invocation each, at most)"
        f" + {m.audits:.2f} audits x 5 tasks + {sum(others.values()):,.0f} other scheduled",
    )
    bill.line("X-Ray traces", invocations, "xray_trace_recorded", "one trace an invocation (Tracing: Active)")
    logs_gb = invocations * float(a["log_kb_per_invocation"]) / 1024 / 1024
    bill.line(
        "CloudWatch Logs",
        logs_gb,
        "cloudwatch_logs_ingestion_gb",
        f"{invocations:,.0f} invocations x {a['log_kb_per_invocation']} KB",
    )


def _invocations(m: Month) -> float:
    others = sum(m.other_schedules().values())
    return m.sweeps + m.reconciles + m.alarm_events + m.state_events + m.notices + m.audits * 5 + others


def _cloudwatch(bill: Bill, m: Month) -> None:
    ops = ops_alarm_metrics(m.template, m.conditions)
    bill.line(
        "CloudWatch ops alarms",
        ops,
        "cloudwatch_alarm_metric",
        f"{ops} metrics of the ops alarms",
    )
    if m.alarms_on:
        bill.line(
            "CloudWatch GPU-idle alarms, one per instance (GpuAlarms on)",
            m.gpus,
            "cloudwatch_alarm_metric",
            f"{m.instances:,} Metrics Insights alarms analyzing {m.gpus:,} GPU series",
        )
    s = m.schedule
    sweep_gmd = m.sweeps * m.sweep_metrics
    alarm_gmd = m.alarm_events * m.alarm_metrics
    audit_gmd = m.audits * m.audit["metrics_requested"]
    bill.line(
        "CloudWatch GetMetricData",
        sweep_gmd + alarm_gmd + audit_gmd,
        "cloudwatch_get_metric_data_metric",
        f"sweep {m.instances:,} instances x {MONTH_HOURS} h x ({s['reads_per_instance_hour']:g} reads x"
        f" {s['gpu_metrics_per_instance']:g} GPU metrics + {s['evidence_metrics_per_instance_hour']:g} evidence"
        f" metrics) an instance-hour"
        + (f" + {m.alarm_events:,.0f} alarms x {m.alarm_metrics:.2f}" if m.alarms_on else "")
        + f" + {m.audits:.2f} audits x {m.audit['metrics_requested']:,}",
    )
    host = m.episodes * float(ASSUMPTIONS["host_evidence_metrics_per_episode"])
    bill.line(
        "CloudWatch GetMetricData: EC2's own metrics before a mark or stop",
        host,
        "cloudwatch_get_metric_data_metric",
        f"{m.episodes:,.0f} episodes x {ASSUMPTIONS['host_evidence_metrics_per_episode']:g} AWS/EC2 metrics (CPU,"
        " network in and out at the mark, and again at the stop; none while a mark waits out its grace period)",
    )
    list_metrics = _api(m.sweep["api_calls"], "cloudwatch:ListMetrics")
    describe_alarms = _api(m.reconcile["api_calls"], "cloudwatch:")
    other = (
        m.sweeps * list_metrics
        + m.alarm_events
        + m.reconciles * describe_alarms
        + m.cycles * ((1 if m.alarms_on else 0) + 2)
        + m.audits * _api(m.audit["api_calls"], "cloudwatch:ListMetrics")
    )
    bill.line(
        "CloudWatch other API requests",
        other,
        "cloudwatch_api_request",
        f"ListMetrics {list_metrics} a sweep"
        + (
            f", 1 an alarm, DescribeAlarms {describe_alarms} a reconcile, PutMetricAlarm 1 a start"
            if m.alarms_on
            else ""
        )
        + ", DeleteAlarms 1 a stopping or stopped state change",
    )
    emf = float(ASSUMPTIONS["emf_metrics_published"])
    bill.line(
        "CloudWatch custom metrics (EMF)", emf, "cloudwatch_custom_metric", f"{emf:g} metrics published"
    )


def _state_and_queues(bill: Bill, m: Month) -> None:
    a = ASSUMPTIONS
    s = m.schedule
    scheduled = s["reads_per_instance_hour"] < SWEEPS_AN_HOUR
    shards = min(int(a["read_schedule_shards"]), m.instances)
    item_kb = m.instances / shards * float(a["read_schedule_entry_bytes"]) / 1024
    changed = (
        m.instances * s["reads_per_instance_hour"] / SWEEPS_AN_HOUR
    )  # entries read (and rewritten) a sweep
    changed_shards = shards * (1 - (1 - 1 / shards) ** changed)  # the items those entries fall in, expected
    item_wru, item_rru = math.ceil(item_kb), math.ceil(item_kb / 4)
    entry_writes = m.sweeps * changed_shards * item_wru if scheduled else 0.0
    episode_writes = m.episodes * float(a["dynamodb_writes_per_episode"])
    notice_writes = m.notices * float(a["notifier_writes_per_notice"])
    alarm_writes = m.alarm_events * float(a["idempotency_writes_per_event"])
    bill.line(
        "DynamoDB writes",
        entry_writes + episode_writes + notice_writes + alarm_writes,
        "dynamodb_write_request_unit",
        (
            f"read schedule {m.sweeps:,.0f} sweeps x {changed_shards:.1f} changed items of {shards}"
            f" x {item_wru} WRU ({item_kb:.1f} KB) + "
            if scheduled
            else ""
        )
        + f"{m.episodes:,.0f} episodes x {a['dynamodb_writes_per_episode']} (on change only)"
        f" + {m.notices:,.0f} notices x {a['notifier_writes_per_notice']} (notifier idempotency)"
        + (
            f" + {m.alarm_events:,.0f} alarms x {a['idempotency_writes_per_event']} (idempotency)"
            if m.alarms_on
            else ""
        ),
    )
    entry_reads = m.sweeps * shards * item_rru if scheduled else 0.0
    gate_reads = m.sweeps * m.open_findings + m.alarm_events
    bill.line(
        "DynamoDB reads",
        entry_reads + gate_reads,
        "dynamodb_read_request_unit",
        (f"read schedule {m.sweeps:,.0f} sweeps x {shards} items x {item_rru} RRU + " if scheduled else "")
        + f"episode gate {m.sweeps:,.0f} sweeps x {m.open_findings:,.1f} open findings"
        + (f" + {m.alarm_events:,.0f} alarms" if m.alarms_on else ""),
    )
    sources = sqs_sources(m.template, m.conditions)
    pollers = int(a["sqs_pollers_per_source"])
    polls = sources * pollers * 3 * MONTH_MINUTES  # a 20-second long poll: 3 a minute each
    bill.line(
        "SQS",
        m.notices * float(a["sqs_requests_per_notice"]) + polls,
        "sqs_request",
        f"{m.notices:,.0f} notices x {a['sqs_requests_per_notice']} (only news is queued)"
        f" + {sources} SQS event sources x {pollers} pollers x 3 a minute x {MONTH_MINUTES:,} minutes",
    )
    bill.line("Secrets Manager secret", 1, "secrets_manager_secret", "the Slack secret the stack creates")
    bill.line(
        "Secrets Manager reads",
        m.notices,
        "secrets_manager_api_call",
        f"{m.notices:,.0f} notices (one GetSecretValue a cold start, a cold start a notice at most)",
    )


# The sweeps that list a kind of resource an owner's tag can arm (act/arming.py): each takes a census.
ARMABLE_SWEEPS = ("TrainingCeilingsFunction", "CapacityFunction", "EksGpuFunction")


def _evidence_records(bill: Bill, m: Month) -> None:
    """What costguard keeps so that a stop rests on evidence it can vouch for: the census of each sweep of an
    armable kind, the arming tags as first seen, and the record of each live mark."""
    a = ASSUMPTIONS
    runs = sum(v for k, v in m.other_schedules().items() if k.split(".")[0] in ARMABLE_SWEEPS)
    armed = m.instances * float(a["armed_share"])
    writes = runs + armed * MONTH_DAYS + m.episodes * float(a["mark_record_writes_per_episode"])
    bill.line(
        "DynamoDB writes: evidence records",
        writes,
        "dynamodb_write_request_unit",
        f"{runs:,.0f} armable sweeps x 1 census + {armed:,.0f} armed resources x {MONTH_DAYS} days (a new record a"
        f" day) + {m.episodes:,.0f} episodes x {a['mark_record_writes_per_episode']} (mark record kept, deleted)",
    )
    bill.line(
        "DynamoDB reads: evidence records",
        runs * armed,
        "dynamodb_read_request_unit",
        f"{runs:,.0f} armable sweeps x {armed:,.0f} armed resources' records (consistent, one BatchGetItem a 100)",
    )


def _savings_ledger(bill: Bill, m: Month) -> None:
    a = ASSUMPTIONS
    writes = m.episodes * (float(a["ledger_writes_per_stop"]) + float(a["ledger_writes_per_return"]))
    bill.line(
        "DynamoDB writes: the savings ledger",
        writes,
        "dynamodb_write_request_unit",
        f"{m.episodes:,.0f} episodes, each a stop ({a['ledger_writes_per_stop']} writes: marker, entry, its index "
        f"copy, the teams) and a return ({a['ledger_writes_per_return']}: the entry, its index copy, the marker)",
    )
    bill.line(
        "DynamoDB reads: the savings ledger",
        m.episodes * float(a["ledger_reads_per_return"]),
        "dynamodb_read_request_unit",
        f"{m.episodes:,.0f} returns x {a['ledger_reads_per_return']} (the open marker, consistent)",
    )
    runs = sum(n for k, n in m.runs.items() if k.startswith("LedgerReportFunction."))
    read = m.episodes / MONTH_DAYS * float(a["ledger_report_days"]) * float(a["ledger_entry_bytes"])
    units = math.ceil(read / 4096) / 2 + 1 + float(a["ledger_report_teams"])  # eventually consistent Query
    bill.line(
        "DynamoDB reads: the ledger's daily report",
        runs * units,
        "dynamodb_read_request_unit",
        f"{runs:,.0f} runs x ({a['ledger_report_days']} days of entries, {a['ledger_entry_bytes']} B each, "
        f"in {a['ledger_report_teams']} Queries, and the teams' item)",
    )
    watched = m.instances * float(a["ledger_return_watched_share"])
    bill.line(
        "DynamoDB reads: returns seen by the SageMaker and EKS sweeps",
        watched * 4 * 24 * MONTH_DAYS,
        "dynamodb_read_request_unit",
        f"{watched:,.0f} notebooks and EKS workloads x 96 sweeps a day, a consistent read of each one's marker",
    )
    series = float(a["ledger_metric_series"])
    bill.line(
        "CloudWatch custom metrics: the ledger's figures",
        series * runs / (MONTH_DAYS * 24),
        "cloudwatch_custom_metric",
        f"{series:g} series, each sent in {runs:,.0f} hours of the month's {MONTH_DAYS * 24:,.0f} (prorated)",
    )
    if m.conditions.get("DashboardOn"):
        bill.line("CloudWatch dashboard (Dashboard=on)", 1, "cloudwatch_dashboard", "one dashboard a month")


def _audit(bill: Bill, m: Month) -> None:
    transitions = audit_transitions()
    bill.line(
        "Step Functions",
        m.audits * transitions,
        "sfn_state_transition",
        f"{m.audits:.2f} audits x {transitions} transitions (one region)",
    )
    puts, gets = _api(m.audit["api_calls"], "s3:PutObject"), _api(m.audit["api_calls"], "s3:GetObject")
    bill.line(
        "S3 writes (audit reports)",
        m.audits * puts,
        "s3_put_request",
        f"{m.audits:.2f} audits x {puts} PutObject",
    )
    bill.line(
        "S3 reads (audit steps)",
        m.audits * gets,
        "s3_get_request",
        f"{m.audits:.2f} audits x {gets} GetObject",
    )


def _training_hangs(bill: Bill, m: Month) -> None:
    a = ASSUMPTIONS
    job_sweeps = (
        m.instances * float(a["training_jobs_per_instance"]) * m.runs["TrainingCeilingsFunction.Sweep"]
    )
    quiet = job_sweeps * float(a["hang_quiet_share"])
    silent = job_sweeps * float(a["hang_silent_share"])
    hosts = float(a["hosts_per_training_job"])
    bill.line(
        "CloudWatch Logs reads: a quiet training job's streams (job_hung)",
        quiet * 2 + silent * hosts,
        "cloudwatch_api_request",
        f"{job_sweeps:,.0f} job-sweeps ({a['training_jobs_per_instance']:g} jobs an instance x training sweeps): "
        f"{a['hang_quiet_share']:.0%} quiet, DescribeLogStreams and FilterLogEvents; {a['hang_silent_share']:.1%} "
        f"silent, GetLogEvents per host ({hosts:g})",
    )
    bill.line(
        "CloudWatch GetMetricData: a silent training job's GPUs (job_hung)",
        silent * hosts,
        "cloudwatch_get_metric_data_metric",
        f"{silent:,.0f} silent job-sweeps x {hosts:g} hosts, one GPUUtilization query each",
    )


PARTS: tuple[Callable[[Bill, Month], None], ...] = (
    _lambda,
    _cloudwatch,
    _training_hangs,
    _state_and_queues,
    _evidence_records,
    _savings_ledger,
    _audit,
)


def monthly_cost(
    instances: int,
    fleet: Mapping[str, Any],
    imports: Mapping[str, Any],
    template: Template,
    schedule: Mapping[str, Any] | None = None,
    alarms_on: bool = False,
) -> dict[str, Any]:
    """The month's bill for ``instances`` GPU instances of the mixed fleet with findings, line by line: with
    the read schedule given (default: none, every instance read at every sweep) and the per-instance alarms off
    (the default) or on."""
    m = Month(instances, fleet, imports, template, schedule or no_schedule(fleet), alarms_on)
    bill = Bill()
    for part in PARTS:
        part(bill, m)
    agent = int(m.gpus * float(ASSUMPTIONS["agent_metrics_per_gpu"]))
    return {
        "instances": instances,
        "gpus": m.gpus,
        "gpu_alarms": "on" if alarms_on else "off",
        "metrics_insights_alarms": {
            "count": instances if alarms_on else 0,
            "default_quota_per_account_and_region": METRICS_INSIGHTS_ALARM_QUOTA,
        },
        "episodes": round(m.episodes),
        "notices": round(m.notices),
        "lines": bill.lines,
        "total_usd": bill.total,
        "prerequisite": {
            "item": "CloudWatch agent GPU metrics (the fleet's, not costguard's)",
            "quantity": agent,
            "price": "cloudwatch_custom_metric",
            "usd": round(agent * PRICES["cloudwatch_custom_metric"]["usd"], 2),
            "how": f"{m.gpus:,} GPUs x {ASSUMPTIONS['agent_metrics_per_gpu']:g} metrics",
        },
    }


# The EKS GPU sweep (flows/eks.py) over one cluster of 100 p4d.24xlarge nodes and 800 single-GPU pods: its calls,
# as tests/integration/test_eks_scale.py counts them per sweep.
EKS_CLUSTER: dict[str, int] = {
    "nodes": 100,
    "pods": 800,
    "get_metric_data_metrics": 800,  # one per GPU of a pod; a node is read only while no pod requests its GPUs
    "get_metric_data_calls": 2,
    "list_metrics_calls": 2,
    "eks_calls": 2,  # ListClusters, DescribeCluster (EKS API requests are not billed)
    "kubernetes_calls": 6,  # nodes, pods (2 pages), namespaces, ReplicaSets, StatefulSets: the cluster's own API
}


def eks_cluster_cost(template: Template, cluster: Mapping[str, int] = EKS_CLUSTER) -> dict[str, Any]:
    """What costguard's own reads of one EKS cluster cost a month at the sweep's schedule (template.yaml):
    GetMetricData by metric, ListMetrics by request. Container Insights itself (billed per observation) is the
    cluster's prerequisite, not costguard's: docs/eks.md."""
    sweeps = schedules(template).get("EksGpuFunction.Sweep", 0.0)
    bill = Bill()
    bill.line(
        "CloudWatch GetMetricData (EKS sweep)",
        sweeps * cluster["get_metric_data_metrics"],
        "cloudwatch_get_metric_data_metric",
        f"{sweeps:,.0f} sweeps x {cluster['get_metric_data_metrics']:,} pod GPU series "
        f"({cluster['get_metric_data_calls']} calls a sweep)",
    )
    bill.line(
        "CloudWatch ListMetrics (EKS sweep)",
        sweeps * cluster["list_metrics_calls"],
        "cloudwatch_api_request",
        f"{sweeps:,.0f} sweeps x {cluster['list_metrics_calls']} pages of 500 series",
    )
    return {
        "cluster": dict(cluster),
        "sweeps_a_month": round(sweeps),
        "lines": bill.lines,
        "total_usd": bill.total,
    }


def bench_costs(results: Mapping[str, Any]) -> dict[str, Any]:
    """The bill of every fleet size with the alarms off (the default) and on, from ``results``' measured
    ``fleet`` and ``cold_imports``, priced from its ``read_schedule`` when it has one; and, beside it, what the
    same fleets would cost with no schedule."""
    fleet, imports = results["fleet"], results["cold_imports"]
    template = Template.load(ROOT / "template.yaml")
    schedule = read_schedule(results, fleet)
    sizes = [n for n in FLEETS if f"sweep_{n}" in fleet]

    def bills(alarms_on: bool, reads: Mapping[str, Any]) -> dict[str, Any]:
        return {str(n): monthly_cost(n, fleet, imports, template, reads, alarms_on) for n in sizes}

    unscheduled = no_schedule(fleet)
    return {
        "prices_as_of": PRICES_AS_OF,
        "region": "us-east-1",
        "fleet": "mixed: g5.xlarge (1 GPU), g5.12xlarge (4), p4d.24xlarge (8) in equal thirds, running all month",
        "prices": PRICES,
        "assumptions": ASSUMPTIONS,
        "read_schedule": schedule,
        "fleets": bills(False, schedule),
        "fleets_gpu_alarms_on": bills(True, schedule),
        "eks_cluster": eks_cluster_cost(template),
        "without_read_schedule": {
            "read_schedule": unscheduled,
            "total_usd": {n: b["total_usd"] for n, b in bills(False, unscheduled).items()},
            "total_usd_gpu_alarms_on": {n: b["total_usd"] for n, b in bills(True, unscheduled).items()},
        },
    }


def reprice(path: Path = ROOT / "bench" / "results.json") -> dict[str, Any]:
    """Price the last run's measured figures again (no measuring): results.json's ``monthly_cost``, RESULTS.md's
    cost section, docs/benchmark.md's figures and the README's cost figures."""
    from bench import report

    results = json.loads(path.read_text())
    results["monthly_cost"] = bench_costs(results)
    path.write_text(json.dumps(results, indent=2) + "\n")
    report.write_cost_section(results)
    report.write_readme(results)
    return dict(results["monthly_cost"])


if __name__ == "__main__":
    costs = reprice()
    for size, month in costs["fleets"].items():
        on = costs["fleets_gpu_alarms_on"][size]["total_usd"]
        print(f"{int(size):>6,} instances: ${month['total_usd']:,.2f} a month (GpuAlarms on: ${on:,.2f})")
    print(f"read schedule: {costs['read_schedule']['source']}")
