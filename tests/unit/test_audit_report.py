"""The audit report says what it skipped and what it does not know, and reads as a person expects."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

from costguard.audit.evaluate import Catalog, evaluate
from costguard.audit.html import render_html, sparkline, when
from costguard.audit.model import Subject, TypeFacts, TypeOption, Usage
from costguard.audit.report import build_report, failure_message, region_result
from costguard.audit.rules import parse_rules
from costguard.audit.summary import summary_message
from costguard.model import ResourceKind

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
START = NOW - timedelta(days=14)
RULES = parse_rules()
G5 = TypeFacts(
    name="g5.12xlarge",
    accelerator_kind="nvidia_gpu",
    accelerator_count=4,
    accelerator_model="A10G",
    accelerator_memory_mib=22888,
    vcpus=48,
)
CATALOG = Catalog(
    [TypeOption(facts=G5, instance_type="g5.12xlarge", hourly_usd=5.672)], {"g5.12xlarge": 5.672}
)


def subject(instance_type: str = "g5.12xlarge", **extra: object) -> Subject:
    fields: dict[str, object] = {
        "kind": ResourceKind.EC2_INSTANCE,
        "id": "i-0123456789abcdef0",
        "name": "trainer",
        "account": "123456789012",
        "region": "us-east-1",
        "instance_type": instance_type,
        "facts": G5 if instance_type == "g5.12xlarge" else None,
        "tags": {"team": "vision"},
    }
    return Subject.model_validate(fields | extra)


def report_of(subjects: list[Subject], usage: dict[str, Usage], failed: list[dict[str, str]] = ()) -> dict:  # type: ignore[assignment,type-arg]
    findings, skipped = evaluate(subjects, usage, CATALOG, RULES)
    ok = region_result(
        "us-east-1",
        findings,
        skipped,
        audited=len(subjects),
        monthly_cost_usd=0,
        team_tag="team",
        window_start=START,
    )
    return build_report(run="r1", generated_at=NOW, window_start=START, window_end=NOW, regions=[ok, *failed])


def test_an_audit_that_could_judge_nothing_says_insufficient_data_not_zero_to_save() -> None:
    few = Usage(
        window_hours=336, period_hours=2, hours_observed=4, gpu_p95=2, gpu_max=2, per_gpu_p95=(2, 1, 1, 1)
    )
    s, unpriced = subject(), subject("x9.mega", id="i-0fedcba9876543210", name="mystery")
    report = report_of([s, unpriced], {s.key: few})
    totals = report["totals"]
    assert totals["insufficient_data"] is True
    assert totals["skipped"] == 2
    assert totals["skipped_unpriced"] == 1
    assert totals["skipped_monthly_cost_usd"] == round(
        5.672 * 730, 2
    )  # the unpriced one is not counted as $0
    [priced_row, unpriced_row] = report["skipped"]  # costliest first, unknown last
    assert priced_row["hourly_usd"] == 5.672
    assert unpriced_row["hourly_usd"] is None and unpriced_row["monthly_cost_usd"] is None
    page = render_html(report)
    assert re.search(r'id="total-saving">Insufficient data<', page)
    assert "costing $4,140.56, 1 of unknown price" in page  # a month of the one that runs continuously
    assert page.count('<tr class="skipped"') == 2
    assert "too little GPU data (4 h observed of 336 h" in page
    assert "unknown" in page  # the unpriced resource's cost
    message = summary_message(report, None)
    assert "insufficient data" in message["text"]
    assert "$0.00/month to save" not in json.dumps(message)


def test_numbers_are_right_aligned_and_tables_sorted_by_saving() -> None:
    s = subject()
    busy = Usage(
        window_hours=336,
        period_hours=2,
        hours_observed=336,
        gpu_p95=2,
        gpu_max=2,
        per_gpu_p95=(2, 1, 1, 1),
        memory_peak_mib=512,
        memory_total_peak_mib=512,
        cpu_p95=3,
        chart=(1.0,) * 56,
    )
    report = report_of([s], {s.key: busy})
    page = render_html(report)
    assert '<td class="num">1</td>' in page
    assert '<th class="num">Monthly saving</th>' in page
    rules = [m for m in re.findall(r'<tr class="by-rule"><td>([a-z_]+)</td>', page)]
    assert rules[0] == "rightsize_idle"  # the only saving first, the empty rules after it
    assert "td.num{text-align:right" in page.replace(",td.num", "td.num")


def test_a_chart_has_a_time_axis_and_the_threshold() -> None:
    svg = sparkline([10.0] * 56, START.isoformat(), 6)
    assert 'class="threshold"' in svg and ">80%<" in svg
    assert ">6 Nov<" in svg and ">20 Nov<" in svg and ">13 Nov<" in svg
    assert sparkline([]) == '<span class="muted">no data</span>'


def test_a_chart_draws_nothing_where_there_is_no_data() -> None:
    """Slots before the launch (None) get no point: the line starts at the first slot with data."""
    svg = sparkline([None, None, 50.0, 60.0, None, 70.0], START.isoformat(), 6)
    lines = re.findall(r'<polyline[^>]*points="([^"]*)"', svg)
    dots = re.findall(r'<circle cx="([0-9.]+)"', svg)
    assert len(lines) == 1 and len(lines[0].split()) == 2, svg  # 50% and 60%, then a gap
    assert len(dots) == 1, svg  # 70%: alone after the gap
    bottom = re.search(r'<text x="[0-9.]+" y="([0-9.]+)" text-anchor="end">0</text>', svg)
    assert bottom is not None
    assert all(p.split(",")[1] != bottom.group(1) for p in lines[0].split())  # no 0% point
    assert ">6 Nov<" in svg  # the axis still spans the whole window
    assert sparkline([None, None]) == '<span class="muted">no data</span>'


def test_times_read_as_people_read_them() -> None:
    assert when("2026-11-20T12:00:00+00:00") == "20 Nov 2026 12:00 UTC"
    assert when("2026-11-06T09:05:00Z") == "6 Nov 2026 09:05 UTC"
    assert when(NOW) == "20 Nov 2026 12:00 UTC"


def test_a_failed_region_shows_its_error_as_text_not_lambda_json() -> None:
    cause = json.dumps(
        {"errorType": "AccessDeniedException", "errorMessage": "not authorized", "stackTrace": ["  File x"]}
    )
    assert failure_message("AccessDeniedException", cause) == "AccessDeniedException: not authorized"
    assert failure_message("States.Timeout", "Task timed out") == "States.Timeout: Task timed out"
    assert failure_message(None, None) == "failed"
    failed = {"region": "eu-west-3", "status": "failed", "error": "AccessDeniedException", "cause": cause}
    report = report_of([], {}, [failed])
    [row] = [r for r in report["regions"] if r["region"] == "eu-west-3"]
    assert row["message"] == "AccessDeniedException: not authorized"
    page = render_html(report)
    assert "eu-west-3: AccessDeniedException: not authorized" in page
    assert "errorType" not in page and "stackTrace" not in page
