"""Hostile and broken metrics through the deployed routing, handlers and policy, on the embedded AWS.

No diluted metric or bad datapoint may stop work or silence costguard:

- anyone allowed ``cloudwatch:PutMetricData`` can add datapoints to any series; added samples can only make a
  resource look busier (GPU series are read as each minute's Maximum, never its Average);
- one series with an unreadable ``index`` dimension never stops the sweep of everything else;
- an alarm costguard cannot match to a running GPU instance, and an instance or notebook on which only some
  GPUs report, are reported, never dropped and never called idle.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard.aws import clients
from costguard.aws.metrics import GPU_METRIC, GPU_NAMESPACE, Query, get_metric_data
from costguard.aws.sagemaker import TRAINING_GPU_METRIC, TRAINING_NAMESPACE
from costguard.local.replay import ReplayResult, replay
from costguard.local.seed_metrics import datum, publish
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.model import MARK_TAG_KEY
from tests.conftest import EVENTS, load_event

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=20)  # past the template's 15-minute grace period
GPU_SWEEP = EVENTS / "schedule-gpu-sweep-1200.json"
GPU_SWEEP_LATER = EVENTS / "schedule-gpu-sweep-1220.json"
SAGEMAKER_SWEEP = EVENTS / "schedule-sagemaker-sweep.json"
ALARM = EVENTS / "cloudwatch-alarm-gpu-idle.json"
ACCOUNT, REGION = "123456789012", "us-east-1"
LAUNCHED = NOW - timedelta(hours=6)

BUSY, IDLE, IDLE_2, IDLE_3 = (
    "i-0c0ffee0000000b01",
    "i-0c0ffee0000000a01",
    "i-0c0ffee0000000a02",
    "i-0c0ffee0000000a03",
)
GONE, TERMINATED, CPU_ONLY = "i-0c0ffee0000000ff1", "i-0c0ffee0000000e01", "i-0c0ffee0000000c01"
PARTIAL = "i-0c0ffee0000000d01"
BUSY_JOB, HUNG_JOB, BUSY_NOTEBOOK, IDLE_NOTEBOOK = "vit-busy", "bert-hung", "lab-busy", "scratch-idle"
ATTACKS_PER_MINUTE = 99


# -- helpers ---------------------------------------------------------------------------------------


def gpu_at(index: int, percent: float) -> dict[str, Any]:
    """One GPU at ``percent`` every minute from three hours before now to past the later sweep."""
    start = NOW - timedelta(minutes=180)
    return {"index": index, "runs": [{"start": start, "step_minutes": 1, "values": [percent] * 200}]}


def instance(instance_id: str, instance_type: str = "g5.xlarge", **spec: Any) -> dict[str, Any]:
    return {"id": instance_id, "type": instance_type, "launched": LAUNCHED} | spec


def job(name: str, pattern: str) -> dict[str, Any]:
    return {"name": name, "instance_type": "ml.g5.xlarge", "started": LAUNCHED, "gpu_pattern": pattern}


def world(**parts: Any) -> World:
    return World.model_validate({"account": ACCOUNT, "region": REGION, "now": NOW} | parts)


def series_of(
    dimension: str, value: str, namespace: str = GPU_NAMESPACE, metric: str = GPU_METRIC
) -> list[list[dict[str, str]]]:
    """The exact dimension sets of a resource's series, as an attacker (or costguard) finds them."""
    found = clients.cloudwatch().list_metrics(
        Namespace=namespace, MetricName=metric, Dimensions=[{"Name": dimension, "Value": value}]
    )["Metrics"]
    return [m["Dimensions"] for m in found]


def dilute(
    namespace: str, metric: str, dimensions: list[dict[str, str]], start: datetime, end: datetime
) -> None:
    """PutMetricData, through the real API: 99 zeros inside every minute of [start, end) on one series."""
    data = [
        {
            "MetricName": metric,
            "Dimensions": dimensions,
            "Timestamp": start + timedelta(minutes=m, milliseconds=500 * n),
            "Value": 0.0,
        }
        for m in range(int((end - start) / timedelta(minutes=1)))
        for n in range(1, ATTACKS_PER_MINUTE + 1)
    ]
    cloudwatch = clients.cloudwatch()
    for offset in range(0, len(data), 1000):
        cloudwatch.put_metric_data(Namespace=namespace, MetricData=data[offset : offset + 1000])


