"""On-demand prices: the live Price List API first when enabled, the bundled dated table as fallback.

The table (prices.json) holds figures per region, each with its source; a figure it does not hold is unknown
(None), never zero and never borrowed from another region.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Any

from costguard.observability import logger

# SageMaker lists one product per use ("component"); the table's rate is the one they share.
SAGEMAKER_COMPONENTS = ("Training", "Hosting", "Notebook")


@dataclass(frozen=True)
class Price:
    """A price per instance-hour and where it came from."""

    usd_per_hour: float
    source: str


@cache
def bundled_table() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("prices.json").read_text(encoding="utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def service_of(instance_type: str) -> str:
    """SageMaker types carry the ``ml.`` prefix; everything else is priced as EC2."""
    return "sagemaker" if instance_type.startswith("ml.") else "ec2"


def bundled_regions() -> tuple[str, ...]:
    """The regions the table holds figures for, its reference region first."""
    table = bundled_table()
    return (table["region"], *sorted(table.get("regions", {})))


def region_prices(region: str, service: str) -> dict[str, float]:
    """The table's figures for one region and service ({} for a region it does not cover)."""
    table = bundled_table()
    if region == table["region"]:
        prices: dict[str, float] = table[service]
        return prices
    return dict(table.get("regions", {}).get(region, {}).get(service, {}))


def figure_source(instance_type: str, region: str) -> dict[str, Any] | None:
    """The source record of one figure of the table (title, date, address), or None if it has no figure."""
    table = bundled_table()
    service = service_of(instance_type)
    if instance_type not in region_prices(region, service):
        return None
    by_type = table.get("figure_sources", {}).get(region, {}).get(service, {})
    source_id = by_type.get(instance_type) or by_type.get("*")
    record = dict(table.get("sources", {}).get(source_id, {}))
    record["id"] = source_id
    return record


def why_unpriced(instance_type: str, region: str) -> str:
    """Why the table has no figure for a type in a region, as the report says it."""
    table = bundled_table()
    if instance_type in table.get("no_on_demand", {}):
        return f"no on-demand price for {instance_type}: {table['no_on_demand'][instance_type]}"
    if region not in bundled_regions():
        return f"no price known for {instance_type} in {region}: the bundled table covers {', '.join(bundled_regions())}"
    if instance_type in table.get("not_offered", {}).get(region, []):
        return f"no price known for {instance_type} in {region}: not offered there when the table was built"
    return f"no price known for {instance_type} in {region}"


def bundled_price(instance_type: str, region: str, component: str | None = None) -> Price | None:
    """The table's figure; for a SageMaker ``component`` (Hosting, Notebook) whose rate differs from the
    type's (training) rate, that component's figure (``sagemaker_components``, written by scripts/rebuild-prices)."""
    usd = region_prices(region, service_of(instance_type)).get(instance_type)
    if usd is None:
        return None
    if component and service_of(instance_type) == "sagemaker":
        usd = (
            bundled_table()
            .get("sagemaker_components", {})
            .get(region, {})
            .get(component, {})
            .get(instance_type, usd)
        )
    source = figure_source(instance_type, region) or {}
    label = source.get("label")
    detail = f" ({region}, {label} of {source.get('as_of')})" if label else f" ({region})"
    return Price(float(usd), f"bundled table of {bundled_table()['as_of']}{detail}")


class PriceBook:
    """Looks prices up; a price nobody knows is None, never zero."""

    def __init__(self, *, live: bool = False) -> None:
        self.live = live

    def hourly(self, instance_type: str | None, region: str, *, component: str | None = None) -> Price | None:
        """The price of one instance-hour. ``component`` (Training, Hosting, Notebook) picks the SageMaker use
        the live Price List is asked about; the bundled table holds the rate those uses share."""
        if not instance_type:
            return None
        if self.live:
            from costguard.pricing.live import live_price  # imported only when the live path is on

            try:
                price = live_price(instance_type, region, component)
            except Exception:  # any Price List failure falls back to the table, loudly
                logger.warning(
                    "live price lookup failed", extra={"instance_type": instance_type}, exc_info=True
                )
                price = None
            if price is not None:
                return price
        return bundled_price(instance_type, region, component)


@lru_cache(maxsize=2)
def price_book(live: bool = False) -> PriceBook:
    return PriceBook(live=live)
