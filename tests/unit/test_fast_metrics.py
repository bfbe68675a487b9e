"""The local stack's indexed GetMetricData and ListMetrics give what moto's own give, once per series."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from moto import mock_aws

from costguard.local.fast_metrics import indexed_metrics

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def _seed(cloudwatch: Any) -> None:
    data = []
    for instance in ("i-0000000000000000a", "i-0000000000000000b"):
        for index in range(3):
            dims = [
                {"Name": "InstanceId", "Value": instance},
                {"Name": "index", "Value": str(index)},
                {"Name": "name", "Value": "A100"},
            ]
            for minute in range(20):
                value = float((minute * 7 + index * 13) % 100)
                data.append(
                    {
                        "MetricName": "nvidia_smi_utilization_gpu",
                        "Dimensions": dims,
                        "Timestamp": NOW - timedelta(minutes=20 - minute, seconds=10),
                        "Value": value,
                    }
                )
    for start in range(0, len(data), 500):
        cloudwatch.put_metric_data(Namespace="CWAgent", MetricData=data[start : start + 500])


def _queries() -> list[dict[str, Any]]:
    return [
        {
            "Id": f"q{n}",
            "MetricStat": {
                "Metric": {
                    "Namespace": "CWAgent",
                    "MetricName": "nvidia_smi_utilization_gpu",
                    "Dimensions": [
                        {"Name": "InstanceId", "Value": instance},
                        {"Name": "index", "Value": str(index)},
                        {"Name": "name", "Value": "A100"},
                    ],
                },
                "Period": period,
                "Stat": stat,
            },
        }
        for n, (instance, index, period, stat) in enumerate(
            [
                ("i-0000000000000000a", 0, 60, "Average"),
                ("i-0000000000000000a", 2, 300, "Maximum"),
                ("i-0000000000000000b", 1, 300, "Sum"),
                ("i-0000000000000000b", 9, 60, "Average"),  # no such series
            ]
        )
    ]


def _read(cloudwatch: Any) -> list[tuple[str, list[Any], list[float]]]:
    response = cloudwatch.get_metric_data(
        MetricDataQueries=_queries(), StartTime=NOW - timedelta(minutes=30), EndTime=NOW
    )
    return [(r["Id"], r["Timestamps"], r["Values"]) for r in response["MetricDataResults"]]


def test_indexed_get_metric_data_matches_moto() -> None:
    with mock_aws():
        cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
        _seed(cloudwatch)
        expected = _read(cloudwatch)
        with indexed_metrics():
            actual = _read(cloudwatch)
    assert actual == expected
    assert any(values for _, _, values in expected)  # the comparison is about real data


def test_indexed_list_metrics_lists_each_series_once() -> None:
    with mock_aws():
        cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
        _seed(cloudwatch)
        filters = {
            "Namespace": "CWAgent",
            "Dimensions": [{"Name": "InstanceId", "Value": "i-0000000000000000a"}],
        }
        with indexed_metrics():
            metrics = cloudwatch.list_metrics(**filters)["Metrics"]
    keys = [tuple(sorted((d["Name"], d["Value"]) for d in m["Dimensions"])) for m in metrics]
    assert len(keys) == len(set(keys)) == 3
    assert all(("InstanceId", "i-0000000000000000a") in k for k in keys)
