"""What moving data between two AWS regions costs per GB, from transfer.json: a dated, sourced estimate.

AWS bills inter-region transfer to the region the data leaves (a bucket's region, when a job elsewhere reads it)
at a rate per GB that depends on that region and, for a few pairs, on the destination. A rate the table does not
hold is unknown (None), never zero and never borrowed from another region.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any


@dataclass(frozen=True)
class TransferRate:
    usd_per_gb: float
    source: str  # what the figure is, as an alert says it


@cache
def transfer_table() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("transfer.json").read_text(encoding="utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def transfer_rate(source_region: str, destination_region: str) -> TransferRate | None:
    """The rate per GB of data leaving ``source_region`` for ``destination_region``; None when they are the
    same region (no inter-region charge) or the table holds no rate for the pair."""
    if source_region == destination_region:
        return None
    table = transfer_table()
    label = f"estimate: published inter-region rate of {table['as_of']}"
    for pair in table.get("pairs", []):
        if {source_region, destination_region} == set(pair["regions"]):
            return TransferRate(float(pair["usd_per_gb"]), label)
    usd = table["usd_per_gb_out"].get(source_region)
    return None if usd is None else TransferRate(float(usd), label)
