"""The right-sizing audit end to end: statemachine/audit.asl.json executed by moto, its tasks run by the real
handlers, against the demo world; the report checked by hand and rendered by a headless browser."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from costguard.cli import main
from costguard.local.audit import BUCKET, AuditRun, definition, run_audit, write_outputs
from costguard.local.template import Template
from costguard.local.world import World, load_world
from costguard.pricing import bundled_table
from tests.conftest import DEMO_WORLD, ROOT

HOURS = 730  # hours_per_month in the packaged rules
EC2 = bundled_table()["ec2"]
SAGEMAKER = bundled_table()["sagemaker"]
IDLE = "i-0a1f00000000000d1"
DOWNSIZE = "i-0a1f00000000000d2"
FAMILY = "i-0a1f00000000000d3"
MODEL_SIZE = "i-0a1f00000000000d4"
SPOT = "i-0a1f00000000000d5"
TRAINIUM = "i-0a1f00000000000d6"
WELL_SIZED = "i-0a1f00000000000d7"
ONE_H100 = "i-0a1f00000000000d8"  # rightsize_family
V100_13B = "i-0a1f00000000000d9"  # rightsize_model_size
V100_TRANSFORMER = "i-0a1f00000000000da"  # trainium_candidate
# What the live demo flagged, with the week of history it has: judged by the audit too.
P4D_FORGOTTEN = "i-0a1f00000000000a1"  # gpu_idle: rightsize_idle
GPU2_SILENT = "i-0a1f00000000000a8"  # gpu_metrics_partial: three idle A10Gs report, 20% of 48 vCPUs
QUEUED_EVAL = "i-0a1f00000000000a9"  # gpu_idle, then busy at 12:05: an idle L4, 20% of 4 vCPUs
TRICKLE = "faq-bot/AllTraffic"  # an endpoint serving 30 requests an hour on four A10Gs: rightsize_downsize
WINDOW_HOURS = 14 * 24  # AuditLookbackDays


@pytest.fixture(scope="module")
def demo() -> AuditRun:
    run = run_audit(load_world(DEMO_WORLD))
    assert run.status == "SUCCEEDED", run.error
    return run


def ran(instance: str) -> float:
    """The hours an instance of the demo world ran in the window, to a tenth (as Discover reads its launch)."""
    world = load_world(DEMO_WORLD)
    [launched] = [i.launched for i in world.instances if i.id == instance]
    assert launched is not None
    return min(round((world.now - launched).total_seconds() / 3600, 1), WINDOW_HOURS)


def findings_by_id(run: AuditRun) -> dict[str, dict[str, Any]]:
    assert run.report is not None
    return {f["resource"]["id"]: f for f in run.report["findings"]}


def test_each_finding_with_the_saving_recomputed_by_hand(demo: AuditRun) -> None:
    """A month of the saving for what ran the whole window; what the rest spent over it for what did not (the
    spot candidate, the Trainium candidate, the forgotten p4d and the queued eval): never projected."""
    expected = {
        # Stop it: all of its price.
        IDLE: ("rightsize_idle", None, EC2["g6e.12xlarge"] * HOURS),
        # One busy A10G of four, 10 GiB, 10% of 48 vCPUs (6 with headroom): the g5 with 1 GPU and 8 vCPUs.
        DOWNSIZE: ("rightsize_downsize", "g5.2xlarge", (EC2["g5.12xlarge"] - EC2["g5.2xlarge"]) * HOURS),
        # Same type on spot at the assumed 60% discount (the price after it rounded to 4 places), for the three
        # days it ran.
        SPOT: (
            "rightsize_spot",
            "g5.48xlarge",
            (EC2["g5.48xlarge"] - round(EC2["g5.48xlarge"] * 0.4, 4)) * ran(SPOT),
        ),
        # One H100 at ~14% holding 14 GiB: one L40S (48 GB) at 3.88x slowdown (bandwidth) carries it.
        ONE_H100: ("rightsize_family", "g6e.xlarge", (EC2["p5.4xlarge"] - EC2["g6e.xlarge"]) * HOURS),
        # A declared 13B full fine-tune (261.5 GiB) on eight V100s: its band's cheapest fit is eight A100s.
        V100_13B: (
            "rightsize_model_size",
            "p4d.24xlarge",
            (EC2["p3dn.24xlarge"] - EC2["p4d.24xlarge"]) * HOURS,
        ),
        # Transformer training on eight V100s at ~66%: sixteen Trainium chips at 1.1x slowdown (bandwidth).
        V100_TRANSFORMER: (
            "trainium_candidate",
            "trn1.32xlarge",
            (EC2["p3dn.24xlarge"] - EC2["trn1.32xlarge"]) * ran(V100_TRANSFORMER),
        ),
        # Idle since its launch eight days ago, its CPU too: stop it (what it spent in those eight days).
        P4D_FORGOTTEN: ("rightsize_idle", None, EC2["p4d.24xlarge"] * ran(P4D_FORGOTTEN)),
        # GPU2_SILENT: one of its four GPUs publishes nothing, so it gets no verdict (test_audit_finance.py).
        # An idle L4 whose CPU is busy: the cheapest GPU with its 4 vCPUs, a T4.
        QUEUED_EVAL: (
            "rightsize_family",
            "g4dn.xlarge",
            (EC2["g6.xlarge"] - EC2["g4dn.xlarge"]) * ran(QUEUED_EVAL),
        ),
        # 3% of each of four A10Gs and 15% of their memory, serving requests: one A10G, not a stop.
        TRICKLE: (
            "rightsize_downsize",
            "ml.g5.xlarge",
            (SAGEMAKER["ml.g5.12xlarge"] - SAGEMAKER["ml.g5.xlarge"]) * HOURS,
        ),
    }
    found = findings_by_id(demo)
    assert set(found) == set(expected)
    for instance, (reason, target, saving) in expected.items():
        finding = found[instance]
        assert finding["reason"] == reason, instance
        assert finding["recommended_type"] == target, instance
        assert finding["monthly_saving_usd"] == pytest.approx(saving, abs=0.01), instance
    assert found[SPOT]["recommended_market"] == "spot"


def test_endpoints_are_ranked_by_cost_per_1000_requests_with_the_trickles_cheaper_fit(demo: AuditRun) -> None:
    """The endpoints section: each GPU endpoint variant's instances over the window per 1,000 requests it served
    (AWS/SageMaker Invocations, read in the same GetMetricData calls as its GPUs), largest first; the variant that
    served nothing first of all, its cost per request unbounded."""
    assert demo.report is not None
    section = demo.report["endpoints"]
    rows = {r["id"]: r for r in section["rows"]}
    assert [r["endpoint"] for r in section["rows"]] == [
        "sentiment-canary",
        "faq-bot",
        "llm-shared",
        "doc-ocr-async",
        "search-rerank",
    ]
    costs = [r["cost_per_1000_requests_usd"] for r in section["rows"]]
    assert costs[0] is None and costs[1:] == sorted(costs[1:], reverse=True)
    # Requests where SageMaker publishes them for the endpoint's kind: an asynchronous endpoint's
    # InvocationsProcessed, an inference-component endpoint's Invocations per component (never read as none).
    assert rows["doc-ocr-async/AllTraffic"]["requests"] == pytest.approx(240 * 48, rel=0.01)
    assert rows["llm-shared/AllTraffic"]["requests"] == pytest.approx(1200 * 48, rel=0.01)

    trickle = rows[TRICKLE]
    price = SAGEMAKER["ml.g5.12xlarge"]
    assert (trickle["instance_type"], trickle["instance_count"], trickle["gpus_per_instance"]) == (
        "ml.g5.12xlarge",
        1,
        4,
    )
    assert trickle["requests"] == 30 * WINDOW_HOURS
    assert trickle["gpu_p95_percent"] == 3.0  # SageMaker's 12% summed over four GPUs, per GPU
    # Price x hours / (requests / 1,000): $7.09 an hour for 30 requests an hour is $236.33 per 1,000.
    assert trickle["cost_per_1000_requests_usd"] == pytest.approx(price / 0.03, rel=1e-4)
    fit = trickle["fit"]
    assert fit["instance_type"] == "ml.g5.xlarge"
    assert fit["cost_per_1000_requests_usd"] == pytest.approx(SAGEMAKER["ml.g5.xlarge"] / 0.03, rel=1e-4)
    assert fit["monthly_saving_usd"] == findings_by_id(demo)[TRICKLE]["monthly_saving_usd"]
    assert section["fit_monthly_saving_usd"] == fit["monthly_saving_usd"]

    busy = rows["search-rerank/AllTraffic"]
    assert busy["fit"] is None and "no cheaper type" in busy["why_no_fit"]
    assert busy["cost_per_1000_requests_usd"] == pytest.approx(2 * SAGEMAKER["ml.g5.xlarge"] / 5.4, rel=1e-4)
    idle = rows["sentiment-canary/AllTraffic"]
    assert (idle["requests"], idle["window_cost_usd"]) == (
        0,
        round(SAGEMAKER["ml.g5.2xlarge"] * WINDOW_HOURS, 2),
    )


def test_recommendations_that_would_not_work_are_not_made(demo: AuditRun) -> None:
    """Compute fit: 8 H100s at 35% need ~780% of four L4s; 8 A100s at ~90% saturate anything cheaper, L4s and
    Trainium alike; a 7B model of undeclared workload is sized as a full fine-tune (141 GiB), not one L4."""
    assert demo.report is not None
    found = findings_by_id(demo)
    for instance in (FAMILY, MODEL_SIZE, TRAINIUM):
        assert instance not in found, instance
        # Judged, not skipped: there is simply no cheaper type that would carry the work.
        assert instance not in {s["id"] for s in demo.report["skipped"]}, instance


def test_every_finding_states_its_projection_and_risk_within_the_threshold(demo: AuditRun) -> None:
    assert demo.report is not None
    for finding in demo.report["findings"]:
        assert "projected_gpu_p95_percent" in finding
        assert finding["risk"] in ("low", "medium", "high")
        projected = finding["projected_gpu_p95_percent"]
        assert projected is None or projected <= 80, finding["resource"]["id"]
        if projected is None:
            assert finding["recommended_type"] is None or finding["risk"] == "high"
    downsize = findings_by_id(demo)[DOWNSIZE]
    assert 70 <= downsize["projected_gpu_p95_percent"] <= 80
    assert downsize["projection_basis"] == "same accelerator (A10G)"
    assert downsize["risk"] == "medium"
    # Three days of data of a two-week window: the spot move's fit is not shown, and it says so.
    spot = findings_by_id(demo)[SPOT]
    assert (spot["projected_gpu_p95_percent"], spot["risk"], spot["confidence"]) == (None, "high", "low")


def test_the_evidence_names_what_was_measured(demo: AuditRun) -> None:
    found = findings_by_id(demo)
    downsize = found[DOWNSIZE]["evidence"]
    assert downsize["needed_gpus"] == 1
    assert downsize["gpu_memory_peak_gib"] == pytest.approx(10.0)
    assert 60 <= downsize["gpu_p95_percent"] <= 75
    assert found[IDLE]["evidence"]["gpu_max_percent"] <= 5
    assert found[IDLE]["confidence"] == "high"  # two full weeks of data
    assert found[IDLE]["risk"] == "low"


def test_what_was_not_judged_is_listed_with_why_and_what_it_costs(demo: AuditRun) -> None:
    assert demo.report is not None
    skipped = {s["id"]: s for s in demo.report["skipped"]}
    # The hung two-node p4d training job: priced now (ml.p4d.24xlarge), too little data to judge.
    hung = skipped["bert-pretrain-hung"]
    assert hung["hourly_usd"] == pytest.approx(2 * bundled_table()["sagemaker"]["ml.p4d.24xlarge"])
    assert hung["why"].startswith("too little GPU data")
    assert all(s["hourly_usd"] is not None for s in skipped.values())
    costs = [s["hourly_usd"] for s in demo.report["skipped"]]
    assert costs == sorted(costs, reverse=True)
    totals = demo.report["totals"]
    assert totals["skipped"] == len(skipped)
    assert totals["skipped_monthly_cost_usd"] == pytest.approx(
        sum(s["monthly_cost_usd"] for s in skipped.values()), abs=0.05
    )
    assert totals["insufficient_data"] is False


def test_the_well_sized_busy_instance_gets_no_recommendation(demo: AuditRun) -> None:
    assert demo.report is not None
    assert WELL_SIZED not in findings_by_id(demo)
    # It was judged (enough data, priced), not skipped.
    assert WELL_SIZED not in {s["id"] for s in demo.report["skipped"]}


def test_totals_and_groups_add_up(demo: AuditRun) -> None:
    assert demo.report is not None
    report = demo.report
    findings = report["findings"]
    savings = [f["monthly_saving_usd"] for f in findings]
    assert savings == sorted(savings, reverse=True)
    assert report["totals"]["findings"] == len(findings) == 9
    assert report["totals"]["monthly_saving_usd"] == pytest.approx(sum(savings), abs=0.01)
    assert sum(r["monthly_saving_usd"] for r in report["by_rule"].values()) == pytest.approx(
        sum(savings), abs=0.02
    )
    rule_savings = [r["monthly_saving_usd"] for r in report["by_rule"].values()]
    assert rule_savings == sorted(rule_savings, reverse=True)
    # The one-GPU trainer and the spot candidate (the g5 whose GPU 2 went silent is not judged).
    assert report["by_team"]["vision"]["findings"] == 2
    # The eight-GPU p5 has no finding, the well-sized g6 none either: only the one-GPU p5 has one.
    assert report["by_team"]["search"]["findings"] == 1 and report["by_team"]["search"]["resources"] >= 3
    assert sum(t["resources"] for t in report["by_team"].values()) == report["totals"]["resources"]
    assert sum(t["monthly_cost_usd"] for t in report["by_team"].values()) == pytest.approx(
        report["totals"]["monthly_cost_usd"], abs=0.05
    )
    assert report["regions"] == [
        {
            "account": "123456789012",
            "account_name": None,
            "region": "us-east-1",
            "status": "ok",
            "resources": report["totals"]["resources"],
            "findings": 9,
        }
    ]
    # One account: one row, the totals' own; no failure.
    [account] = report["accounts"]
    assert account["account"] == "123456789012" and account["regions"] == ["us-east-1"]
    assert (account["resources"], account["findings"]) == (report["totals"]["resources"], 9)
    assert account["monthly_saving_usd"] == report["totals"]["monthly_saving_usd"]
    assert report["failures"] == [] and report["totals"]["failed_regions"] == []
    assert report["schema"] == "costguard.audit/1"


def test_the_local_run_executes_the_asl_file_itself(demo: AuditRun) -> None:
    template = Template.load(ROOT / "template.yaml")
    props = template.resources["AuditStateMachine"]["Properties"]
    assert props["DefinitionUri"] == "statemachine/audit.asl.json"
    text = (ROOT / "statemachine" / "audit.asl.json").read_text()
    assert demo.definition == definition(template, "us-east-1", "123456789012")
    # Only the substitutions differ from the file: the functions' ARNs and the audit bucket's name.
    substituted = re.sub(r"arn:aws:lambda:[^\"]+", "X", demo.definition).replace(f'"{BUCKET}"', '"X"')
    assert substituted == re.sub(r"\$\{Audit\w+\}", "X", text)
    assert demo.states[0] == "Plan"
    assert demo.states[-1] == "Report"
    assert "AccountRegions" in demo.states
    # The item's states ran in a child execution of the Distributed Map: what each wrote, under the account.
    run = demo.output["run"]
    assert sorted(demo.keys) == [
        f"runs/{run}/123456789012/us-east-1/{name}.json"
        for name in ("holdings", "result", "subjects", "usage")
    ] + [f"runs/{run}/items.json"]  # and Plan's items, which the Map read from S3


def test_the_slack_summary_gives_the_total_the_top_items_and_the_link(demo: AuditRun) -> None:
    assert demo.report is not None
    [message] = demo.slack
    totals = demo.report["totals"]
    # The two totals: what is safe to do now, and what needs a change first.
    assert f"${totals['safe_monthly_saving_usd']:,.2f}/month safe to do now" in message["text"]
    assert f"${totals['conditional_monthly_saving_usd']:,.2f}/month more" in message["text"]
    text = json.dumps(message)
    assert "rightsize_idle" in text  # the largest saving is among the top items
    assert "projected p95 53.2% per GPU, medium risk" in text  # the 13B model's move, second by saving
    [button] = next(b for b in message["blocks"] if b["type"] == "actions")["elements"]
    assert demo.output["html_key"] in button["url"]
    assert "Signature=" in button["url"] or "X-Amz-Signature=" in button["url"]


class _Dom(HTMLParser):
    """Totals by element id and the finding rows, from the DOM the browser produced."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: dict[str, str] = {}
        self.rows = 0
        self._open: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "tr" and "finding" in (attributes.get("class") or "").split():
            self.rows += 1
        if attributes.get("id", "").startswith("total-"):  # type: ignore[union-attr]
            self._open = attributes["id"]

    def handle_data(self, data: str) -> None:
        if self._open:
            self.ids[self._open] = self.ids.get(self._open, "") + data.strip()

    def handle_endtag(self, tag: str) -> None:
        if tag == "b":
            self._open = None


