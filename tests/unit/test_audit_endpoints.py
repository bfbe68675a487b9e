"""The audit's endpoints section on plain data: what a request costs on each GPU endpoint variant, the cheaper fit
the right-sizing rules find for it, and the ranking by cost per 1,000 requests."""

from __future__ import annotations

from typing import Any

import pytest

from costguard.audit.endpoints import endpoint_rows, endpoints_section
from costguard.audit.evaluate import Catalog, evaluate
from costguard.audit.html import render_html
from costguard.audit.model import Subject, TypeFacts, TypeOption, Usage
from costguard.audit.report import build_report
from costguard.audit.rules import parse_rules
from costguard.model import Reason, ResourceKind
from tests.unit.test_audit_rules import NOW

RULES = parse_rules()
A10G = 24576
HOURS = 336.0  # the 14-day window
FACTS = {
    "ml.g5.xlarge": TypeFacts(name="g5.xlarge", accelerator_kind="nvidia_gpu", accelerator_count=1, accelerator_model="A10G", accelerator_memory_mib=A10G, vcpus=4),
    "ml.g5.12xlarge": TypeFacts(name="g5.12xlarge", accelerator_kind="nvidia_gpu", accelerator_count=4, accelerator_model="A10G", accelerator_memory_mib=A10G, vcpus=48),
}  # fmt: skip
PRICES = {"ml.g5.xlarge": 1.408, "ml.g5.12xlarge": 7.09}


def catalog() -> Catalog:
    options = [TypeOption(facts=FACTS[t], instance_type=t, hourly_usd=p) for t, p in PRICES.items()]
    return Catalog(options, PRICES)


def variant(name: str, instance_type: str, count: int = 1, **extra: Any) -> Subject:
    fields: dict[str, Any] = {
        "kind": ResourceKind.ENDPOINT,
        "id": f"{name}/AllTraffic",
        "name": name,
        "account": "123456789012",
        "region": "us-east-1",
        "instance_type": instance_type,
        "instance_count": count,
        "running_hours": 720.0,
        "tags": {"team": "support"},
        "facts": FACTS.get(instance_type),
    }
    return Subject.model_validate(fields | extra)


def served(per_gpu: float, gpus: int, requests: float | None, memory_percent: float = 15.0) -> Usage:
    """Usage as ReadMetrics makes it of an endpoint variant: SageMaker's summed figures spread over the GPUs."""
    memory = memory_percent / 100 * A10G
    return Usage(
        window_hours=HOURS,
        period_hours=2,
        hours_observed=HOURS,
        gpu_p50=per_gpu,
        gpu_p95=per_gpu,
        gpu_max=per_gpu,
        per_gpu_p95=(per_gpu,) * gpus,
        memory_peak_mib=memory,
        memory_total_peak_mib=memory * gpus,
        invocations=requests,
    )


def rows_for(subjects: list[Subject], usage: dict[str, Usage]) -> list[dict[str, Any]]:
    findings, skipped = evaluate(subjects, usage, catalog(), RULES)
    prices = {s.instance_type: PRICES[s.instance_type] for s in subjects if s.instance_type in PRICES}
    return endpoint_rows(subjects, usage, findings, skipped, prices, window_hours=HOURS, team_tag="team")


def test_a_trickle_on_an_oversized_gpu_endpoint_has_its_cost_per_1000_requests_and_a_cheaper_fit() -> None:
    trickle = variant("faq-bot", "ml.g5.12xlarge")
    usage = {trickle.key: served(3.0, 4, 30 * HOURS)}  # 30 requests an hour, 3% of each of four A10Gs
    findings, _ = evaluate([trickle], usage, catalog(), RULES)
    # Under the idle rule's 5%, but it served requests: never "stop it", a smaller type of the same GPU.
    [finding] = findings
    assert (finding.reason, finding.recommended_type) == (Reason.RIGHTSIZE_DOWNSIZE, "ml.g5.xlarge")

    [row] = rows_for([trickle], usage)
    assert row["requests"] == 10080
    assert row["gpu_p95_percent"] == 3.0  # per GPU, not SageMaker's sum over four
    assert row["window_cost_usd"] == round(7.09 * HOURS, 2)
    assert row["cost_per_1000_requests_usd"] == round(7.09 * HOURS / 10.08, 4) == 236.3333
    fit = row["fit"]
    assert fit["instance_type"] == "ml.g5.xlarge" and fit["reason"] == "rightsize_downsize"
    assert fit["cost_per_1000_requests_usd"] == round(1.408 * HOURS / 10.08, 4)
    assert fit["monthly_saving_usd"] == finding.monthly_saving_usd == round((7.09 - 1.408) * 730, 2)
    assert row["why_no_fit"] is None


def test_an_endpoint_that_served_nothing_is_still_told_to_stop() -> None:
    quiet = variant("canary", "ml.g5.12xlarge")
    usage = {quiet.key: served(1.0, 4, None)}
    [finding], _ = evaluate([quiet], usage, catalog(), RULES)
    assert finding.reason is Reason.RIGHTSIZE_IDLE
    [row] = rows_for([quiet], usage)
    assert (row["requests"], row["cost_per_1000_requests_usd"], row["fit"]) == (0, None, None)
    assert row["why_no_fit"].startswith("rightsize_idle: ")


