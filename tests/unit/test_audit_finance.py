"""The audit's figures as a reader acts on them (issue 40), on plain data: a verdict that does not wait for a price,
a machine judged whole or not at all, costs over the window, two totals, a CSV, a comparison with the previous
report (the Report step's, through the bucket), console links, a sortable page and a legend."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from costguard.audit.compare import LATEST_KEY, compare
from costguard.audit.evaluate import Catalog, cost_hours, evaluate
from costguard.audit.export import COLUMNS, findings_csv
from costguard.audit.finance import console_url
from costguard.audit.html import render_html
from costguard.audit.model import Subject, TypeFacts, TypeOption, Usage
from costguard.audit.report import build_report, region_result
from costguard.audit.rules import parse_rules
from costguard.audit.steps import RegionOutcome, ReportInput
from costguard.audit.summary import summary_message
from costguard.flows import audit_report
from costguard.model import ResourceKind
from costguard.settings import parse_settings

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
START = NOW - timedelta(days=14)
WINDOW_HOURS = 336.0
RULES = parse_rules()
A10G = 22888


def facts(name: str, gpus: int, model: str = "A10G", vcpus: int = 48) -> TypeFacts:
    return TypeFacts(
        name=name,
        accelerator_kind="nvidia_gpu",
        accelerator_count=gpus,
        accelerator_model=model,
        accelerator_memory_mib=A10G,
        vcpus=vcpus,
    )


PRICED = {"g5.xlarge": (1, 4, 1.006), "g5.2xlarge": (1, 8, 1.212), "g5.12xlarge": (4, 48, 5.672)}
CATALOG = Catalog(
    [
        TypeOption(facts=facts(t, n, vcpus=v), instance_type=t, hourly_usd=p)
        for t, (n, v, p) in PRICED.items()
    ],
    {t: p for t, (_, _, p) in PRICED.items()},
)
# A type the bundled table lacks: four A10Gs, as DescribeInstanceTypes would describe a new size.
UNPRICED = "g5.36xlarge"


def subject(instance_type: str, ident: str = "i-0123456789abcdef0", **extra: Any) -> Subject:
    fields: dict[str, Any] = {
        "kind": ResourceKind.EC2_INSTANCE,
        "id": ident,
        "name": ident,
        "account": "123456789012",
        "region": "us-east-1",
        "instance_type": instance_type,
        "facts": facts(instance_type, 4)
        if instance_type != "g5.2xlarge"
        else facts(instance_type, 1, vcpus=8),
        "tags": {"team": "vision"},
    }
    return Subject.model_validate(fields | extra)


def usage(
    per_gpu: tuple[float, ...], *, memory_gib: float = 1, cpu: float = 3, hours: float = WINDOW_HOURS
) -> Usage:
    busiest = max(per_gpu)
    return Usage(
        window_hours=WINDOW_HOURS,
        period_hours=2,
        hours_observed=hours,
        gpu_p50=busiest,
        gpu_p95=busiest,
        gpu_max=busiest + 1,
        per_gpu_p95=per_gpu,
        memory_peak_mib=memory_gib * 1024,
        memory_total_peak_mib=memory_gib * 1024,
        cpu_p95=cpu,
        gpus_reporting=tuple(range(len(per_gpu))),
    )


def report_of(
    subjects: list[Subject], used: dict[str, Usage], previous: dict[str, Any] | None = None
) -> dict[str, Any]:
    findings, skipped = evaluate(subjects, used, CATALOG, RULES, window_hours=WINDOW_HOURS)
    result = region_result(
        "us-east-1",
        findings,
        skipped,
        audited=len(subjects),
        monthly_cost_usd=0,
        team_tag="team",
        window_start=START,
    )
    return build_report(
        run="r2", generated_at=NOW, window_start=START, window_end=NOW, regions=[result], previous=previous
    )


def test_an_unknown_price_is_cost_unknown_never_zero_and_the_verdict_is_still_given() -> None:
    idle, oversized = subject(UNPRICED, "i-idle"), subject(UNPRICED, "i-busy-one")
    report = report_of(
        [idle, oversized],
        {idle.key: usage((1, 1, 1, 1)), oversized.key: usage((70, 2, 2, 2), memory_gib=10, cpu=10)},
    )
    found = {f["resource"]["id"]: f for f in report["findings"]}
    assert found["i-idle"]["reason"] == "rightsize_idle"
    assert found["i-busy-one"]["reason"] == "rightsize_downsize"
    assert found["i-busy-one"]["recommended_type"] == "g5.2xlarge"  # fewer GPUs of the same model: cheaper
    for finding in found.values():
        assert finding["current_hourly_usd"] is None
        assert finding["monthly_cost_usd"] is None and finding["monthly_saving_usd"] is None
        assert "Cost unknown: no price known for g5.36xlarge" in finding["summary"]
    totals = report["totals"]
    assert totals["unpriced_findings"] == 2 and totals["monthly_saving_usd"] == 0.0
    assert report["by_rule"]["rightsize_idle"]["unpriced_findings"] == 1
    page = render_html(report)
    rows = page.split('<table id="findings"', 1)[1].split("</table>", 1)[0]
    assert rows.count("cost unknown") >= 4 and "$0.00" not in rows
    # Totals that add nothing known say so, never $0.00.
    for total in ("total-safe", "total-conditional", "total-saving"):
        assert f'id="{total}">cost unknown<' in page
    assert '<td>rightsize_idle</td><td class="num">1</td><td class="num">cost unknown</td>' in page
    lines = list(csv.DictReader(io.StringIO(findings_csv(report))))
    assert {r["monthly_saving_usd"] for r in lines} == {""}
    assert all(r["cost_note"].startswith("cost unknown: no price known for g5.36xlarge") for r in lines)
    assert "cost unknown" in json.dumps(summary_message(report, None))


def test_a_machine_with_a_gpu_that_publishes_nothing_is_not_judged_and_says_why() -> None:
    silent = subject("g5.12xlarge")
    three = usage((2, 2, 2), cpu=20).model_copy(update={"gpus_reporting": (0, 1, 3)})
    report = report_of([silent], {silent.key: three})
    assert report["findings"] == []
    [skipped] = report["skipped"]
    assert skipped["why"].startswith(
        "GPU 2 of 4 published no data over the window: not judged on the other 3"
    )
    assert skipped["hourly_usd"] == 5.672  # its cost is still said


def test_jobs_and_what_did_not_run_the_whole_window_are_costed_by_what_they_spent() -> None:
    job = subject("g5.12xlarge", "llm-sft", kind=ResourceKind.TRAINING_JOB, instance_count=2, running_hours=5)
    late = subject("g5.12xlarge", "i-late", running_hours=100)
    steady = subject("g5.12xlarge", "i-steady", running_hours=400)
    assert cost_hours(job, WINDOW_HOURS, RULES) == (5, "window")
    assert cost_hours(late, WINDOW_HOURS, RULES) == (100, "window")
    assert cost_hours(steady, WINDOW_HOURS, RULES) == (730, "month")
    idle = usage((1, 1, 1, 1), hours=WINDOW_HOURS)
    report = report_of([job, late, steady], {s.key: idle for s in (job, late, steady)})
    found = {f["resource"]["id"]: f for f in report["findings"]}
    assert found["llm-sft"]["monthly_cost_usd"] == round(5.672 * 2 * 5, 2)
    assert found["llm-sft"]["cost_basis"] == "window"
    assert found["i-late"]["monthly_saving_usd"] == round(5.672 * 100, 2)
    assert found["i-steady"]["monthly_saving_usd"] == round(5.672 * 730, 2)
    assert "a job ends by itself" in found["llm-sft"]["evidence"]["cost_basis"]


def test_two_totals_together_the_findings_total_each_finding_saying_what_it_needs() -> None:
    safe, partial = subject("g5.12xlarge", "i-safe"), subject("g5.12xlarge", "i-partial")
    report = report_of(
        [safe, partial], {safe.key: usage((1, 1, 1, 1)), partial.key: usage((1, 1, 1, 1), hours=200)}
    )
    totals = report["totals"]
    assert totals["safe_monthly_saving_usd"] == round(5.672 * 730, 2)
    assert totals["conditional_monthly_saving_usd"] == round(5.672 * 730, 2)
    assert totals["safe_monthly_saving_usd"] + totals["conditional_monthly_saving_usd"] == pytest.approx(
        totals["monthly_saving_usd"]
    )
    found = {f["resource"]["id"]: f for f in report["findings"]}
    assert (found["i-safe"]["tier"], found["i-safe"]["needs"]) == ("safe_now", [])
    assert found["i-partial"]["tier"] == "needs_change"
    assert found["i-partial"]["needs"] == ["more data (200 h measured of 336 h)"]
    page = render_html(report)
    assert 'id="total-safe">$4,140.56<' in page and 'id="total-conditional">$4,140.56<' in page
    assert "safe to do now" in summary_message(report, None)["text"]


def test_the_page_sorts_without_script_links_to_the_console_and_explains_its_words() -> None:
    a, b = subject("g5.12xlarge", "i-a"), subject("g5.12xlarge", "i-b")
    report = report_of(
        [a, b], {a.key: usage((1, 1, 1, 1)), b.key: usage((70, 2, 2, 2), memory_gib=10, cpu=10)}
    )
    page = render_html(report)
    assert "<script" not in page
    assert page.count('type="radio" name="sort"') >= 5 and "#sort-cost:checked~table tr.finding" in page
    assert page.count("--by-saving:") == 2 and "--by-risk:" in page
    assert (
        'href="https://us-east-1.console.aws.amazon.com/ec2/home?region=us-east-1#InstanceDetails:instanceId=i-a"'
        in page
    )
    body = page.split("<body>", 1)[1]
    assert "src=" not in body  # links only: nothing is fetched
    assert 'id="legend"' in page and "Confidence" in page and "Risk" in page
    assert console_url("endpoint", "faq-bot/AllTraffic", "eu-west-1") == (
        "https://eu-west-1.console.aws.amazon.com/sagemaker/home?region=eu-west-1#/endpoints/faq-bot"
    )
    assert console_url(
        "training_job",
        "j",
        "cn-north-1",
    ).startswith("https://console.amazonaws.cn/")  # type: ignore[union-attr]


def test_the_csv_has_a_row_per_finding_with_the_reports_columns() -> None:
    a, b = subject("g5.12xlarge", "i-a"), subject("g5.12xlarge", "i-b")
    report = report_of(
        [a, b], {a.key: usage((1, 1, 1, 1)), b.key: usage((70, 2, 2, 2), memory_gib=10, cpu=10)}
    )
    rows = list(csv.DictReader(io.StringIO(findings_csv(report))))
    assert tuple(rows[0]) == COLUMNS
    assert [r["id"] for r in rows] == [f["resource"]["id"] for f in report["findings"]]
    assert [float(r["monthly_saving_usd"]) for r in rows] == [
        f["monthly_saving_usd"] for f in report["findings"]
    ]


def test_the_comparison_names_new_resolved_and_changed_findings_with_their_dollars() -> None:
    a, b = subject("g5.12xlarge", "i-a"), subject("g5.12xlarge", "i-b")
    first = report_of(
        [a, b], {a.key: usage((1, 1, 1, 1)), b.key: usage((70, 2, 2, 2), memory_gib=10, cpu=10)}
    )
    c = subject("g5.12xlarge", "i-c")
    grown = subject("g5.12xlarge", "i-b", instance_count=2)  # the same resource, twice the instances
    second = report_of(
        [grown, c],
        {grown.key: usage((70, 2, 2, 2), memory_gib=10, cpu=10), c.key: usage((1, 1, 1, 1))},
        first,
    )
    comparison = second["comparison"]
    assert comparison["previous"]["run"] == "r2"
    assert [r["id"] for r in comparison["new"]] == ["i-c"]
    assert [r["id"] for r in comparison["resolved"]] == ["i-a"]
    [changed] = comparison["changed"]
    assert (changed["id"], changed["change"]) == ("i-b", "grown")
    assert changed["delta_usd"] == pytest.approx(changed["previous_monthly_saving_usd"], abs=0.01)
    totals = comparison["totals"]
    assert totals["new_monthly_saving_usd"] == round(5.672 * 730, 2)
    assert totals["resolved_monthly_saving_usd"] == round(5.672 * 730, 2)
    page = render_html(second)
    assert 'id="comparison-summary"' in page and "1 new" in page and "1 resolved" in page
    assert compare([], None)["previous"] is None


@pytest.fixture
def bucket() -> Iterator[str]:
    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="reports")
        yield "reports"


def test_the_report_step_compares_with_the_previous_report_in_its_bucket(bucket: str) -> None:
    settings = parse_settings(audit_bucket=bucket, slack_secret_id="")
    a = subject("g5.12xlarge", "i-a")
    findings, skipped = evaluate([a], {a.key: usage((1, 1, 1, 1))}, CATALOG, RULES, window_hours=WINDOW_HOURS)
    result = region_result(
        "us-east-1", findings, skipped, audited=1, monthly_cost_usd=0, team_tag="team", window_start=START
    )
    outcome = RegionOutcome(region="us-east-1", status="ok", result=result)
    s3 = boto3.client("s3", region_name="us-east-1")

    def document(key: str) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        return loaded

    first = audit_report.report(ReportInput(run="week-1", now=NOW, regions=[outcome]), settings)
    assert document(first["report_key"])["comparison"]["previous"] is None
    later = NOW + timedelta(days=7)
    second = audit_report.report(ReportInput(run="week-2", now=later, regions=[outcome]), settings)
    comparison = document(second["report_key"])["comparison"]
    assert comparison["previous"]["run"] == "week-1" and comparison["unchanged"] == 1
    assert document(LATEST_KEY)["latest"]["run"] == "week-2"
    # A retried Report task of the same run compares with the run before, not with itself.
    again = audit_report.report(ReportInput(run="week-2", now=later, regions=[outcome]), settings)
    assert document(again["report_key"])["comparison"]["previous"]["run"] == "week-1"
    # The CSV beside report.json.
    text = s3.get_object(Bucket=bucket, Key=second["csv_key"])["Body"].read().decode()
    assert second["csv_key"].endswith("/report.csv") and text.splitlines()[0] == ",".join(COLUMNS)
