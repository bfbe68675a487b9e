"""The cost model (bench/costs.py): the bill of the mixed fleet with findings, line by line, with the
per-instance alarms off (the default) and on, priced from the read schedule's reads."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench import costs
from costguard.local.template import Template
from tests.conftest import ROOT

RESULTS = json.loads((ROOT / "bench" / "results.json").read_text())
FLEET, IMPORTS = RESULTS["fleet"], RESULTS["cold_imports"]
TEMPLATE = Template.load(ROOT / "template.yaml")
SCHEDULE = {
    "reads_per_instance_hour": 2.1,
    "gpu_metrics_per_instance": 4.33,
    "evidence_metrics_per_instance_hour": 1.0,
    "source": "a test's figures",
}
ALARM_LINE = "CloudWatch GPU-idle alarms, one per instance (GpuAlarms on)"


def bill(instances: int, alarms_on: bool = False, schedule: dict[str, Any] | None = None) -> dict[str, Any]:
    return costs.monthly_cost(instances, FLEET, IMPORTS, TEMPLATE, schedule, alarms_on)


def line(month: dict[str, Any], item: str) -> dict[str, Any]:
    [found] = [entry for entry in month["lines"] if entry["item"] == item]
    return found


def test_the_alarm_line_is_there_only_with_the_alarms_on() -> None:
    off, on = bill(1_000), bill(1_000, alarms_on=True)
    assert ALARM_LINE not in {entry["item"] for entry in off["lines"]}
    alarm = line(on, ALARM_LINE)
    assert alarm["quantity"] == FLEET["sweep_1000"]["gpu_series"]  # billed per GPU series the queries analyze
    assert alarm["usd"] == pytest.approx(0.10 * FLEET["sweep_1000"]["gpu_series"])
    assert off["metrics_insights_alarms"]["count"] == 0
    assert on["metrics_insights_alarms"] == {"count": 1_000, "default_quota_per_account_and_region": 200}
    assert on["total_usd"] > off["total_usd"] + alarm["usd"] - 0.01


def test_the_reconcile_schedule_runs_only_with_the_alarms_on() -> None:
    off = costs.schedules(TEMPLATE, TEMPLATE.conditions())
    on = costs.schedules(TEMPLATE, TEMPLATE.conditions({"GpuAlarms": "on"}))
    assert "GpuAlarmsFunction.Reconcile" not in off
    assert on["GpuAlarmsFunction.Reconcile"] == 30 * 24
    assert off["GpuIdleFunction.Sweep"] == on["GpuIdleFunction.Sweep"] == 30 * 24 * 12
    assert "reconcile" not in line(bill(1_000), "Lambda compute")["how"]
    assert "reconcile" in line(bill(1_000, alarms_on=True), "Lambda compute")["how"]


@pytest.mark.parametrize("alarms_on", [False, True])
def test_the_bill_grows_with_the_fleet(alarms_on: bool) -> None:
    totals = [bill(n, alarms_on, SCHEDULE)["total_usd"] for n in (100, 1_000, 10_000)]
    assert totals == sorted(totals) and len(set(totals)) == 3


@pytest.mark.parametrize("alarms_on", [False, True])
def test_each_line_is_its_quantity_times_its_unit_price(alarms_on: bool) -> None:
    for entry in bill(10_000, alarms_on, SCHEDULE)["lines"]:
        price = costs.PRICES[entry["price"]]
        assert entry["unit_usd"] == price["usd"] and entry["source"] == price["source"]
        # The quantity is kept to a tenth: the dollars are within that rounding of quantity x price.
        assert entry["usd"] == pytest.approx(
            entry["quantity"] * entry["unit_usd"], abs=0.005 + price["usd"] * 0.05
        )
        assert entry["how"]


def test_the_sweep_reads_are_priced_from_the_read_schedule() -> None:
    month = bill(1_000, schedule=SCHEDULE)
    audits = costs.schedules(TEMPLATE)["AuditStateMachine.Weekly"]
    sweep = 1_000 * 30 * 24 * (2.1 * 4.33 + 1.0)
    expected = sweep + audits * FLEET["audit_1000"]["metrics_requested"]
    assert line(month, "CloudWatch GetMetricData")["quantity"] == pytest.approx(expected, abs=0.1)
    unscheduled = bill(1_000)
    assert (
        line(unscheduled, "CloudWatch GetMetricData")["usd"]
        > 5 * line(month, "CloudWatch GetMetricData")["usd"]
    )


def test_without_a_measured_schedule_every_instance_is_read_at_every_sweep_and_it_says_so() -> None:
    schedule = costs.read_schedule({}, FLEET)
    assert schedule["reads_per_instance_hour"] == 12
    assert schedule["evidence_metrics_per_instance_hour"] == 24  # CPU and network at every read
    assert "no read schedule" in schedule["source"]
    measured = costs.read_schedule({"read_schedule": {"reads_per_instance_hour": 2.1}}, FLEET)
    assert measured["reads_per_instance_hour"] == 2.1
    assert measured["gpu_metrics_per_instance"] == 4.33  # the mixed fleet's GPUs per instance
    assert measured["evidence_metrics_per_instance_hour"] == pytest.approx(2 * 2.1)  # CPU, network a read
    assert measured["source"].startswith("measured")


def test_findings_cost_their_writes_and_notices(monkeypatch: pytest.MonkeyPatch) -> None:
    month = bill(1_000, schedule=SCHEDULE)
    monkeypatch.setitem(costs.ASSUMPTIONS, "episodes_per_instance_per_day", 0)
    without = bill(1_000, schedule=SCHEDULE)
    for item in ("DynamoDB writes", "SQS", "Lambda compute"):
        assert line(month, item)["quantity"] > line(without, item)["quantity"], item
    episodes = 1_000 * 30
    writes = episodes * 4 + episodes * 2 * 2  # on change, and the notifier's idempotency for each notice
    assert line(month, "DynamoDB writes")["quantity"] - line(without, "DynamoDB writes")["quantity"] == (
        pytest.approx(writes, abs=0.1)
    )


def test_bench_costs_gives_every_fleet_both_ways_with_the_prices_date_and_sources() -> None:
    out = costs.bench_costs({"fleet": FLEET, "cold_imports": IMPORTS, "read_schedule": SCHEDULE})
    assert out["prices_as_of"] == costs.PRICES_AS_OF
    assert all(p["source"].startswith("https://aws.amazon.com/") for p in out["prices"].values())
    assert set(out["fleets"]) == set(out["fleets_gpu_alarms_on"]) == {"100", "1000", "10000"}
    assert out["read_schedule"]["reads_per_instance_hour"] == 2.1
    bare = out["without_read_schedule"]
    assert bare["read_schedule"]["reads_per_instance_hour"] == 12
    assert bare["total_usd"]["1000"] > out["fleets"]["1000"]["total_usd"]


def test_the_eks_cluster_is_priced_from_its_counted_reads_at_the_sweeps_schedule() -> None:
    month = costs.eks_cluster_cost(TEMPLATE)
    # rate(15 minutes): 2,880 sweeps a month, each asking GetMetricData for the 800 pod GPU series.
    assert month["sweeps_a_month"] == 2880
    reads = line(month, "CloudWatch GetMetricData (EKS sweep)")
    assert reads["quantity"] == 2880 * 800
    assert reads["usd"] == pytest.approx(2880 * 800 * 0.01 / 1000, abs=0.01)
    assert month["total_usd"] == pytest.approx(sum(item["usd"] for item in month["lines"]))


def test_make_bench_measures_every_section_the_bill_is_priced_from() -> None:
    """A full `make bench` starts from nothing: the read schedule the bill is priced from is one of its cases (read
    from a previous file, a fresh clone's bill fell back to reading every instance at every sweep), and the
    sections measured by scripts of their own are kept, not dropped."""
    import bench.run as run

    assert "read_schedule" in run.CASES and {"fleet", "cold_imports"} <= set(run.CASES)
    assert set(run.KEPT) == {"adaptive_policy", "slack_app_soak", "slack_channel_rate"}
    assert not set(run.KEPT) & set(run.CASES)


def test_only_the_pollers_and_alarms_the_priced_deployment_has_are_billed() -> None:
    """A single account with a webhook: the notifier's two queues alone are polled (the sweeps' work queues are a
    hub's, their mappings disabled elsewhere; the Slack app's queue is not created), and the Slack app's alarms are
    not there. A hub with a Slack app has all seven mappings."""
    single = TEMPLATE.conditions()
    hub = TEMPLATE.conditions({"OrganizationId": "o-a1b2c3d4e5", "SlackApp": "on"})
    assert costs.sqs_sources(TEMPLATE, single) == 2
    assert costs.sqs_sources(TEMPLATE, hub) == 7
    functions = len(TEMPLATE.functions())
    queues = 8  # four queues' depth and four oldest-message ages
    # One Errors metric a function, one of the account's throttles; the Slack app's two functions only with it
    # (its public endpoint, which reserves concurrency, with its own throttles too).
    assert costs.ops_alarm_metrics(TEMPLATE, hub) == functions + 1 + 1 + queues
    # (and the interactions' dead-letter queue, with its depth alarm, only with the Slack app).
    assert costs.ops_alarm_metrics(TEMPLATE, single) == functions - 2 + 1 + queues - 1
    sqs = line(bill(1_000), "SQS")
    assert "2 SQS event sources" in sqs["how"]
    assert line(bill(1_000), "CloudWatch ops alarms")["quantity"] == costs.ops_alarm_metrics(TEMPLATE, single)


def test_the_bill_at_a_thousand_instances_stays_within_a_hundred_dollars() -> None:
    """The project's budget for its own bill (bench/results.json, as `make bench` measured it)."""
    assert RESULTS["monthly_cost"]["fleets"]["1000"]["total_usd"] <= 100.0
    assert costs.bench_costs(RESULTS)["fleets"]["1000"]["total_usd"] <= 100.0