def busiest_minute(namespace: str, metric: str, dimensions: list[dict[str, str]], stat: str) -> float:
    """The largest per-minute ``stat`` of one series over the idle window before now."""
    dims = tuple((d["Name"], d["Value"]) for d in dimensions)
    query = Query(("r", "gpu", "0"), namespace, metric, dims, stat)
    data = get_metric_data(REGION, [query], NOW - timedelta(minutes=30), NOW, 60)
    return max(v for _, v in data.gpus("r")[0])


def decided(results: list[ReplayResult], resource_id: str) -> list[tuple[str, str]]:
    return [
        (d["reason"], d["action"]) for r in results for d in r.decisions if d["resource_id"] == resource_id
    ]


def ec2_instance(instance_id: str) -> dict[str, Any]:
    [reservation] = clients.ec2().describe_instances(InstanceIds=[instance_id])["Reservations"]
    described: dict[str, Any] = reservation["Instances"][0]
    return described


def ec2_tags(instance_id: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in ec2_instance(instance_id).get("Tags", [])}


def sagemaker_tags(kind: str, name: str) -> dict[str, str]:
    arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:{kind}/{name}"
    return {t["Key"]: t["Value"] for t in clients.sagemaker().list_tags(ResourceArn=arn)["Tags"]}


def job_status(name: str) -> str:
    return str(clients.sagemaker().describe_training_job(TrainingJobName=name)["TrainingJobStatus"])


def notebook_status(name: str) -> str:
    described = clients.sagemaker().describe_notebook_instance(NotebookInstanceName=name)
    return str(described["NotebookInstanceStatus"])


def later(path: Path, tmp_path: Path, event_id: str) -> Path:
    """The same schedule 20 minutes later."""
    event = load_event(path.name)
    event["id"], event["time"] = event_id, LATER.strftime("%Y-%m-%dT%H:%M:%SZ")
    written = tmp_path / f"later-{path.name}"
    written.write_text(json.dumps(event))
    return written


def alarm_event(tmp_path: Path, name: str, number: int) -> Path:
    event = copy.deepcopy(load_event(ALARM.name))
    event["id"] = f"0bad0a1a-0000-4000-8000-{number:012d}"
    event["resources"] = [f"arn:aws:cloudwatch:{REGION}:{ACCOUNT}:alarm:{name}"]
    event["detail"]["alarmName"] = name
    path = tmp_path / f"alarm-{number}.json"
    path.write_text(json.dumps(event))
    return path


def emf_count(output: str, name: str) -> float:
    """What the EMF lines a function printed count for one metric (0 when absent)."""
    total = 0.0
    for line in output.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "_aws" in record and name in record:
            value = record[name]
            total += sum(value) if isinstance(value, list) else float(value)
    return total


def slack_text(results: list[ReplayResult]) -> str:
    return json.dumps([m for r in results for m in r.slack])


@pytest.fixture
def sink() -> Iterator[SlackSink]:
    with SlackSink() as running:
        yield running


# -- 1. added samples can only make a resource look busier -----------------------------------------


def test_a_busy_gpu_diluted_with_99_zeros_a_minute_is_not_idle_and_not_stopped(
    sink: SlackSink, sleeps: list[float]
) -> None:
    fleet = world(
        instances=[
            instance(BUSY, gpu_metrics={"gpus": [gpu_at(0, 94.0)]}),
            instance(IDLE, gpu_metrics={"pattern": "idle"}),
        ]
    )
    with LocalStack(fleet, sink=sink, mode="remediate", until=LATER) as stack:
        [dims] = series_of("InstanceId", BUSY)
        dilute(GPU_NAMESPACE, GPU_METRIC, dims, NOW - timedelta(minutes=40), LATER)
        # The attack is real: read as an Average, the 94% GPU is under the 5% idle threshold every minute.
        assert busiest_minute(GPU_NAMESPACE, GPU_METRIC, dims, "Average") < 1.0
        assert busiest_minute(GPU_NAMESPACE, GPU_METRIC, dims, "Maximum") == 94.0

        results = replay(stack, [GPU_SWEEP, GPU_SWEEP_LATER])
        assert all(r.ok for r in results), [r.error for r in results]
        assert decided(results, BUSY) == []
        assert MARK_TAG_KEY not in ec2_tags(BUSY)
        assert ec2_instance(BUSY)["State"]["Name"] == "running"
        # The flow is live: the idle instance beside it is marked, then stopped.
        assert decided(results, IDLE) == [("gpu_idle", "mark"), ("gpu_idle", "stop")]
        assert ec2_instance(IDLE)["State"]["Name"] in ("stopping", "stopped")


