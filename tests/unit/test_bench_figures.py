"""docs/benchmark.md's figures and the README's cost figures are exactly what bench/results.json holds."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from bench import adaptive_cold, costs, report
from tests.conftest import ROOT

RESULTS = ROOT / "bench" / "results.json"


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(RESULTS.read_text())
    return loaded


def test_the_benchmark_block_is_the_one_rendered_from_the_results(results: dict[str, Any]) -> None:
    benchmark = report.BENCHMARK.read_text()
    assert report.current_block(benchmark) == report.readme_block(results), (
        "docs/benchmark.md's figures differ from bench/results.json: run `make bench`"
    )


def test_the_adaptive_table_of_the_detectors_page_is_the_one_rendered_from_the_results(
    results: dict[str, Any],
) -> None:
    detectors = report.DETECTORS.read_text()
    block = report.current_block(detectors, report.ADAPTIVE_BEGIN, report.ADAPTIVE_END)
    assert block == report.adaptive_table(results), (
        "docs/detectors.md's adaptive table differs from bench/results.json: run `make bench`"
    )
    changed = copy.deepcopy(results)
    changed["adaptive_policy"]["seeds"][0]["policies"]["adaptive"]["near_misses"] += 1
    assert report.adaptive_table(changed) != block


def test_the_readme_cost_block_is_the_one_rendered_from_the_results(results: dict[str, Any]) -> None:
    readme = report.README.read_text()
    block = report.current_block(readme, report.COST_BEGIN, report.COST_END)
    assert block == report.readme_cost_block(results), (
        "README.md's cost figures differ from bench/results.json: run `make bench`"
    )
    for size in results["monthly_cost"]["fleets"]:
        assert f"${results['monthly_cost']['fleets'][size]['total_usd']:,.2f} a month" in block


def test_the_readme_quotes_no_benchmark_figure_outside_its_block(results: dict[str, Any]) -> None:
    # Every dollar figure and timing the README's guide sections quote comes from the generated block; the one
    # other place with figures is the demo message's picture, a code block.
    readme = report.README.read_text()
    start, end = readme.index(report.COST_BEGIN), readme.index(report.COST_END) + len(report.COST_END)
    outside = readme[:start] + readme[end:]
    prose = "".join(part for n, part in enumerate(outside.split("```")) if n % 2 == 0)
    assert not re.findall(r"\$\d[\d,.]*|\b\d[\d,.]* (?:s|ms|µs|MiB)\b", prose)


def test_the_block_quotes_every_measured_section(results: dict[str, Any]) -> None:
    block = report.readme_block(results)
    for needed in ("cold_imports", "detector_latency", "fleet", "monthly_cost"):
        assert needed in results, f"bench/results.json lacks {needed}: run `make bench`"
    assert f"{results['cold_imports']['boto3_median_ms']:,} ms for `import boto3`" in block
    for size in ("100", "1000"):
        assert f"${results['monthly_cost']['fleets'][size]['total_usd']:,.2f} a month" in block
    assert f"peak {results['fleet']['audit_10000']['peak_rss_mib']:,} MiB" in block


def test_a_changed_figure_changes_the_block(results: dict[str, Any]) -> None:
    # The comparison above could not pass by accident: one figure moved is a different block.
    changed = copy.deepcopy(results)
    changed["fleet"]["sweep_1000"]["api_calls_total"] += 1
    assert report.readme_block(changed) != report.readme_block(results)


def test_replacing_the_block_keeps_the_text_around_it() -> None:
    text = f"before\n{report.BEGIN}\nold figures\n{report.END}\nafter\n"
    replaced = report.replace_block(text, "new figures")
    assert replaced == f"before\n{report.BEGIN}\nnew figures\n{report.END}\nafter\n"
    with pytest.raises(ValueError, match="bench:begin"):
        report.replace_block("no markers here", "x")
    cost = report.replace_block(
        f"a\n{report.COST_BEGIN}\nold\n{report.COST_END}\nb\n", "new", report.COST_BEGIN, report.COST_END
    )
    assert cost == f"a\n{report.COST_BEGIN}\nnew\n{report.COST_END}\nb\n"


def test_the_cold_imports_state_their_spread_against_c7n(results: dict[str, Any]) -> None:
    # A run states c7n's own spread, the handlers' ratios from the lowest to the highest, those not under c7n,
    # the highest's ratio sample by sample (each against the c7n sample taken beside it), and CPU time's ratios.
    imports = copy.deepcopy(results["cold_imports"])
    handlers = imports["handlers"]
    names = sorted(handlers)
    for n, handler in enumerate(handlers.values()):
        handler |= {
            "ratio_to_c7n": round(0.5 + n / 100, 2),
            "ratio_to_c7n_pairs": {"min": 0.41, "median": 0.5, "max": 0.93 + n / 100},
            "cpu_ms": 100.0,
            "cpu_ratio_to_c7n": 0.6,
        }
    lowest, highest = names[0], names[-1]
    imports["c7n"] |= {
        "ms_spread": {"min": 240.5, "median": 250.0, "max": 410.2},
        "not_under_c7n": [highest],
        "ratio_range": {
            "min": 0.5,
            "lowest": lowest,
            "max": handlers[highest]["ratio_to_c7n"],
            "highest": highest,
        },
        "cpu_median_ms": 170.2,
        "cpu_ratio_range": {"min": 0.55, "max": 0.81},
    }
    block = report.readme_block(results | {"cold_imports": imports})
    assert (
        f"the handlers 0.5 ({lowest}) to {handlers[highest]['ratio_to_c7n']} ({highest}) times that" in block
    )
    assert f"1 of {len(handlers)} not under it ({highest})" in block
    assert (
        f"the highest 0.41 to {handlers[highest]['ratio_to_c7n_pairs']['max']} times sample by sample"
        in block
    )
    assert (
        "240.5 to 410.2 ms" in block
        and "in CPU time, which the machine's load moves far less, 0.55 to 0.81" in block
    )
    table = report.results_sections(results | {"cold_imports": imports})
    assert f"| {lowest} | " in table and "| 0.41 to 0.93 | 100.0 | 0.6 |" in table


# Figures checked for truth, not only for agreement: what can be recomputed from results.json is recomputed.


def test_the_monthly_bill_is_repriced_from_its_measured_figures(results: dict[str, Any]) -> None:
    """The bill in results.json is exactly what bench/costs.py prices from the same file's measured counts, the
    template and today's prices: a bill edited by hand, or a template changed without `bench/costs.py`, fails."""
    assert costs.bench_costs(results) == results["monthly_cost"], (
        "bench/results.json's monthly_cost is not what bench/costs.py prices: run "
        "`PYTHONPATH=. .venv/bin/python bench/costs.py`"
    )


