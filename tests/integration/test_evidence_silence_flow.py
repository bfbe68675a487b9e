"""Silence is "cannot tell", never "idle", and an impossible reading is no reading: issue 38, cases 7 and 8,
through the embedded stack (the sweeps' events, the functions, the notifier, Slack).

- a Bedrock throughput opted in to auto-delete whose invocations are published under a ModelId costguard does not
  read (AWS does not document which one a provisioned model's carry) is told "cannot tell" and never deleted;
- a genuinely idle opted-in throughput, whose series exists (ListMetrics) with no datapoints in the window, is
  still deleted after the grace period;
- GPUUtilization = -400 on a busy endpoint gives no endpoint_underused advice, and says why;
- a busy asynchronous endpoint (InvocationsProcessed, no Invocations) and a busy endpoint hosting inference
  components (Invocations per InferenceComponentName) are not endpoint_idle.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from costguard.aws import clients
from costguard.local.replay import ReplayResult, replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.model import MARK_TAG_KEY
from tests.conftest import EVENTS

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
ACCOUNT, REGION = "123456789012", "us-east-1"
CAPACITY_SWEEP = EVENTS / "schedule-capacity-sweep.json"
SAGEMAKER_SWEEP = EVENTS / "schedule-sagemaker-sweep.json"
OPTED_IN = {"team": "nlp", "costguard:auto-delete": "true"}
PRICES = "amazon.titan-text-express-v1=20.50"


def world(**parts: Any) -> World:
    return World.model_validate({"account": ACCOUNT, "region": REGION, "now": NOW} | parts)


def throughput(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "name": name,
        "model": "amazon.titan-text-express-v1",
        "created": NOW - timedelta(days=10),
        "tags": OPTED_IN,
    } | spec


def later(event: Path, tmp_path: Path, at: datetime, number: int) -> Path:
    payload = json.loads(event.read_text())
    payload |= {"id": f"c0ffee00-0000-4000-8000-{number:012d}", "time": at.strftime("%Y-%m-%dT%H:%M:%SZ")}
    path = tmp_path / f"{event.stem}-{number}.json"
    path.write_text(json.dumps(payload))
    return path


def put(namespace: str, name: str, dims: dict[str, str], values: list[tuple[datetime, float]]) -> None:
    """Datapoints put into the embedded CloudWatch as anyone with cloudwatch:PutMetricData could."""
    clients.cloudwatch(REGION).put_metric_data(
        Namespace=namespace,
        MetricData=[
            {
                "MetricName": name,
                "Dimensions": [{"Name": k, "Value": v} for k, v in dims.items()],
                "Timestamp": at,
                "Value": value,
            }
            for at, value in values
        ],
    )


def hourly(hours: int, value: float) -> list[tuple[datetime, float]]:
    return [(NOW - timedelta(hours=h, minutes=30), value) for h in range(hours)]


def findings(results: list[ReplayResult], name: str) -> list[dict[str, Any]]:
    return [f for r in results for f in r.findings if f["resource_id"] == name]


def deleted_names(stack: LocalStack) -> set[str]:
    return {stack.bedrock.by_arn[arn][1].name for arn in stack.bedrock.deleted}


def test_an_opted_in_throughput_whose_invocations_carry_an_unread_model_id_is_cannot_tell_and_never_deleted(
    sink: SlackSink, tmp_path: Path
) -> None:
    busy = world(provisioned_throughputs=[throughput("translate-pt")], bedrock_throughput_prices=PRICES)
    with LocalStack(busy, sink=sink, mode="remediate") as stack:
        [arn] = stack.bedrock.by_arn
        ident = arn.rsplit("/", 1)[-1]
        # Busy all day, under a spelling AWS might use and costguard does not read.
        put("AWS/Bedrock", "Invocations", {"ModelId": f"provisioned/{ident}"}, hourly(30, 300.0))
        results = replay(stack, [CAPACITY_SWEEP])
        results += replay(stack, [later(CAPACITY_SWEEP, tmp_path, NOW + timedelta(hours=1), 1)])
        results += replay(stack, [later(CAPACITY_SWEEP, tmp_path, NOW + timedelta(hours=2), 2)])
        tags = stack.bedrock.tags[arn]
        deleted = deleted_names(stack)
    assert all(r.ok for r in results), [r.error for r in results]
    assert deleted == set() and MARK_TAG_KEY not in tags
    assert len(ident) == 12 and ident != "translate-pt"  # a real ARN's shape: the name is not in it
    found = findings(results, "translate-pt")
    assert {f["reason"] for f in found} == {"gpu_metrics_missing"}
    assert "cannot tell whether it is used" in found[0]["summary"]
    decisions = [d for r in results for d in r.decisions if d["resource_id"] == "translate-pt"]
    assert {d["action"] for d in decisions} <= {"notify", "none"}
    # Said once, not every sweep.
    told = [m for m in sink.messages if "translate-pt" in json.dumps(m)]
    assert len(told) == 1, told


def test_an_idle_opted_in_throughput_whose_series_exists_is_still_deleted_after_the_grace_period(
    sink: SlackSink, tmp_path: Path
) -> None:
    idle = world(
        provisioned_throughputs=[
            throughput(
                "support-bot-pt",
                invocations_per_hour=120,
                invocations_model_id="arn",
                invoked_until=NOW - timedelta(days=2),  # the series exists; nothing in the last 24 hours
            )
        ],
        bedrock_throughput_prices=PRICES,
    )
    with LocalStack(idle, sink=sink, mode="remediate") as stack:
        [first] = replay(stack, [CAPACITY_SWEEP])
        [second] = replay(stack, [later(CAPACITY_SWEEP, tmp_path, NOW + timedelta(hours=1), 3)])
        deleted = deleted_names(stack)
    assert first.ok and second.ok, (first.error, second.error)
    [finding] = findings([first], "support-bot-pt")
    assert finding["reason"] == "bedrock_throughput_idle"
    assert finding["evidence"]["series"] == [next(iter(stack.bedrock.by_arn))]
    assert deleted == {"support-bot-pt"}


def endpoint(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "name": name,
        "instance_type": "ml.g5.12xlarge",
        "created": NOW - timedelta(days=10),
        "tags": {"team": "support"},
    } | spec


def sagemaker_sweep(stack: LocalStack) -> ReplayResult:
    [result] = replay(stack, [SAGEMAKER_SWEEP])
    assert result.ok, result.error
    return result


def test_an_impossible_gpu_reading_gives_no_underused_advice_and_says_why(sink: SlackSink) -> None:
    busy = world(endpoints=[endpoint("faq-bot", invocations_per_hour=3000)])
    with LocalStack(busy, sink=sink) as stack:
        dims = {"EndpointName": "faq-bot", "VariantName": "AllTraffic"}
        put("/aws/sagemaker/Endpoints", "GPUUtilization", dims, hourly(24, -400.0))
        put("/aws/sagemaker/Endpoints", "GPUMemoryUtilization", dims, hourly(24, 20.0))
        result = sagemaker_sweep(stack)
    reasons = {f["reason"]: f for f in findings([result], "faq-bot")}
    assert "endpoint_underused" not in reasons and "endpoint_idle" not in reasons
    said = reasons["gpu_metrics_missing"]
    assert "-400%" in said["summary"] and "0-400%" in said["summary"]
    assert "advice" in said["summary"]


def test_a_busy_asynchronous_endpoint_is_not_idle(sink: SlackSink) -> None:
    busy = world(endpoints=[endpoint("doc-ocr-async")])
    with LocalStack(busy, sink=sink) as stack:
        from moto.sagemaker.models import sagemaker_backends

        # Made asynchronous behind costguard's back: its configuration gains an AsyncInferenceConfig.
        config = sagemaker_backends[ACCOUNT][REGION].endpoint_configs["doc-ocr-async-config"]
        config.async_inference_config = {"OutputConfig": {"S3OutputPath": "s3://bucket/out/"}}
        described = clients.sagemaker(REGION).describe_endpoint_config(
            EndpointConfigName="doc-ocr-async-config"
        )
        assert "AsyncInferenceConfig" in described
        dims = {"EndpointName": "doc-ocr-async", "VariantName": "AllTraffic"}
        put("AWS/SageMaker", "InvocationsProcessed", dims, hourly(30, 40.0))
        result = sagemaker_sweep(stack)
    assert findings([result], "doc-ocr-async") == []


def test_a_busy_asynchronous_endpoint_of_the_world_is_not_idle_and_an_idle_one_is(sink: SlackSink) -> None:
    both = world(
        endpoints=[
            endpoint("doc-ocr-async", kind="async", invocations_per_hour=240),
            endpoint("batch-embed-async", kind="async"),
        ]
    )
    with LocalStack(both, sink=sink) as stack:
        result = sagemaker_sweep(stack)
    assert findings([result], "doc-ocr-async") == []
    [idle] = findings([result], "batch-embed-async")
    assert idle["reason"] == "endpoint_idle"
    assert "InvocationsProcessed" in idle["evidence"]["metric"]


def test_a_busy_endpoint_hosting_inference_components_is_not_idle(sink: SlackSink) -> None:
    busy = world(
        endpoints=[
            endpoint(
                "llm-shared",
                kind="inference_components",
                inference_components=["llama-chat", "mistral-summarize"],
                invocations_per_hour=1200,
                gpu_percent=60,
                gpu_memory_percent=70,
            )
        ]
    )
    with LocalStack(busy, sink=sink) as stack:
        result = sagemaker_sweep(stack)
    assert [f["reason"] for f in findings([result], "llm-shared")] == []