def test_the_html_report_renders_in_a_headless_browser(demo: AuditRun, tmp_path: Path) -> None:
    assert demo.report is not None
    chromium = shutil.which("chromium")
    assert chromium, "chromium is not installed: run scripts/ensure-chromium (make test does)"
    written = write_outputs(demo, tmp_path)
    [page] = [path for path in written if path.suffix == ".html"]
    rendered = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    dom = _Dom()
    dom.feed(rendered)
    totals = demo.report["totals"]
    assert dom.ids["total-saving"] == f"${totals['monthly_saving_usd']:,.2f}"
    assert dom.ids["total-findings"] == str(totals["findings"])
    assert dom.ids["total-resources"] == str(totals["resources"])
    assert dom.rows == len(demo.report["findings"]) == 9
    # The endpoints section: a row per GPU endpoint variant, the trickle on four A10Gs before the busy one.
    assert rendered.count('<tr class="endpoint"') == len(demo.report["endpoints"]["rows"]) == 5
    assert rendered.index("faq-bot") < rendered.index("search-rerank", rendered.index('id="endpoint-rows"'))
    assert "<polyline" in rendered  # the utilization charts are there
    assert 'class="threshold"' in rendered  # with the 80% threshold
    assert "6 Nov" in rendered and "20 Nov" in rendered  # and dates along the time axis
    assert rendered.count('<tr class="skipped"') == len(demo.report["skipped"])
    assert "2026-11-20T12:00:00" not in rendered.split("<body>", 1)[1]  # times as people read them
    assert "20 Nov 2026 12:00 UTC" in rendered


