"""The embedded stack publishes an instance's series only while its owner had it running, as EC2 and the
CloudWatch agent do: a world timeline's stopped hours have no datapoints."""

from __future__ import annotations

from datetime import timedelta

from costguard.aws import clients
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import TimelinePeriod, World

IDLE_P4D = "i-0a1f00000000000a1"


def test_stopped_hours_of_a_timeline_publish_nothing(world: World, sink: SlackSink) -> None:
    now = world.now
    stopped_from, stopped_until = now - timedelta(minutes=90), now - timedelta(minutes=40)
    timeline = [
        TimelinePeriod(state="running", end=stopped_from),
        TimelinePeriod(state="stopped", start=stopped_from, end=stopped_until),
        TimelinePeriod(state="running", start=stopped_until),
    ]
    instances = [
        i.model_copy(update={"timeline": timeline}) if i.id == IDLE_P4D else i for i in world.instances
    ]
    with LocalStack(world.model_copy(update={"instances": instances}), sink=sink):
        cloudwatch = clients.cloudwatch(world.region)
        for namespace, metric, extra in (
            ("AWS/EC2", "CPUUtilization", []),
            ("CWAgent", "nvidia_smi_utilization_gpu", [{"Name": "index", "Value": "0"}]),
        ):
            series = cloudwatch.list_metrics(
                Namespace=namespace,
                MetricName=metric,
                Dimensions=[{"Name": "InstanceId", "Value": IDLE_P4D}, *extra],
            )["Metrics"]
            assert series, metric
            points = cloudwatch.get_metric_data(
                MetricDataQueries=[
                    {
                        "Id": "q",
                        "MetricStat": {"Metric": series[0], "Period": 60, "Stat": "Maximum"},
                    }
                ],
                StartTime=now - timedelta(minutes=150),
                EndTime=now,
            )["MetricDataResults"][0]["Timestamps"]
            assert points, metric
            assert not [t for t in points if stopped_from <= t < stopped_until], metric
            assert [t for t in points if t < stopped_from] and [t for t in points if t >= stopped_until], (
                metric
            )
