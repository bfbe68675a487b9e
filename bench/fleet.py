"""Benchmark case: API calls and peak memory of a GPU sweep, an alarm reconcile and a right-sizing audit at
fleet scale, each run in a fresh subprocess.

The calls go through the real boto3 clients of aws/clients (validated against the service models, counted in
``clients.calls``); only the HTTP exchange is answered in-process, as local/metric_responder.py does for
CloudWatch: moto at 10,000 instances would measure moto. Peak memory is the subprocess's maximum resident set
(``ru_maxrss``), so it includes Python, boto3 and the in-process answers, as a Lambda's would include boto3.
"""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
REGION = "us-east-1"
ACCOUNT = "123456789012"
# A mixed fleet in equal thirds: 1, 4 and 8 NVIDIA GPUs (4.33 GPUs an instance on average).
KINDS = ("g5.xlarge", "g5.12xlarge", "p4d.24xlarge")
SIZES = (100, 1_000, 10_000)
SCENARIOS = ("sweep", "reconcile", "audit")

Answer = Callable[[dict[str, Any]], dict[str, Any]]


def instance_id(n: int) -> str:
    return f"i-{n:017x}"


class FleetAws:
    """Answers every call a sweep, a reconcile and an audit make, for a fleet of ``size`` GPU instances."""

    def __init__(self, size: int, bucket_dir: Path, types: dict[str, Any], idle_every: int = 0) -> None:
        from costguard.aws.alarms import alarm_name
        from costguard.local.metric_responder import MetricResponder

        self.types = types
        self.idle_every = idle_every
        self.fleet: list[dict[str, Any]] = [
            {
                "InstanceId": instance_id(n),
                "InstanceType": KINDS[n % len(KINDS)],
                "State": {"Name": "running", "Code": 16},
                "LaunchTime": NOW - timedelta(days=20),
            }
            for n in range(size)
        ]
        self.alarms: dict[str, None] = {}
        self._alarm_name = alarm_name
        self.bucket_dir = bucket_dir
        gpus = {t: sum(g["Count"] for g in self.types[t]["GpuInfo"]["Gpus"]) for t in KINDS}
        metrics = [
            (
                "CWAgent",
                name,
                (("InstanceId", i["InstanceId"]), ("index", str(g)), ("name", "GPU")),
            )
            for i in self.fleet
            for g in range(gpus[i["InstanceType"]])
            for name in ("nvidia_smi_utilization_gpu",)
        ]
        self.metrics = MetricResponder(metrics, self._values)
        self._constant: dict[tuple[str, bool, int], list[float | None]] = {}
        self._params: dict[str, dict[str, Any]] = {}
        self.metrics_requested = 0
        self.items: dict[str, dict[str, Any]] = {}
        self.answers: dict[str, Answer] = {
            "DescribeInstances": self.describe_instances,
            "DescribeInstanceTypes": self.describe_instance_types,
            "DescribeInstanceTypeOfferings": self.describe_offerings,
            "DescribeAlarms": self.describe_alarms,
            "PutMetricAlarm": self.put_metric_alarm,
            "DeleteAlarms": self.delete_alarms,
            "ListMetrics": self.metrics.list_metrics,
            "GetMetricData": self.get_metric_data,
            "ListTrainingJobs": lambda _: {"TrainingJobSummaries": []},
            "ListNotebookInstances": lambda _: {"NotebookInstances": []},
            "ListEndpoints": lambda _: {"Endpoints": []},
            # The audit's holdings (audit/holdings.py): a fleet with no unattached volume, no finished job, no
            # Savings Plans and no Compute Optimizer recommendation; their calls are counted all the same.
            "DescribeVolumes": lambda _: {"Volumes": []},
            "Search": lambda _: {"Results": []},
            "ListObjectsV2": lambda p: {"KeyCount": 0, "Name": p.get("Bucket", ""), "IsTruncated": False},
            "GetSavingsPlansCoverage": lambda _: {"SavingsPlansCoverages": []},
            "GetEC2InstanceRecommendations": lambda _: {"instanceRecommendations": [], "errors": []},
            # The state table, for the read schedule's items (aws/read_plan.py).
            "BatchGetItem": self.batch_get_item,
            "BatchWriteItem": self.batch_write_item,
            "PutObject": self.put_object,
            "GetObject": self.get_object,
        }

    def install(self, client: Any) -> None:
        service = client.meta.service_model.service_name
        client.meta.events.register(f"before-parameter-build.{service}", self._keep)
        client.meta.events.register_last(f"before-call.{service}", self._answer)

    def _keep(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self._params[model.name] = dict(params)

    def _answer(self, model: Any, **_: Any) -> tuple[Any, dict[str, Any]]:
        from botocore.awsrequest import AWSResponse
        from botocore.compat import HTTPHeaders

        if model.name not in self.answers:
            # Never fall through to the network: an unexpected call is a finding of the benchmark.
            raise RuntimeError(f"the benchmark does not answer {model.name}")
        body = self.answers[model.name](self._params.pop(model.name))
        return AWSResponse("https://aws.invalid/", 200, HTTPHeaders(), None), body

    def _values(self, namespace: str, metric: str, dims: Any, times: list[datetime]) -> list[float | None]:
        # Busy (85% GPU, 20% CPU, 500 MB a period in), or idle for one instance in ``idle_every``: 1% GPU, and
        # EC2's own CPU and network quiet too (an agent's 1% and 100 KB), so a GPU-idle mark is corroborated.
        idle = bool(self.idle_every) and int(dict(dims)["InstanceId"][2:], 16) % self.idle_every == 0
        key = (metric, idle, len(times))
        if key not in self._constant:
            busy = {"CPUUtilization": 20.0, "NetworkIn": 5e8, "nvidia_smi_memory_used": 12000.0}.get(
                metric, 85.0
            )
            quiet = {
                "nvidia_smi_utilization_gpu": 1.0,
                "CPUUtilization": 1.0,
                "NetworkIn": 1e5,
                "NetworkOut": 1e5,
            }
            value = quiet.get(metric, busy) if idle else busy
            self._constant[key] = [value] * len(times)
        return self._constant[key]

    def batch_get_item(self, params: dict[str, Any]) -> dict[str, Any]:
        responses: dict[str, list[dict[str, Any]]] = {}
        for table, request in params["RequestItems"].items():
            keys = [k["id"]["S"] for k in request["Keys"]]
            responses[table] = [self.items[k] for k in keys if k in self.items]
        return {"Responses": responses, "UnprocessedKeys": {}}

    def batch_write_item(self, params: dict[str, Any]) -> dict[str, Any]:
        for writes in params["RequestItems"].values():
            for write in writes:
                item = write["PutRequest"]["Item"]
                self.items[item["id"]["S"]] = item
        return {"UnprocessedItems": {}}

    def get_metric_data(self, params: dict[str, Any]) -> dict[str, Any]:
        if "NextToken" not in params:  # CloudWatch bills each metric requested once, however it pages
            self.metrics_requested += len(params["MetricDataQueries"])
        return self.metrics.get_metric_data(params)

    def describe_instances(self, params: dict[str, Any]) -> dict[str, Any]:
        wanted = set(params.get("InstanceIds") or [])
        found = [i for i in self.fleet if not wanted or i["InstanceId"] in wanted]
        page_size = int(params.get("MaxResults") or 1000)
        offset = int(params.get("NextToken") or 0)
        page: dict[str, Any] = {
            "Reservations": [{"OwnerId": ACCOUNT, "Instances": found[offset : offset + page_size]}]
        }
        if offset + page_size < len(found):
            page["NextToken"] = str(offset + page_size)
        return page

    def describe_instance_types(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"InstanceTypes": [self.types[t] for t in params.get("InstanceTypes", []) if t in self.types]}

    def describe_offerings(self, params: dict[str, Any]) -> dict[str, Any]:
        names = [v for f in params.get("Filters", []) for v in f["Values"]]
        return {
            "InstanceTypeOfferings": [
                {"InstanceType": t, "LocationType": "region", "Location": REGION} for t in names
            ]
        }

    def describe_alarms(self, params: dict[str, Any]) -> dict[str, Any]:
        prefix = params.get("AlarmNamePrefix", "")
        names = [n for n in self.alarms if n.startswith(prefix)]
        page_size = min(int(params.get("MaxRecords") or 50), 100)
        offset = int(params.get("NextToken") or 0)
        page: dict[str, Any] = {
            "MetricAlarms": [{"AlarmName": n} for n in names[offset : offset + page_size]],
            "CompositeAlarms": [],
        }
        if offset + page_size < len(names):
            page["NextToken"] = str(offset + page_size)
        return page

    def put_metric_alarm(self, params: dict[str, Any]) -> dict[str, Any]:
        self.alarms[params["AlarmName"]] = None
        return {}

    def delete_alarms(self, params: dict[str, Any]) -> dict[str, Any]:
        for name in params["AlarmNames"]:
            self.alarms.pop(name, None)
        return {}

    def put_object(self, params: dict[str, Any]) -> dict[str, Any]:
        body = params["Body"]
        path = self.bucket_dir / params["Key"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body if isinstance(body, bytes) else body.read())
        return {"ETag": '"bench"'}

    def get_object(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"Body": io.BytesIO((self.bucket_dir / params["Key"]).read_bytes())}


def _run(scenario: str, size: int, types: dict[str, Any]) -> dict[str, Any]:
    """One scenario in this process (the subprocess side)."""
    from costguard.aws import clients, inventory

    with tempfile.TemporaryDirectory() as bucket:
        # The sweep and the reconcile see a busy fleet (nothing to report); the audit finds one in four idle.
        aws = FleetAws(size, Path(bucket), types, idle_every=4 if scenario == "audit" else 0)
        clients.reset()
        inventory.catalog = inventory.AcceleratorCatalog()
        for service in ("ec2", "cloudwatch", "sagemaker"):
            aws.install(clients.client(service, REGION))
        aws.install(clients.client("dynamodb"))  # the state table's client, as the stores ask for it
        aws.install(clients.client("s3"))  # the audit store's client, as it asks for it
        aws.install(clients.client("ce", "us-east-1"))  # Cost Explorer answers from us-east-1
        aws.install(clients.client("compute-optimizer", REGION))
        baseline = _maxrss_mib()
        clients.calls.clear()
        start = time.perf_counter()
        detail = SCENARIO_RUNS[scenario](aws, size)
        wall = time.perf_counter() - start
        calls = detail.pop("api_calls", None) or _calls()
    return {
        "instances": size,
        "api_calls": calls,
        "api_calls_total": sum(calls.values()),
        **detail,
        "wall_seconds_in_process": round(wall, 2),
        "peak_rss_mib": _maxrss_mib(),
        "rss_before_mib": baseline,
    }


def _calls() -> dict[str, int]:
    from costguard.aws import clients

    return {f"{s}:{op}": n for (s, op), n in sorted(clients.calls.items())}


def _sweep(aws: FleetAws, size: int) -> dict[str, Any]:
    from costguard.aws import clients
    from costguard.flows.gpu import evaluate
    from costguard.runtime import runtime

    report = evaluate(REGION, runtime(), NOW)
    calls, requested = _calls(), aws.metrics_requested
    # The sweeps after it, by the read schedule: 5 minutes on (a busy fleet: nothing can have changed), then
    # each sweep up to the half hour, when the busy instances' idle window has passed their last busy minute.
    later: dict[str, Any] = {}
    for minutes in (5, 10, 15, 20, 25, 30):
        clients.calls.clear()
        before = aws.metrics_requested
        evaluate(REGION, runtime(), NOW + timedelta(minutes=minutes))
        later[f"+{minutes} min"] = {
            "metrics_requested": aws.metrics_requested - before,
            "api_calls": _calls(),
        }
    # What one alarm entering ALARM costs: the same path for the one instance (a p4d.24xlarge, 8 GPUs).
    clients.calls.clear()
    before = aws.metrics_requested
    evaluate(REGION, runtime(), NOW, instance_ids=[instance_id(2)])
    alarm = {"gpus": 8, "metrics_requested": aws.metrics_requested - before, "api_calls": _calls()}
    return {
        "api_calls": calls,
        "findings": len(report.findings),
        "gpu_series": len(aws.metrics.metrics),
        "metrics_requested": requested,
        "next_sweeps": later,
        "one_alarm": alarm,
    }


def _reconcile(aws: FleetAws, size: int) -> dict[str, Any]:
    """The first reconcile creates every alarm; the hourly one after it finds nothing to change."""
    from costguard.aws import clients
    from costguard.flows.gpu import reconcile
    from costguard.runtime import runtime

    first = reconcile(runtime(), REGION)[REGION]
    first_calls = {f"{s}:{op}": n for (s, op), n in sorted(clients.calls.items())}
    clients.calls.clear()
    steady = reconcile(runtime(), REGION)[REGION]
    return {
        "first_run": {"alarms_created": len(first["alarms_created"]), "api_calls": first_calls},
        "alarms_created": len(steady["alarms_created"]),
        "alarms_deleted": len(steady["alarms_deleted"]),
    }


def _audit(aws: FleetAws, size: int) -> dict[str, Any]:
    """Discover, ReadMetrics, Evaluate and Report for one region, as the state machine runs them."""
    from costguard.audit.steps import RegionTask, ReportInput
    from costguard.aws import clients
    from costguard.flows import audit_discover, audit_evaluate, audit_metrics, audit_report
    from costguard.local.map_results import result_files
    from costguard.settings import get_settings

    # The Slack summary (one cached GetSecretValue and one webhook POST a run) is left out: no network here.
    settings = get_settings().model_copy(update={"slack_secret_id": ""})
    task = RegionTask(run="bench", now=NOW, region=REGION)
    steps: dict[str, dict[str, Any]] = {}

    def step(name: str, work: Callable[[], Any]) -> Any:
        from costguard.aws import clients

        before = dict(clients.calls)
        start = time.perf_counter()
        out = work()
        steps[name] = {
            "wall_seconds_in_process": round(time.perf_counter() - start, 2),
            "api_calls": sum(clients.calls.values()) - sum(before.values()),
            # The process's peak so far: the steps run in order, so this bounds the step's own peak (each
            # is a function of its own when deployed, with the same imports).
            "peak_rss_mib": _maxrss_mib(),
        }
        return out

    found = step("AuditDiscoverFunction", lambda: audit_discover.discover_region(task, settings))
    step("AuditMetricsFunction", lambda: audit_metrics.read_region_metrics(task, settings))
    result = step("AuditEvaluateFunction", lambda: audit_evaluate.evaluate_region(task, settings))
    # The Map's ResultWriter writes the item's outcome and the manifest (two PutObject of the state machine's),
    # which the report reads, as deployed.
    s3 = clients.client("s3")
    map_run = f"arn:aws:states:{REGION}:{ACCOUNT}:mapRun:costguard-audit/AccountRegions:bench"
    objects, details = result_files(settings.audit_bucket, "runs/map-results", map_run, [result])
    for key, body in objects:
        s3.put_object(Bucket=settings.audit_bucket, Key=key, Body=body)
    manifest = details["ResultWriterDetails"]
    step(
        "AuditReportFunction",
        lambda: audit_report.report(
            ReportInput.model_validate({"run": "bench", "now": NOW, "results": manifest}), settings
        ),
    )
    return {
        "subjects": found["subjects"],
        "findings": result["findings"],
        "metrics_requested": aws.metrics_requested,
        "steps": steps,
    }


SCENARIO_RUNS: dict[str, Callable[[FleetAws, int], dict[str, Any]]] = {
    "sweep": _sweep,
    "reconcile": _reconcile,
    "audit": _audit,
}


def _maxrss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def bench_fleet(sizes: tuple[int, ...] = SIZES, scenarios: tuple[str, ...] = SCENARIOS) -> dict[str, Any]:
    """Every scenario at every size, each in a fresh interpreter so one's peak memory is not another's."""
    from moto.ec2.models.instance_types import INSTANCE_TYPES  # DescribeInstanceTypes' data, offline

    from bench.imports import handler_environment
    from costguard.local.template import Template

    types = json.dumps({t: INSTANCE_TYPES[t] for t in KINDS})
    template = Template.load(ROOT / "template.yaml")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("COSTGUARD_", "POWERTOOLS_"))}
    functions = {"sweep": "GpuIdleFunction", "reconcile": "GpuAlarmsFunction", "audit": "AuditReportFunction"}
    results: dict[str, Any] = {}
    for scenario in scenarios:
        env = base | handler_environment(template, functions[scenario]) | {"POWERTOOLS_LOG_LEVEL": "ERROR"}
        for size in sizes:
            done = subprocess.run(
                [sys.executable, str(Path(__file__)), scenario, str(size), types],
                env=env,
                capture_output=True,
                text=True,
                cwd=ROOT,
                check=False,
            )
            if done.returncode:
                raise RuntimeError(f"{scenario} {size} failed:\n{done.stderr[-3000:]}")
            results[f"{scenario}_{size}"] = json.loads(done.stdout.strip().splitlines()[-1])
    return results


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    print(json.dumps(_run(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]))))
