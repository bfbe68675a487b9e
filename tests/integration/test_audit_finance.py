"""The demo audit's figures (issue 40): commitments sized after the report's own advice, two totals, jobs costed by
what they spent, no verdict from part of a machine, and reports that travel (CSV, a comparison with the previous
run)."""

from __future__ import annotations

import copy
import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from costguard.audit.export import COLUMNS
from costguard.cli import main
from costguard.local.audit import AuditRun, print_summary, run_audit, write_outputs
from costguard.local.world import load_world
from costguard.pricing import bundled_table
from tests.conftest import DEMO_WORLD

HOURS = 730
EC2 = bundled_table()["ec2"]
SAGEMAKER = bundled_table()["sagemaker"]
GPU2_SILENT = "i-0a1f00000000000a8"  # one of its four GPUs publishes nothing
HUNG_JOB = "bert-pretrain-hung"  # a two-node training job started this morning
# The three the issue names: commitments must not cover what the same report tells to resize or move.
RESIZED = {"i-0a1f00000000000d2", "i-0a1f00000000000d8", "i-0a1f00000000000d9"}


@pytest.fixture(scope="module")
def demo() -> AuditRun:
    run = run_audit(load_world(DEMO_WORLD))
    assert run.status == "SUCCEEDED", run.error
    assert run.report is not None
    return run


def report_of(run: AuditRun) -> dict[str, Any]:
    assert run.report is not None
    return run.report


def test_no_commitment_covers_what_the_report_tells_to_stop_or_resize(demo: AuditRun) -> None:
    report = report_of(demo)
    advised = {f["resource"]["id"] for f in report["findings"]}
    section = report["commitments"]
    assert section["rows"], "steady instances the report leaves alone are still candidates"
    for row in section["rows"]:
        assert not set(row["resources"]) & advised, row
    assert section["sized_after_advice"] is True
    assert {r["id"] for r in section["left_out"]} >= RESIZED
    assert section["commitment_usd_per_hour"] == pytest.approx(
        sum(r["commitment_usd_per_hour"] for r in section["rows"]), abs=0.001
    )
    assert demo.html is not None and 'id="commitments-after-advice"' in demo.html


def test_the_headline_separates_what_is_safe_now_from_what_needs_a_change(
    demo: AuditRun, capsys: pytest.CaptureFixture[str]
) -> None:
    report = report_of(demo)
    totals = report["totals"]
    findings = report["findings"]
    safe = [f for f in findings if f["tier"] == "safe_now"]
    assert {(f["confidence"], f["risk"]) for f in safe} == {("high", "low")}
    # The idle g6e, the faq-bot trickle on four A10Gs and the one-GPU p5: measured, high confidence, low risk.
    expected_safe = (
        EC2["g6e.12xlarge"]
        + (SAGEMAKER["ml.g5.12xlarge"] - SAGEMAKER["ml.g5.xlarge"])
        + (EC2["p5.4xlarge"] - EC2["g6e.xlarge"])
    ) * HOURS
    assert totals["safe_monthly_saving_usd"] == pytest.approx(expected_safe, abs=0.05)
    together = totals["safe_monthly_saving_usd"] + totals["conditional_monthly_saving_usd"]
    assert together == pytest.approx(sum(f["monthly_saving_usd"] for f in findings), abs=0.02)
    assert together == pytest.approx(totals["monthly_saving_usd"], abs=0.02)
    # The spot move and the Trainium port are in the second total, each saying what it needs first.
    needing = {f["reason"]: f["needs"] for f in findings if f["tier"] == "needs_change"}
    assert any("change of market" in n for n in needing["rightsize_spot"])
    assert any("change of code" in n for n in needing["trainium_candidate"])
    html = demo.html or ""
    assert f'id="total-safe">${totals["safe_monthly_saving_usd"]:,.2f}<' in html
    assert f'id="total-conditional">${totals["conditional_monthly_saving_usd"]:,.2f}<' in html
    print_summary(demo, [])
    printed = capsys.readouterr().out
    assert f"${totals['safe_monthly_saving_usd']:,.2f}/month safe to do now" in printed
    assert f"${totals['conditional_monthly_saving_usd']:,.2f}/month more needs a change" in printed


def test_a_job_is_costed_by_what_it_spent_over_the_window(demo: AuditRun) -> None:
    world = load_world(DEMO_WORLD)
    [job] = [j for j in world.training_jobs if j.name == HUNG_JOB]
    started = job.started
    assert started is not None
    ran = (world.now - started).total_seconds() / 3600
    hung = {s["id"]: s for s in report_of(demo)["skipped"]}[HUNG_JOB]
    hourly = 2 * SAGEMAKER["ml.p4d.24xlarge"]
    assert hung["cost_basis"] == "window"
    assert hung["monthly_cost_usd"] == pytest.approx(hourly * ran, abs=hourly * 0.06)  # hours to a tenth
    assert hung["monthly_cost_usd"] < hourly * 24  # not a month of it
    totals = report_of(demo)["totals"]
    assert totals["monthly_cost_usd"] == pytest.approx(
        totals["continuous_monthly_cost_usd"] + totals["window_spend_usd"], abs=0.05
    )


def test_a_machine_with_a_silent_gpu_gets_no_verdict_and_the_report_says_why(demo: AuditRun) -> None:
    report = report_of(demo)
    assert GPU2_SILENT not in {f["resource"]["id"] for f in report["findings"]}
    skipped = {s["id"]: s for s in report["skipped"]}[GPU2_SILENT]
    assert skipped["why"].startswith(
        "GPU 2 of 4 published no data over the window: not judged on the other 3"
    )
    assert demo.html is not None and "GPU 2 of 4 published no data" in demo.html


def test_the_csv_and_a_second_run_compared_with_the_first(
    demo: AuditRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_outputs(copy.deepcopy(demo), tmp_path)
    first = json.loads((tmp_path / "report.json").read_text())
    assert first["comparison"]["previous"] is None  # nothing before it in its bucket or its folder
    # The first run as if a week earlier: one finding not there yet, one since resolved, one saving smaller.
    newer = first["findings"].pop(0)
    gone = copy.deepcopy(first["findings"][0]) | {"reason": "rightsize_idle", "recommended_type": None}
    gone["resource"] = gone["resource"] | {"id": "i-0a1f0000000000fff", "name": "since-stopped"}
    first["findings"].append(gone)
    first["findings"][1]["monthly_saving_usd"] -= 100.0
    grown = first["findings"][1]["resource"]["id"]
    (tmp_path / "report.json").write_text(json.dumps(first))

    assert main(["audit", "--out", str(tmp_path), "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    second = json.loads((tmp_path / "report.json").read_text())
    assert len(rows) == len(second["findings"]) and tuple(rows[0]) == COLUMNS
    assert [r["id"] for r in rows] == [f["resource"]["id"] for f in second["findings"]]
    assert (tmp_path / "report.csv").read_text().splitlines()[0] == ",".join(COLUMNS)

    comparison = second["comparison"]
    assert comparison["previous"]["key"] == str(tmp_path / "report.json")
    assert [r["id"] for r in comparison["new"]] == [newer["resource"]["id"]]
    assert [r["id"] for r in comparison["resolved"]] == ["i-0a1f0000000000fff"]
    [changed] = comparison["changed"]
    assert (changed["id"], changed["change"], changed["delta_usd"]) == (grown, "grown", pytest.approx(100.0))
    assert comparison["unchanged"] == len(second["findings"]) - 2
    page = (tmp_path / "report.html").read_text()
    assert 'id="comparison-summary"' in page and "1 new" in page and "1 resolved" in page
