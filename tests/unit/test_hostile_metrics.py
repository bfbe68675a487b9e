"""Hostile and broken metrics, unit by unit: diluted series, unreadable GPU indexes, partial GPU coverage and
alarms that name no instance. The same attacks through the deployed flows: tests/integration/
test_hostile_metrics_flow.py."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from costguard.aws import clients
from costguard.aws.alarms import alarm_instance, instance_of
from costguard.aws.metrics import GPU_STAT, MetricSet, Query, get_metric_data, gpu_index, metric_queries
from costguard.aws.sagemaker_metrics import gpu_queries
from costguard.detect.gpu import (
    Thresholds,
    Verdict,
    gpu_instance_findings,
    numbers,
    read_gpus,
    unmatched_alarm_finding,
)
from costguard.detect.sagemaker import notebook_findings, read_training_job, training_job_findings
from costguard.local.fast_metrics import indexed_metrics
from costguard.local.metric_responder import MetricResponder
from costguard.model import (
    MARK_TAG_KEY,
    Accelerators,
    Ec2Instance,
    NotebookInstance,
    Reason,
    ResourceKind,
    TrainingJob,
)

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
T = Thresholds()
A10G = Accelerators(kind="nvidia_gpu", count=1, model="A10G")
A100X8 = Accelerators(kind="nvidia_gpu", count=8, model="A100")
ACCOUNT, REGION = "123456789012", "us-east-1"
Series = list[tuple[datetime, float]]


def series(value: float, minutes: int = 180) -> Series:
    return [(NOW - timedelta(minutes=minutes - i), value) for i in range(minutes)]


def ec2(tags: dict[str, str] | None = None, accelerators: Accelerators = A100X8) -> Ec2Instance:
    return Ec2Instance(
        "i-0123456789abcdef0",
        "p4d.24xlarge",
        "running",
        ACCOUNT,
        REGION,
        NOW - timedelta(days=1),
        tags or {},
        None,
        accelerators,
    )


# -- the embedded CloudWatch computes each statistic over every datapoint of a period ---------------

DIMS = [{"Name": "InstanceId", "Value": "i-0000000000000000a"}, {"Name": "index", "Value": "0"}]


def _seed_diluted(cloudwatch: Any) -> None:
    """A 94% GPU each minute, with 99 zeros a minute added three ways PutMetricData allows."""
    data: list[dict[str, Any]] = []
    for minute in range(10):
        at = NOW - timedelta(minutes=10 - minute)
        data.append(
            {"MetricName": "g", "Dimensions": DIMS, "Timestamp": at + timedelta(seconds=1), "Value": 94.0}
        )
        if minute % 3 == 0:  # 99 single values
            data += [
                {
                    "MetricName": "g",
                    "Dimensions": DIMS,
                    "Timestamp": at + timedelta(milliseconds=500 * n),
                    "Value": 0.0,
                }
                for n in range(3, 102)
            ]
        elif minute % 3 == 1:  # one Values/Counts entry
            data.append(
                {
                    "MetricName": "g",
                    "Dimensions": DIMS,
                    "Timestamp": at + timedelta(seconds=2),
                    "Values": [0.0],
                    "Counts": [99.0],
                }
            )
        else:  # a statistic set
            stats = {"SampleCount": 99.0, "Sum": 0.0, "Minimum": 0.0, "Maximum": 0.0}
            data.append(
                {
                    "MetricName": "g",
                    "Dimensions": DIMS,
                    "Timestamp": at + timedelta(seconds=2),
                    "StatisticValues": stats,
                }
            )
    for start in range(0, len(data), 500):
        cloudwatch.put_metric_data(Namespace="CWAgent", MetricData=data[start : start + 500])


def _read_stats(cloudwatch: Any) -> dict[str, list[float]]:
    stats = ("Maximum", "Average", "Minimum", "Sum", "SampleCount")
    response = cloudwatch.get_metric_data(
        MetricDataQueries=[
            {
                "Id": f"q{n}",
                "MetricStat": {
                    "Metric": {"Namespace": "CWAgent", "MetricName": "g", "Dimensions": DIMS},
                    "Period": 60,
                    "Stat": stat,
                },
            }
            for n, stat in enumerate(stats)
        ],
        StartTime=NOW - timedelta(minutes=10),
        EndTime=NOW,
    )
    return {stats[int(r["Id"][1:])]: r["Values"] for r in response["MetricDataResults"]}


def test_moto_and_the_fast_path_take_the_maximum_over_every_datapoint_of_a_period() -> None:
    with mock_aws():
        cloudwatch = boto3.client("cloudwatch", region_name=REGION)
        _seed_diluted(cloudwatch)
        moto_own = _read_stats(cloudwatch)
        with indexed_metrics():
            fast = _read_stats(cloudwatch)
    assert fast == moto_own
    assert moto_own["Maximum"] == [94.0] * 10  # the dilution changes nothing
    assert moto_own["SampleCount"] == [100.0] * 10
    assert all(v == pytest.approx(0.94) for v in moto_own["Average"])  # what the attack did to an Average
    assert moto_own["Minimum"] == [0.0] * 10


def test_two_series_of_one_gpu_merge_into_one_point_a_minute_their_maximum() -> None:
    """A second dimension set for GPU 0 (someone else's, or the agent's old one) neither counts a minute twice
    nor pulls anything down."""
    real = [*DIMS, {"Name": "host", "Value": "ip-10-0-0-1"}]
    with mock_aws(), indexed_metrics():
        cloudwatch = clients.cloudwatch(REGION)
        data = [
            {"MetricName": "g", "Dimensions": dims, "Timestamp": NOW - timedelta(minutes=m), "Value": value}
            for m in range(1, 11)
            for dims, value in ((real, 94.0), (DIMS, 0.0))
        ]
        cloudwatch.put_metric_data(Namespace="CWAgent", MetricData=data)
        queries = [
            Query(("i", "gpu", "0"), "CWAgent", "g", tuple((d["Name"], d["Value"]) for d in dims), GPU_STAT)
            for dims in (real, DIMS)
        ]
        read = get_metric_data(REGION, queries, NOW - timedelta(minutes=10), NOW, 60)
    points = read.gpus("i")[0]
    assert [v for _, v in points] == [94.0] * 10
    assert len({t for t, _ in points}) == len(points) == 10


def test_the_metric_responder_serves_its_one_sample_for_any_statistic_of_it() -> None:
    metric = ("CWAgent", "g", (("InstanceId", "i-1"), ("index", "0")))
    responder = MetricResponder([metric], lambda ns, name, dims, times: [42.0 for _ in times])

    def read(stat: str) -> list[float]:
        params = {
            "StartTime": NOW - timedelta(minutes=3),
            "EndTime": NOW,
            "MetricDataQueries": [
                {
                    "Id": "q0",
                    "MetricStat": {
                        "Metric": {
                            "Namespace": "CWAgent",
                            "MetricName": "g",
                            "Dimensions": [
                                {"Name": "InstanceId", "Value": "i-1"},
                                {"Name": "index", "Value": "0"},
                            ],
                        },
                        "Period": 60,
                        "Stat": stat,
                    },
                }
            ],
        }
        values: list[float] = responder.get_metric_data(params)["MetricDataResults"][0]["Values"]
        return values

    assert read("Maximum") == read("Average") == [42.0] * 3
    assert read("SampleCount") == [1.0] * 3
    with pytest.raises(ValueError, match="p95"):
        read("p95")


# -- a series whose index is not a GPU number ------------------------------------------------------


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        ("0", "0"),
        ("7", "7"),
        ("07", "7"),
        (None, "0"),
        ("gpu0", None),
        ("-1", None),
        ("", None),
        ("\u0661", None),  # an Arabic-Indic one: int() reads it, CloudWatch's agent never writes it
        ("1e3", None),
        ("0" * 5, None),
    ],
)
def test_gpu_index_reads_gpu_numbers_only(index: str | None, expected: str | None) -> None:
    dims = (("InstanceId", "i-1"),) + ((("index", index),) if index is not None else ())
    assert gpu_index("i-1", dims) == expected


def test_metric_set_skips_a_sub_key_that_is_not_a_gpu_number() -> None:
    data = MetricSet()
    data.series["i"][("gpu", "0")] = series(1.0, 2)
    data.series["i"][("gpu", "gpu0")] = series(0.0, 2)
    data.series["i"][("cpu", "")] = series(20.0, 2)
    assert list(data.gpus("i")) == [0]


def test_queries_skip_unreadable_series_and_read_gpus_as_their_maximum() -> None:
    instance = ec2(accelerators=A10G)
    good = (("InstanceId", instance.id), ("index", "0"), ("name", "A10G"))
    bad = (("InstanceId", instance.id), ("index", "gpu0"), ("name", "A10G"))
    queries = metric_queries([instance], {instance.id: [good, bad]})
    gpu = [q for q in queries if q.key[1] == "gpu"]
    assert [(q.key, q.dimensions, q.stat) for q in gpu] == [((instance.id, "gpu", "0"), good, "Maximum")]

    job = TrainingJob("j", "arn:j", ACCOUNT, REGION, "ml.g5.xlarge", 2, NOW, {}, A10G)
    notebook = NotebookInstance("n", "arn:n", ACCOUNT, REGION, "ml.g5.xlarge", "InService", {}, A10G)
    nb_good = (("NotebookInstanceName", "n"), ("index", "0"))
    nb_bad = (("NotebookInstanceName", "n"), ("index", "gpu0"))
    made = gpu_queries([job], [notebook], {"n": [nb_good, nb_bad]})
    assert [(q.key, q.stat) for q in made] == [
        (("training-job/j", "gpu", "1"), "Maximum"),
        (("training-job/j", "gpu", "2"), "Maximum"),
        (("notebook-instance/n", "gpu", "0"), "Maximum"),
    ]


# -- partial GPU coverage --------------------------------------------------------------------------


def test_some_gpus_silent_is_partial_whatever_the_others_say() -> None:
    for value in (1.0, 45.0, 92.0):
        reading = read_gpus({i: series(value) for i in range(7)}, NOW, T, 8)
        assert reading.verdict is Verdict.PARTIAL
        assert (reading.reporting, reading.silent) == (tuple(range(7)), (7,))


def test_a_gpu_silent_for_the_idle_window_only_is_partial() -> None:
    gpus = {i: series(1.0) for i in range(4)}
    gpus[2] = series(1.0)[:-40]  # stopped reporting 40 minutes ago
    assert read_gpus(gpus, NOW, T, 4).verdict is Verdict.PARTIAL


def test_a_series_under_another_gpu_number_never_stands_in_for_a_silent_gpu() -> None:
    # One A10G: GPU 0 publishes nothing, but someone publishes zeros as GPU 5.
    reading = read_gpus({5: series(0.0)}, NOW, T, 1)
    assert reading.verdict is Verdict.PARTIAL
    assert (reading.reporting, reading.silent) == ((5,), (0,))
    # ...and beside a reporting GPU 0 it can only make the instance look busier.
    assert read_gpus({0: series(1.0), 5: series(0.0)}, NOW, T, 1).verdict is Verdict.IDLE
    assert read_gpus({0: series(1.0), 5: series(60.0)}, NOW, T, 1).verdict is not Verdict.IDLE


def test_a_partial_instance_is_reported_notify_only_naming_its_gpus() -> None:
    reading = read_gpus({i: series(1.0) for i in (0, 1, 2, 3, 5, 6)}, NOW, T, 8)
    [finding] = gpu_instance_findings(ec2(), reading, price=None, thresholds=T, now=NOW)
    assert finding.reason is Reason.GPU_METRICS_PARTIAL
    assert finding.remediable is False
    assert finding.evidence["reporting_gpus"] == "0-3, 5, 6"
    assert finding.evidence["silent_gpus"] == "4, 7"
    assert "GPU 0-3, 5, 6 only" in finding.summary
    assert finding.repeat_scope == "silent:4, 7"


def test_a_marked_instance_that_turns_partial_loses_its_mark() -> None:
    marked = ec2({MARK_TAG_KEY: (NOW - timedelta(hours=1)).isoformat()})
    reading = read_gpus({i: series(1.0) for i in range(7)}, NOW, T, 8)
    partial, unmark = gpu_instance_findings(marked, reading, price=None, thresholds=T, now=NOW)
    assert (partial.reason, partial.remediable) == (Reason.GPU_METRICS_PARTIAL, False)
    assert (unmark.reason, unmark.cancels_mark) == (Reason.GPU_ACTIVE_AGAIN, True)
    assert "GPU 7 silent" in unmark.summary


def test_a_notebook_with_a_silent_gpu_is_partial_never_idle() -> None:
    four = Accelerators(kind="nvidia_gpu", count=4, model="A10G")
    notebook = NotebookInstance("lab", "arn:lab", ACCOUNT, REGION, "ml.g5.12xlarge", "InService", {}, four)
    reading = read_gpus({i: series(1.0) for i in range(3)}, NOW, T, 4)
    [finding] = notebook_findings(notebook, reading, price=None, thresholds=T, now=NOW)
    assert finding.reason is Reason.GPU_METRICS_PARTIAL
    assert finding.resource.kind is ResourceKind.NOTEBOOK
    assert (finding.evidence["reporting_gpus"], finding.evidence["silent_gpus"]) == ("0-2", "3")


def test_a_training_job_with_a_silent_host_is_never_stalled_and_a_marked_one_loses_its_mark() -> None:
    job = TrainingJob("j", "arn:j", ACCOUNT, REGION, "ml.g5.xlarge", 3, NOW - timedelta(hours=3), {}, A10G)
    reading = read_training_job({1: series(1.0), 3: series(1.0)}, job, NOW, T)
    assert (reading.verdict, reading.silent) == (Verdict.PARTIAL, (2,))
    assert training_job_findings(job, reading, price=None, thresholds=T, now=NOW) == []
    marked = replace(job, tags={MARK_TAG_KEY: NOW.isoformat()})
    [unmark] = training_job_findings(marked, reading, price=None, thresholds=T, now=NOW)
    assert unmark.cancels_mark and "j/algo-2" in unmark.summary


def test_numbers_shorten_runs() -> None:
    assert numbers([7, 0, 1, 2, 3, 5]) == "0-3, 5, 7"
    assert numbers([0, 1]) == "0, 1"
    assert numbers([]) == ""


# -- alarms that name no running GPU instance --------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "instance_id"),
    [
        ("costguard-gpu-idle-i-0a1f00000000000a1", "i-0a1f00000000000a1"),
        ("costguard-gpu-idle-gpu-box-7", None),
        ("costguard-gpu-idle-i-0A1F00000000000A1", None),
        ("costguard-gpu-idle-i-0a1f00000000000a1-old", None),
        ("costguard-ops-notifier", None),
        ("someone-elses-alarm", None),
    ],
)
def test_an_alarm_names_an_instance_only_when_it_is_the_prefix_and_an_instance_id(
    name: str, instance_id: str | None
) -> None:
    assert alarm_instance(name) == instance_id


def test_the_reconcile_still_sees_every_alarm_under_the_prefix() -> None:
    assert instance_of("costguard-gpu-idle-gpu-box-7") == "gpu-box-7"  # so it deletes it


@pytest.mark.parametrize(
    ("instance_id", "instance", "says"),
    [
        (None, None, "does not end in an EC2 instance id"),
        ("i-0123456789abcdef0", None, "does not exist"),
        (
            "i-0123456789abcdef0",
            Ec2Instance("i-0123456789abcdef0", "g5.xlarge", "stopped", ACCOUNT, REGION, None),
            "stopped",
        ),
        (
            "i-0123456789abcdef0",
            Ec2Instance("i-0123456789abcdef0", "m5.large", "running", ACCOUNT, REGION, None),
            "no NVIDIA GPU",
        ),
    ],
)
def test_an_unmatched_alarm_is_a_notify_only_finding_about_the_alarm(
    instance_id: str | None, instance: Ec2Instance | None, says: str
) -> None:
    name = f"costguard-gpu-idle-{instance_id or 'gpu-box-7'}"
    finding = unmatched_alarm_finding(
        name,
        account=ACCOUNT,
        region=REGION,
        now=NOW,
        instance_id=instance_id,
        instance=instance,
        event_id="e",
    )
    assert finding.reason is Reason.GPU_ALARM_UNMATCHED
    assert finding.remediable is False
    assert (finding.resource.kind, finding.resource.id) == (ResourceKind.COSTGUARD_ALARM, name)
    assert says in finding.summary
    assert finding.evidence["instance_id"] == instance_id


def test_the_audit_skips_a_series_whose_index_is_not_a_gpu_number() -> None:
    from costguard.audit.model import Subject
    from costguard.audit.reading import queries_for

    subject = Subject(
        kind=ResourceKind.EC2_INSTANCE,
        id="i-0123456789abcdef0",
        account=ACCOUNT,
        region=REGION,
        instance_type="g5.xlarge",
    )
    with mock_aws(), indexed_metrics():
        for index in ("0", "gpu0"):
            dims = [{"Name": "InstanceId", "Value": subject.id}, {"Name": "index", "Value": index}]
            clients.cloudwatch(REGION).put_metric_data(
                Namespace="CWAgent",
                MetricData=[
                    {
                        "MetricName": "nvidia_smi_utilization_gpu",
                        "Dimensions": dims,
                        "Value": 1.0,
                        "Timestamp": NOW,
                    }
                ],
            )
        queries = queries_for(REGION, [subject])
    assert {q.key[2] for q in queries if q.key[1] in ("gpu", "memory")} == {"0"}
