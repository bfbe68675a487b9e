"""The README's Performance figures are exactly what bench/results.json holds."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from bench import report
from tests.conftest import ROOT

RESULTS = ROOT / "bench" / "results.json"


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(RESULTS.read_text())
    return loaded


def test_the_readme_block_is_the_one_rendered_from_the_results(results: dict[str, Any]) -> None:
    readme = report.README.read_text()
    assert report.current_block(readme) == report.readme_block(results), (
        "README.md's Performance figures differ from bench/results.json: run `make bench`"
    )


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