def test_a_failed_region_is_named_and_the_rest_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The command line, with a rules override (read by the Evaluate task from the bucket) and two regions,
    # one of which fails in its Discover task.
    import costguard.flows.audit_discover as flow

    real = flow.discover

    def discover(region: str, now: Any) -> Any:
        if region == "eu-west-3":
            raise PermissionError("not authorized to perform: ec2:DescribeInstances")
        return real(region, now)

    monkeypatch.setattr(flow, "discover", discover)
    world = load_world(DEMO_WORLD)
    small = World.model_validate(
        {
            "now": world.now.isoformat(),
            "instances": [i.model_dump(mode="json") for i in world.instances if i.id in (IDLE, WELL_SIZED)],
        }
    )
    world_file = tmp_path / "world.json"  # YAML is a superset of JSON
    world_file.write_text(small.model_dump_json(exclude_none=True))
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"idle": {"gpu_max_percent": 0.5}}))
    out = tmp_path / "out"
    code = main(
        [
            "audit",
            "--world",
            str(world_file),
            "--out",
            str(out),
            "--rules",
            str(rules),
            "--regions",
            "us-east-1,eu-west-3",
        ]
    )
    assert code == 1  # a region was not audited
    report = json.loads((out / "report.json").read_text())
    assert report["totals"]["failed_regions"] == ["eu-west-3"]
    [failed] = [r for r in report["regions"] if r["region"] == "eu-west-3"]
    assert failed["error"] == "PermissionError"
    assert "ec2:DescribeInstances" in failed["cause"]
    assert failed["message"] == "PermissionError: not authorized to perform: ec2:DescribeInstances"
    # With idle meaning under 0.5%, the forgotten g6e (up to 2%) is no longer idle: it fits a cheaper family.
    [finding] = report["findings"]
    assert finding["resource"]["id"] == IDLE
    assert finding["reason"] == "rightsize_family"
    page = (out / "report.html").read_text()
    assert "eu-west-3: PermissionError: not authorized to perform: ec2:DescribeInstances" in page
    assert "errorMessage" not in page  # the error as text, not Lambda's JSON
    assert "FAILED" in capsys.readouterr().out


def test_a_bad_rules_file_is_named_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"idle": {"gpu_max_percent": 500}}))
    assert main(["audit", "--rules", str(rules), "--out", str(tmp_path)]) == 2
    assert "gpu_max_percent" in capsys.readouterr().err
