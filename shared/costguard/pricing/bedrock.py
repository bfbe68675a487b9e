"""What a Bedrock Provisioned Throughput costs per model unit and hour: your own rates first
(COSTGUARD_BEDROCK_THROUGHPUT_PRICES), then the bundled dated table (bedrock.json). A rate neither holds is
unknown (None), never zero and never borrowed from another model or commitment."""

from __future__ import annotations

import json
import math
from functools import cache
from importlib import resources
from typing import Any

from costguard.pricing import Price

NO_COMMITMENT = "none"  # the table's and the setting's name for a throughput without commitmentDuration
SETTING = "COSTGUARD_BEDROCK_THROUGHPUT_PRICES"


@cache
def bundled_table() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("bedrock.json").read_text(encoding="utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def parse_rates(text: str) -> dict[tuple[str, str], float]:
    """``model-id[@commitment]=usd`` entries, comma-separated (``amazon.titan-text-express-v1=20.5``,
    ``anthropic.claude-v2@SixMonths=35``): the rate per model unit and hour; no ``@`` is no commitment."""
    rates: dict[tuple[str, str], float] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, sep, usd = entry.partition("=")
        model, _, commitment = name.strip().partition("@")
        try:
            value = float(usd)
        except ValueError:
            value = -1.0
        if not sep or not model.strip() or not math.isfinite(value) or value < 0:
            raise ValueError(f"not model-id[@commitment]=usd: {entry!r}")
        rates[(model.strip(), commitment.strip() or NO_COMMITMENT)] = value
    return rates


def unit_price(base_model: str, commitment: str | None, region: str, own_rates: str = "") -> Price | None:
    """The rate of one model unit-hour of ``base_model`` (a foundation model id) at this commitment."""
    key = (base_model, commitment or NO_COMMITMENT)
    own = parse_rates(own_rates).get(key) if own_rates else None
    if own is not None:
        return Price(own, f"your rates ({SETTING})")
    table = bundled_table()
    usd = table.get("figures", {}).get(region, {}).get(base_model, {}).get(key[1])
    if usd is None:
        return None
    source = table["sources"].get(table.get("figure_sources", {}).get(base_model, "bedrock-pricing-page"), {})
    return Price(float(usd), f"bundled table of {table['as_of']} ({region}, {source.get('label', 'AWS')})")
