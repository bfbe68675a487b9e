"""On-demand prices: the live Price List API first when enabled, the bundled dated table as fallback."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Any

from aws_lambda_powertools import Logger

logger = Logger(child=True)


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


def bundled_price(instance_type: str, region: str) -> Price | None:
    table = bundled_table()
    usd = table[service_of(instance_type)].get(instance_type)
    if usd is None:
        return None
    where = "" if region == table["region"] else f", {table['region']} figure"
    return Price(float(usd), f"bundled table of {table['as_of']}{where}")


class PriceBook:
    """Looks prices up; a price nobody knows is None, never zero."""

    def __init__(self, *, live: bool = False) -> None:
        self.live = live

    def hourly(self, instance_type: str | None, region: str) -> Price | None:
        if not instance_type:
            return None
        if self.live:
            from costguard.pricing.live import live_price  # imported only when the live path is on

            try:
                price = live_price(instance_type, region)
            except Exception:  # any Price List failure falls back to the table, loudly
                logger.warning(
                    "live price lookup failed", extra={"instance_type": instance_type}, exc_info=True
                )
                price = None
            if price is not None:
                return price
        return bundled_price(instance_type, region)


@lru_cache(maxsize=2)
def price_book(live: bool = False) -> PriceBook:
    return PriceBook(live=live)
