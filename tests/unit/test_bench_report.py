"""RESULTS.md's unit prices: written in full, without trailing zeros or a bare point."""

from __future__ import annotations

import pytest

from bench import report


@pytest.mark.parametrize(
    ("usd", "text"),
    [(0.0000133334, "0.0000133334"), (0.2 / 1_000_000, "0.0000002"), (0.10, "0.1"), (1.0, "1"), (0.0, "0")],
)
def test_a_unit_price_is_written_in_full_without_trailing_zeros_or_point(usd: float, text: str) -> None:
    assert report._unit_usd(usd) == text


def test_a_whole_dollar_unit_price_reads_as_a_whole_number_in_the_bill() -> None:
    line = {"item": "i", "how": "h", "quantity": 1, "unit_usd": 2.0, "usd": 2.0, "source": "s"}
    month = {"total_usd": 2.0, "lines": [line], "prerequisite": {"item": "p", "how": "h", "usd": 0.0}}
    assert "| 1 | 2 | 2.00 |" in "\n".join(report._bill_table("t", month))
