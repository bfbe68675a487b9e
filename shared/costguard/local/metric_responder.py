"""GetMetricData and ListMetrics answered in-process from generated series, at CloudWatch's own limits.

For reads of fleet size over days (a backtest reads millions of datapoints) moto's CloudWatch is far too
slow, even indexed (local/fast_metrics.py). This answers the real boto3 client of the cached factory from a
function of (dimensions, time), through local/responder.py: the request is still validated against the service
model and counted in ``clients.calls``; only the HTTP exchange is replaced. Like CloudWatch, it returns at most
500 queries and 100,800 datapoints per call and pages the rest with NextToken.

The function gives one sample per period, so each period's Average, Maximum, Minimum and Sum are that sample
and its SampleCount is 1; any other statistic (a percentile) is refused rather than answered wrongly. Several
datapoints in one period, and what each statistic makes of them, are the embedded CloudWatch's business
(local/fast_metrics.py, moto's own Statistics).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from costguard.local.responder import Responder

MAX_DATAPOINTS = 100_800
LIST_PAGE = 500
# One sample per period: these statistics of it are the sample itself (SampleCount is 1).
SAMPLE_STATS = frozenset({"Average", "Maximum", "Minimum", "Sum"})

Dimensions = tuple[tuple[str, str], ...]
ValueAt = Callable[[str, str, Dimensions, list[datetime]], list[float | None]]


class MetricResponder(Responder):
    """Serves ``metrics`` (namespace, metric name, dimensions) with values from ``values``."""

    def __init__(self, metrics: Sequence[tuple[str, str, Dimensions]], values: ValueAt) -> None:
        super().__init__(
            {"GetMetricData": self.get_metric_data, "ListMetrics": self.list_metrics},
            "https://monitoring.invalid/",
        )
        self.metrics = list(metrics)
        self.values = values

    def list_metrics(self, params: dict[str, Any]) -> dict[str, Any]:
        wanted = {(d["Name"], d.get("Value")) for d in params.get("Dimensions", [])}
        found = [
            {"Namespace": ns, "MetricName": name, "Dimensions": [{"Name": k, "Value": v} for k, v in dims]}
            for ns, name, dims in self.metrics
            if ns == params.get("Namespace", ns)
            and name == params.get("MetricName", name)
            and all((k, v) in dims or (v is None and k in dict(dims)) for k, v in wanted)
        ]
        offset = int(params.get("NextToken", "0"))
        page: dict[str, Any] = {"Metrics": found[offset : offset + LIST_PAGE]}
        if offset + LIST_PAGE < len(found):
            page["NextToken"] = str(offset + LIST_PAGE)
        return page

    def get_metric_data(self, params: dict[str, Any]) -> dict[str, Any]:
        start, end = params["StartTime"], params["EndTime"]
        queries = params["MetricDataQueries"]
        if len(queries) > 500:
            raise ValueError("GetMetricData takes at most 500 queries")
        # The token says where the last page stopped: query number and datapoint offset within it.
        query_at, point_at = (int(part) for part in params.get("NextToken", "0:0").split(":"))
        for query in queries:
            asked = query["MetricStat"]["Stat"]
            if asked not in SAMPLE_STATS and asked != "SampleCount":
                raise ValueError(f"the metric responder serves one sample per period: no {asked} of it")
        budget = MAX_DATAPOINTS
        results = []
        while query_at < len(queries) and budget > 0:
            query = queries[query_at]
            stat = query["MetricStat"]
            period = timedelta(seconds=int(stat["Period"]))
            times = _times(start, end, period)
            metric = stat["Metric"]
            dims = tuple(sorted((d["Name"], d["Value"]) for d in metric.get("Dimensions", [])))
            values = self.values(metric["Namespace"], metric["MetricName"], dims, times)
            if stat["Stat"] == "SampleCount":
                values = [None if v is None else 1.0 for v in values]
            points = [(t, v) for t, v in zip(times, values, strict=True) if v is not None]
            chunk = points[point_at : point_at + budget]
            budget -= len(chunk)
            done = point_at + len(chunk) >= len(points)
            results.append(
                {
                    "Id": query["Id"],
                    "Label": metric["MetricName"],
                    "Timestamps": [t for t, _ in chunk],
                    "Values": [v for _, v in chunk],
                    "StatusCode": "Complete" if done else "PartialData",
                }
            )
            if done:
                query_at, point_at = query_at + 1, 0
            else:
                point_at += len(chunk)
        body: dict[str, Any] = {"MetricDataResults": results, "Messages": []}
        if query_at < len(queries):
            body["NextToken"] = f"{query_at}:{point_at}"
        return body


@lru_cache(maxsize=8)
def _times(start: datetime, end: datetime, period: timedelta) -> list[datetime]:
    # Timestamps on period boundaries, as CloudWatch aligns them.
    seconds = int(period.total_seconds())
    first = datetime.fromtimestamp(-(-int(start.timestamp()) // seconds) * seconds, tz=start.tzinfo)
    count = max(0, -(-(end - first) // period))
    return [first + period * n for n in range(count)]
