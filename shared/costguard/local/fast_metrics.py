"""Indexed GetMetricData and ListMetrics for the embedded AWS.

moto's GetMetricData scans every datapoint for every query and every period, which takes minutes for a
small GPU fleet; its ListMetrics compares every datapoint with every other and, for metrics with more than
one dimension, returns one entry per datapoint instead of one per series. These compute the same MetricStat
results from an index of the backend's datapoints by series, extended as points are added (queries with
expressions still go to moto's own code), and list each series once. A test compares them with moto's own on
the same data.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any
from unittest import mock

from moto.cloudwatch.exceptions import ValidationError
from moto.cloudwatch.models import CloudWatchBackend, MetricDatumBase, Statistics

_original = CloudWatchBackend.get_metric_data

Key = tuple[str, str, frozenset[tuple[str, str]]]


def _key(namespace: str, name: str, dimensions: Any) -> Key:
    return namespace, name, frozenset((d.name, d.value) for d in dimensions or [])


def get_metric_data(
    self: CloudWatchBackend,
    queries: list[dict[str, Any]],
    start_time: datetime,
    end_time: datetime,
    scan_by: str = "TimestampAscending",
) -> list[dict[str, Any]]:
    if any("MetricStat" not in q for q in queries):
        return _original(self, queries, start_time, end_time, scan_by)
    start_time, end_time = start_time.replace(microsecond=0), end_time.replace(microsecond=0)
    if start_time >= end_time:
        raise ValidationError("The parameter EndTime must be greater than StartTime.")
    own, provided = _series(self)
    results = []
    for query in queries:
        stat = query["MetricStat"]
        metric = stat["Metric"]
        period = timedelta(seconds=int(stat["Period"]))
        dims = frozenset((d["Name"], d["Value"]) for d in metric.get("Dimensions", []))
        buckets: dict[int, list[MetricDatumBase]] = defaultdict(list)
        key = (metric["Namespace"], metric["MetricName"], dims)
        for datum in [*own.get(key, ()), *provided.get(key, ())]:
            if not start_time <= datum.timestamp < end_time:
                continue
            if stat.get("Unit") and datum.unit != stat["Unit"]:
                continue
            buckets[int((datum.timestamp - start_time) / period)].append(datum)
        timestamps, values = [], []
        for slot in sorted(buckets):
            at = start_time + slot * period
            statistics = Statistics([stat["Stat"]], at)
            statistics.metric_data = buckets[slot]
            timestamps.append(at)
            values.append(statistics.get_statistics_for_type(stat["Stat"]))
        if scan_by == "TimestampDescending":
            timestamps.reverse()
            values.reverse()
        if query.get("ReturnData", True):
            results.append(
                {
                    "id": query["Id"],
                    "label": query.get("Label") or f"{metric['MetricName']} {stat['Stat']}",
                    "values": values,
                    "timestamps": timestamps,
                    "status_code": "Complete",
                }
            )
    return results


def _series(
    backend: CloudWatchBackend,
) -> tuple[dict[Key, list[MetricDatumBase]], dict[Key, list[MetricDatumBase]]]:
    """Every datapoint of the backend by series. Its own (PutMetricData's, which moto only ever appends) are
    indexed as they come, once each, rather than at every call: a sweep's calls each scanned them all. The
    services' own metrics (moto's providers) are read afresh at each call."""
    data = backend.metric_data
    state = backend.__dict__.get("_costguard_series")
    if state is None or state[0] is not data or state[1] > len(data):
        state = backend.__dict__["_costguard_series"] = [data, 0, defaultdict(list)]
    own: defaultdict[Key, list[MetricDatumBase]] = state[2]
    for datum in data[state[1] :]:
        own[_key(datum.namespace, datum.name, datum.dimensions)].append(datum)
    state[1] = len(data)
    provided: dict[Key, list[MetricDatumBase]] = defaultdict(list)
    for datum in backend.aws_metric_data:
        provided[_key(datum.namespace, datum.name, datum.dimensions)].append(datum)
    return own, provided


def get_filtered_metrics(
    self: CloudWatchBackend, metric_name: str, namespace: str, dimensions: list[dict[str, str]]
) -> list[MetricDatumBase]:
    wanted = {(d["Name"], d.get("Value")) for d in dimensions or []}
    series: dict[Key, MetricDatumBase] = {}
    for datum in self.get_all_metrics():
        if (namespace and datum.namespace != namespace) or (metric_name and datum.name != metric_name):
            continue
        key = _key(datum.namespace, datum.name, datum.dimensions)
        if key in series:
            continue
        have = set(key[2])
        if all(
            (name, value) in have or (value is None and any(n == name for n, _ in have))
            for name, value in wanted
        ):
            series[key] = datum
    return list(series.values())


@contextlib.contextmanager
def indexed_metrics() -> Iterator[None]:
    with (
        mock.patch.object(CloudWatchBackend, "get_metric_data", get_metric_data),
        mock.patch.object(CloudWatchBackend, "get_filtered_metrics", get_filtered_metrics),
    ):
        yield