def test_the_written_bill_is_the_one_its_lines_and_prices_give() -> None:
    """bench/results.json's bill, recomputed from its measured figures, the template and the prices: a figure
    edited by hand, or a template change not priced again (`python -m bench.costs`), fails here."""
    assert costs.bench_costs(RESULTS) == RESULTS["monthly_cost"]
    for size, month in RESULTS["monthly_cost"]["fleets"].items():
        lines = month["lines"]
        assert lines, size
        assert all(entry["unit_usd"] == costs.PRICES[entry["price"]]["usd"] for entry in lines)
        assert month["total_usd"] == pytest.approx(sum(e["usd"] for e in lines), abs=0.02), size


def test_the_ledger_report_runs_daily_and_the_dashboard_is_billed_only_when_deployed() -> None:
    runs = costs.schedules(TEMPLATE, TEMPLATE.conditions())
    assert runs["LedgerReportFunction.Daily"] == 30  # cron(0 0 * * ? *): once a day
    month = bill(1_000)
    items = {entry["item"] for entry in month["lines"]}
    assert "CloudWatch dashboard (Dashboard=on)" not in items  # off by default
    # Six series, each sent in one hour a day: prorated, a fraction of one metric-month.
    metrics = line(month, "CloudWatch custom metrics: the ledger's figures")
    assert metrics["usd"] == pytest.approx(0.30 * 6 * 30 / (30 * 24), abs=0.005)
    dashboard_on = costs.Bill()
    m = costs.Month(1_000, FLEET, IMPORTS, TEMPLATE, costs.no_schedule(FLEET), False)
    m.conditions = TEMPLATE.conditions({"Dashboard": "on"})
    costs._savings_ledger(dashboard_on, m)
    [dashboard] = [
        entry for entry in dashboard_on.lines if entry["item"] == "CloudWatch dashboard (Dashboard=on)"
    ]
    assert dashboard["usd"] == 3.00