def test_each_bill_is_the_sum_of_its_lines_and_each_line_its_quantity_at_its_price(
    results: dict[str, Any],
) -> None:
    month = results["monthly_cost"]
    bills = [*month["fleets"].values(), *month["fleets_gpu_alarms_on"].values(), month["eks_cluster"]]
    assert len(bills) >= 5
    for bill in bills:
        assert bill["lines"], bill
        for line in bill["lines"]:
            if line.get("price") in costs.PRICES:
                assert line["unit_usd"] == pytest.approx(costs.PRICES[line["price"]]["usd"]), line
            # The quantity is shown to a tenth, the dollars priced from the unrounded quantity.
            slack = 0.05 * line["unit_usd"] + 0.006
            assert line["usd"] == pytest.approx(line["quantity"] * line["unit_usd"], abs=slack), line
        assert bill["total_usd"] == pytest.approx(sum(line["usd"] for line in bill["lines"]), abs=0.011), bill


def test_a_bill_edited_by_hand_fails_the_repricing(results: dict[str, Any]) -> None:
    edited = copy.deepcopy(results)
    edited["monthly_cost"]["fleets"]["1000"]["total_usd"] = 10.05
    assert costs.bench_costs(edited) != edited["monthly_cost"]


def test_the_cold_import_ratios_are_their_medians_divided(results: dict[str, Any]) -> None:
    """Each handler's ratio to `import boto3` is its median over boto3's (an edited boto3 figure disagrees), and
    each spread holds its median."""
    imports = results["cold_imports"]
    boto3_ms = imports["boto3_median_ms"]
    assert imports["handlers"]
    for name, handler in imports["handlers"].items():
        assert handler["ratio_to_boto3"] == pytest.approx(handler["median_ms"] / boto3_ms, abs=0.006), name
        pairs = handler["ratio_to_c7n_pairs"]
        assert pairs["min"] <= handler["ratio_to_c7n"] == pairs["median"] <= pairs["max"], name
        assert handler["with_first_client_ms"] >= handler["median_ms"], name
    spread = imports["c7n"]["ms_spread"]
    assert spread["min"] <= imports["c7n"]["median_ms"] <= spread["max"]


def test_the_peak_memory_is_at_least_every_measured_peak(results: dict[str, Any]) -> None:
    """The benchmark process's peak is the highest resident size any case saw, and no case's peak is below what
    the process held before it began."""
    peaks = [case["peak_rss_mib"] for case in results["fleet"].values()]
    assert peaks
    assert results["max_rss_mib"] >= max(peaks)
    for name, case in results["fleet"].items():
        assert case["peak_rss_mib"] >= case["rss_before_mib"] > 0, name


def test_the_cold_start_table_is_the_one_its_json_renders() -> None:
    """bench/adaptive_cold.md and docs/detectors.md's table of cold weeks are rendered from
    bench/adaptive_cold.json, and its 14-day rows on the office week are docs/detectors.md's adaptive table (the
    same runs, the same figures)."""
    document = json.loads((ROOT / "bench" / "adaptive_cold.json").read_text())
    assert (ROOT / "bench" / "adaptive_cold.md").read_text() == adaptive_cold.render(document)
    cold = report.current_block(
        report.DETECTORS.read_text(), adaptive_cold.COLD_BEGIN, adaptive_cold.COLD_END
    )
    assert cold == adaptive_cold.cold_table(document), (
        "docs/detectors.md's cold table: run bench/adaptive_cold.py"
    )
    detectors = report.current_block(report.DETECTORS.read_text(), report.ADAPTIVE_BEGIN, report.ADAPTIVE_END)
    warm = [row for row in document["rows"] if row["family"] == "office" and row["history_days"]]
    assert warm
    for row in warm:
        adaptive = row["policies"]["adaptive"]
        cell = f"{adaptive['reclaimed_share']:.1%}, {adaptive['near_misses']}, {adaptive['work_stops']}"
        assert cell in detectors, (row["seed"], cell)