def test_a_busy_training_job_and_notebook_diluted_with_zeros_are_not_stalled_nor_stopped(
    sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    account = world(
        training_jobs=[job(BUSY_JOB, "busy"), job(HUNG_JOB, "idle")],
        notebooks=[{"name": BUSY_NOTEBOOK, "instance_type": "ml.g5.xlarge", "gpu_pattern": "busy"}],
    )
    sweeps = [SAGEMAKER_SWEEP, later(SAGEMAKER_SWEEP, tmp_path, "c0ffee00-0000-4000-8000-00000000d302")]
    with LocalStack(account, sink=sink, mode="remediate", until=LATER) as stack:
        [host] = series_of("Host", f"{BUSY_JOB}/algo-1", TRAINING_NAMESPACE, TRAINING_GPU_METRIC)
        dilute(TRAINING_NAMESPACE, TRAINING_GPU_METRIC, host, NOW - timedelta(minutes=40), LATER)
        assert busiest_minute(TRAINING_NAMESPACE, TRAINING_GPU_METRIC, host, "Average") < 1.0
        [notebook_gpu] = series_of("NotebookInstanceName", BUSY_NOTEBOOK)
        dilute(GPU_NAMESPACE, GPU_METRIC, notebook_gpu, NOW - timedelta(minutes=40), LATER)
        assert busiest_minute(GPU_NAMESPACE, GPU_METRIC, notebook_gpu, "Average") < 1.0

        results = replay(stack, sweeps)
        assert all(r.ok for r in results), [r.error for r in results]
        for name in (BUSY_JOB, BUSY_NOTEBOOK):
            assert decided(results, name) == []
        assert job_status(BUSY_JOB) == "InProgress"
        assert MARK_TAG_KEY not in sagemaker_tags("training-job", BUSY_JOB)
        assert notebook_status(BUSY_NOTEBOOK) == "InService"
        # The hung job beside them is still stopped: the sweep is live.
        assert decided(results, HUNG_JOB) == [("job_stalled", "mark"), ("job_stalled", "stop")]
        assert job_status(HUNG_JOB) == "Stopped"


# -- 2. one bad series never stops a sweep --------------------------------------------------------


def test_a_series_with_a_non_numeric_gpu_index_is_skipped_logged_and_counted(
    sink: SlackSink, sleeps: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    fleet = world(
        instances=[
            instance(IDLE, gpu_metrics={"pattern": "idle"}),
            instance(IDLE_2, gpu_metrics={"pattern": "idle"}),
            instance(IDLE_3, gpu_metrics={"pattern": "idle"}),
            instance(BUSY, gpu_metrics={"pattern": "busy"}),
        ]
    )
    with LocalStack(fleet, sink=sink) as stack:
        bad = [
            {"Name": "InstanceId", "Value": IDLE_2},
            {"Name": "index", "Value": "gpu0"},
            {"Name": "name", "Value": "NVIDIA A10G"},
        ]
        at = NOW - timedelta(minutes=1)
        clients.cloudwatch().put_metric_data(
            Namespace=GPU_NAMESPACE,
            MetricData=[{"MetricName": GPU_METRIC, "Dimensions": bad, "Timestamp": at, "Value": 0.0}],
        )
        with caplog.at_level(logging.WARNING):
            [result] = replay(stack, [GPU_SWEEP])
        assert result.ok, result.error
        assert {f["resource_id"]: f["reason"] for f in result.findings} == {
            IDLE: "gpu_idle",
            IDLE_2: "gpu_idle",  # its own series is still read: only the bad one is skipped
            IDLE_3: "gpu_idle",
        }
        [logged] = [r for r in caplog.records if r.getMessage() == "unreadable GPU series skipped"]
        assert (logged.resource, logged.index) == (IDLE_2, "gpu0")  # type: ignore[attr-defined]
        sweep = dict(load_event(GPU_SWEEP.name), id="c0ffee00-0000-4000-8000-00000000d201")
        invocation = stack.invoke("GpuIdleFunction", sweep)
        assert emf_count(invocation.output, "UnreadableGpuSeries") == 1


def test_a_notebook_series_with_a_non_numeric_gpu_index_does_not_stop_the_sagemaker_sweep(
    sink: SlackSink, sleeps: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    account = world(
        training_jobs=[job(HUNG_JOB, "idle")],
        notebooks=[
            {"name": IDLE_NOTEBOOK, "instance_type": "ml.g5.xlarge", "gpu_pattern": "idle"},
            {"name": BUSY_NOTEBOOK, "instance_type": "ml.g5.xlarge", "gpu_pattern": "busy"},
        ],
    )
    with LocalStack(account, sink=sink) as stack:
        bad = [{"Name": "NotebookInstanceName", "Value": BUSY_NOTEBOOK}, {"Name": "index", "Value": "gpu0"}]
        at = NOW - timedelta(minutes=1)
        clients.cloudwatch().put_metric_data(
            Namespace=GPU_NAMESPACE,
            MetricData=[{"MetricName": GPU_METRIC, "Dimensions": bad, "Timestamp": at, "Value": 0.0}],
        )
        with caplog.at_level(logging.WARNING):
            [result] = replay(stack, [SAGEMAKER_SWEEP])
        assert result.ok, result.error
        assert {f["resource_id"]: f["reason"] for f in result.findings} == {
            HUNG_JOB: "job_stalled",
            IDLE_NOTEBOOK: "notebook_idle",
        }
        [logged] = [r for r in caplog.records if r.getMessage() == "unreadable GPU series skipped"]
        assert (logged.resource, logged.index) == (f"notebook-instance/{BUSY_NOTEBOOK}", "gpu0")  # type: ignore[attr-defined]


# -- 3. nothing silent ------------------------------------------------------------------------------


def test_alarms_that_match_no_running_gpu_instance_are_logged_counted_and_reported(
    sink: SlackSink, sleeps: list[float], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fleet = world(
        instances=[
            instance(IDLE, gpu_metrics={"pattern": "idle"}),
            instance(TERMINATED, state="terminated"),
            instance(CPU_ONLY, "m5.large"),
        ]
    )
    alarms = {
        GONE: f"costguard-gpu-idle-{GONE}",  # never existed here, or long gone
        TERMINATED: f"costguard-gpu-idle-{TERMINATED}",
        CPU_ONLY: f"costguard-gpu-idle-{CPU_ONLY}",
        "unparsed": "costguard-gpu-idle-gpu-box-7",
    }
    events = {key: alarm_event(tmp_path, name, n) for n, (key, name) in enumerate(alarms.items(), start=1)}
    with LocalStack(fleet, sink=sink) as stack, caplog.at_level(logging.WARNING):
        results = {key: replay(stack, [path])[0] for key, path in events.items()}
        for key, result in results.items():
            assert result.ok, (key, result.error)
            [finding] = result.findings
            assert (finding["reason"], finding["resource_id"]) == ("gpu_alarm_unmatched", alarms[key])
            assert finding["resource_kind"] == "costguard_alarm"
            [decision] = result.decisions
            assert decision["action"] == "notify"
            [message] = result.slack
            assert alarms[key] in json.dumps(message)
        assert "does not exist" in results[GONE].findings[0]["summary"]
        assert "terminated" in results[TERMINATED].findings[0]["summary"]
        assert "no NVIDIA GPU" in results[CPU_ONLY].findings[0]["summary"]
        assert "does not end in an EC2 instance id" in results["unparsed"].findings[0]["summary"]
        logged = [
            r for r in caplog.records if r.getMessage() == "GPU alarm matches no running NVIDIA GPU instance"
        ]
        assert sorted(r.alarm for r in logged) == sorted(alarms.values())  # type: ignore[attr-defined]
        # The alarm of a running idle GPU instance is still judged as before.
        [judged] = replay(stack, [alarm_event(tmp_path, f"costguard-gpu-idle-{IDLE}", 9)])
        assert [(f["reason"], f["resource_id"]) for f in judged.findings] == [("gpu_idle", IDLE)]
        invocation = stack.invoke(
            "GpuIdleFunction", json.loads(events[GONE].read_text()) | {"id": "x-gone-2"}
        )
        assert emf_count(invocation.output, "UnmatchedGpuAlarms") == 1


def test_an_instance_with_a_silent_gpu_is_reported_partial_once_and_never_stopped(
    sink: SlackSink, sleeps: list[float]
) -> None:
    # Four A10Gs: 0-2 idle, 3 publishes nothing. Remediate mode, marked long ago: still never stopped.
    marked = (NOW - timedelta(hours=2)).isoformat()
    fleet = world(
        instances=[
            instance(
                PARTIAL,
                "g5.12xlarge",
                tags={MARK_TAG_KEY: marked},
                gpu_metrics={"pattern": "idle", "gpus": [{"index": 3, "pattern": "none"}]},
            ),
            instance(IDLE, gpu_metrics={"pattern": "idle"}),
        ]
    )
    with LocalStack(fleet, sink=sink, mode="remediate", until=LATER) as stack:
        first, second = replay(stack, [GPU_SWEEP, GPU_SWEEP_LATER])
        assert first.ok and second.ok, (first.error, second.error)
        assert decided([first], PARTIAL) == [
            ("gpu_metrics_partial", "notify"),
            ("gpu_active_again", "unmark"),
        ]
        [partial] = [f for f in first.findings if f["reason"] == "gpu_metrics_partial"]
        assert partial["evidence"]["reporting_gpus"] == "0-2"
        assert partial["evidence"]["silent_gpus"] == "3"
        assert "GPU 0-2 only" in partial["summary"]
        text = slack_text([first])
        assert "gpu_metrics_partial" in text and "GPU 3" in text
        # Twenty minutes later: the same verdict, within the repeat window: decided, not posted again.
        assert decided([second], PARTIAL) == [("gpu_metrics_partial", "notify")]
        assert "gpu_metrics_partial" not in slack_text([second])
        assert second.output["suppressed"] >= 1
        assert ec2_instance(PARTIAL)["State"]["Name"] == "running"
        assert MARK_TAG_KEY not in ec2_tags(PARTIAL)


def test_a_notebook_with_a_silent_gpu_is_reported_partial_never_idle(
    sink: SlackSink, sleeps: list[float]
) -> None:
    account = world(
        notebooks=[{"name": IDLE_NOTEBOOK, "instance_type": "ml.g5.12xlarge", "gpu_pattern": "none"}]
    )
    with LocalStack(account, sink=sink, mode="remediate") as stack:
        # The agent publishes GPUs 0-2 of the four, all idle; GPU 3 publishes nothing.
        data = [
            datum(
                GPU_METRIC,
                [
                    {"Name": "NotebookInstanceName", "Value": IDLE_NOTEBOOK},
                    {"Name": "index", "Value": str(index)},
                    {"Name": "name", "Value": "NVIDIA A10G"},
                ],
                NOW - timedelta(minutes=minute),
                1.0,
                "Percent",
            )
            for index in range(3)
            for minute in range(1, 180)
        ]
        publish(ACCOUNT, REGION, GPU_NAMESPACE, data)
        [result] = replay(stack, [SAGEMAKER_SWEEP])
        assert result.ok, result.error
        assert decided([result], IDLE_NOTEBOOK) == [("gpu_metrics_partial", "notify")]
        [finding] = result.findings
        assert (finding["evidence"]["reporting_gpus"], finding["evidence"]["silent_gpus"]) == ("0-2", "3")
        assert notebook_status(IDLE_NOTEBOOK) == "InService"
        assert MARK_TAG_KEY not in sagemaker_tags("notebook-instance", IDLE_NOTEBOOK)