def test_endpoints_are_ranked_by_cost_per_1000_requests_descending() -> None:
    busy = variant("search-rerank", "ml.g5.xlarge", 2)
    trickle = variant("faq-bot", "ml.g5.12xlarge")
    middling = variant("summarize", "ml.g5.12xlarge", running_hours=100.0)  # younger than the window
    quiet = variant("canary", "ml.g5.xlarge")
    unpriced = variant("legacy", "ml.p3.2xlarge")
    usage = {
        busy.key: served(55.0, 1, 5400 * HOURS, memory_percent=70),
        trickle.key: served(3.0, 4, 30 * HOURS),
        middling.key: served(60.0, 4, 2000 * 100.0, memory_percent=80),
        quiet.key: served(0.0, 1, None),
    }
    rows = rows_for([busy, unpriced, trickle, quiet, middling], usage)
    assert [r["endpoint"] for r in rows] == ["canary", "faq-bot", "summarize", "search-rerank", "legacy"]
    costs = [r["cost_per_1000_requests_usd"] for r in rows if r["cost_per_1000_requests_usd"] is not None]
    assert costs == sorted(costs, reverse=True) and len(costs) == 3
    # A variant younger than the window is priced over the hours it ran.
    summarize = next(r for r in rows if r["endpoint"] == "summarize")
    assert summarize["hours"] == 100.0
    assert summarize["cost_per_1000_requests_usd"] == round(7.09 * 100 / 200, 4)
    assert rows[-1]["hourly_usd"] is None and rows[-1]["cost_per_1000_requests_usd"] is None


def test_the_report_ranks_endpoints_across_regions_and_the_page_shows_them() -> None:
    def region(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
        return {"region": name, "status": "ok", "resources": len(rows), "findings": [], "endpoints": rows}

    trickle = variant("faq-bot", "ml.g5.12xlarge")
    busy = variant("search-rerank", "ml.g5.xlarge", 2, region="us-west-2")
    east = rows_for([trickle], {trickle.key: served(3.0, 4, 30 * HOURS)})
    west = rows_for([busy], {busy.key: served(55.0, 1, 5400 * HOURS, memory_percent=70)})
    failed = {"region": "eu-west-1", "status": "failed", "error": "AccessDenied", "endpoints": east}
    report = build_report(
        run="r",
        generated_at=NOW,
        window_start=NOW,
        window_end=NOW,
        regions=[region("us-west-2", west), region("us-east-1", east), failed],
    )
    section = report["endpoints"]
    assert [r["endpoint"] for r in section["rows"]] == [
        "faq-bot",
        "search-rerank",
    ]  # the failed one's left out
    assert section["requests"] == 10080 + 5400 * 336
    assert section["with_cheaper_fit"] == 1
    assert section["fit_monthly_saving_usd"] == pytest.approx((7.09 - 1.408) * 730, abs=0.01)
    page = render_html(report)
    assert page.count('<tr class="endpoint"') == 2
    assert page.index("faq-bot") < page.index("search-rerank")
    assert "$236.3333" in page and "ml.g5.xlarge &times; 1: $46.9333 per 1,000" in page


def test_a_report_without_endpoints_shows_no_section() -> None:
    report = build_report(run="r", generated_at=NOW, window_start=NOW, window_end=NOW, regions=[])
    assert report["endpoints"]["rows"] == [] and 'id="endpoints"' not in render_html(report)
    assert endpoints_section([{"region": "x", "status": "ok"}])["rows"] == []


def test_requests_ride_in_the_gpu_reads_batched_get_metric_data_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Per endpoint variant three series (GPU, GPU memory, Invocations), in ceil(queries / 500) GetMetricData calls
    and no ListMetrics: 400 variants, 1,200 queries, 3 calls."""
    import math

    from botocore.stub import ANY, Stubber

    from costguard.audit.reading import read_usage
    from costguard.aws import clients
    from costguard.aws.metrics import QUERIES_PER_CALL

    clients.reset()
    variants = [variant(f"ep-{n:03d}", "ml.g5.12xlarge") for n in range(400)]
    cloudwatch = clients.client("cloudwatch", "us-east-1")
    asked: list[dict[str, Any]] = []
    queries = 3 * len(variants)
    with Stubber(cloudwatch) as stub:
        for _ in range(math.ceil(queries / QUERIES_PER_CALL)):
            stub.add_response(
                "get_metric_data",
                {"MetricDataResults": []},
                {"MetricDataQueries": ANY, "StartTime": ANY, "EndTime": ANY, "ScanBy": "TimestampAscending"},
            )
        original = cloudwatch.get_metric_data

        def recording(**request: Any) -> Any:
            asked.extend(request["MetricDataQueries"])
            return original(**request)

        monkeypatch.setattr(cloudwatch, "get_metric_data", recording)
        clients.calls.clear()
        usage = read_usage("us-east-1", variants, NOW, 14)
        stub.assert_no_pending_responses()
    made = dict(clients.calls)
    clients.reset()
    assert len(usage) == len(variants) and len(asked) == queries
    assert (
        made
        == {("cloudwatch", "GetMetricData"): math.ceil(queries / QUERIES_PER_CALL)}
        == {("cloudwatch", "GetMetricData"): 3}
    )
    requests = [q["MetricStat"] for q in asked if q["MetricStat"]["Metric"]["MetricName"] == "Invocations"]
    assert len(requests) == len(variants)
    assert {(r["Metric"]["Namespace"], r["Stat"]) for r in requests} == {("AWS/SageMaker", "Sum")}
    assert requests[0]["Metric"]["Dimensions"] == [
        {"Name": "EndpointName", "Value": "ep-000"},
        {"Name": "VariantName", "Value": "AllTraffic"},
    ]
