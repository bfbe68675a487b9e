"""On-demand prices: the bundled dated table, and AWS's Price List API for what it lacks.

The table (prices.json, rebuilt by scripts/rebuild-prices) holds figures per commercial region, each with its
source. The default price book (PriceSource=bundled) takes the table's figure and asks the Price List API
(pricing:GetProducts, kept in the state table) for a type the table has no figure for; with PriceSource=live the
Price List is asked first and the table is the fallback. A price neither has is unknown (None), never zero and
never borrowed from another region, and ``PriceBook.why_unknown`` says which source failed and why.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from typing import Any

from costguard.observability import logger

FAILURE_SECONDS = 300.0  # a failed Price List call is not repeated by one price book within five minutes

# SageMaker lists one product per use ("component"); the table's rate is the one they share.
SAGEMAKER_COMPONENTS = ("Training", "Hosting", "Notebook")


@dataclass(frozen=True)
class Price:
    """A price per instance-hour and where it came from."""

    usd_per_hour: float
    source: str


@dataclass(frozen=True)
class Answer:
    """What the Price List said of one type: a price, or None and why (``failed``: the call itself failed)."""

    price: Price | None
    why: str = ""
    failed: bool = False


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


def offered_regions(instance_type: str) -> list[str] | None:
    """The regions the table's EC2 catalogs offer a type in (an ``ml.`` type: its EC2 type), or None when
    they do not know the type."""
    offered: list[str] | None = bundled_table().get("offered", {}).get(instance_type.removeprefix("ml."))
    return offered


def not_offered(instance_type: str, region: str) -> bool:
    """Whether the table knows the type is not offered in the region (so no price list has a rate for it)."""
    if bundled_table().get("missing", {}).get(region, {}).get(instance_type) == "not offered":
        return True
    offered = offered_regions(instance_type)
    return offered is not None and region not in offered


def why_unpriced(instance_type: str, region: str) -> str:
    """Why the table has no figure for a type in a region, as the report says it."""
    table = bundled_table()
    if instance_type in table.get("no_on_demand", {}):
        return f"no on-demand price for {instance_type}: {table['no_on_demand'][instance_type]}"
    missing = table.get("missing", {}).get(region, {}).get(instance_type)
    if not_offered(instance_type, region):
        return f"no price known for {instance_type} in {region}: not offered there when the table was built"
    if missing:
        return f"no price known for {instance_type} in {region}: {missing} when the table was built"
    if instance_type in table.get("unpriced", {}):
        return f"no price known for {instance_type} in {region}: {table['unpriced'][instance_type]}"
    if region not in bundled_regions():
        return (
            f"no price known for {instance_type} in {region}: the bundled table has no figures for {region}"
        )
    return f"no price known for {instance_type} in {region}: not in the bundled table"


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


def _state_table() -> str:
    """The state table the Price List's answers are kept in; "" where none is configured (then the default
    price book does not ask the Price List: a unit test or a tool run without a stack)."""
    try:
        from costguard.settings import get_settings  # settings import this package: read at call time

        return get_settings().state_table
    except Exception:  # settings that do not validate are reported at cold start, not here
        return ""


class PriceBook:
    """Looks prices up; a price nobody knows is None, never zero, and ``why_unknown`` says why."""

    def __init__(self, *, live: bool = False) -> None:
        self.live = live
        self._why: dict[tuple[str, str, str], str] = {}
        self._failed: dict[
            tuple[str, str, str], tuple[float, Any]
        ] = {}  # a failed call, not repeated at once

    def hourly(self, instance_type: str | None, region: str, *, component: str | None = None) -> Price | None:
        """The price of one instance-hour. ``component`` (Training, Hosting, Notebook) picks the SageMaker use.

        PriceSource=live: the Price List API, then the table. The default: the table, then the Price List API
        (kept in the state table) for a type it has no figure for, unless the table says the type has no
        on-demand price or is not offered in the region."""
        if not instance_type:
            return None
        key = (instance_type, region, component or "")
        table = _state_table()
        asked = ""
        if self.live:
            answer = self._ask(instance_type, region, component, table)
            if answer.price is not None:
                return answer.price
            asked = answer.why
        price = bundled_price(instance_type, region, component)
        if price is not None:
            return price
        why = why_unpriced(instance_type, region)
        if not self.live:
            if instance_type in bundled_table().get("no_on_demand", {}) or not_offered(instance_type, region):
                asked = "the AWS Price List API was not asked (the table says why)"
            elif not table:
                asked = "the AWS Price List API was not asked (no state table: not a deployed function)"
            else:
                answer = self._ask(instance_type, region, component, table)
                if answer.price is not None:
                    return answer.price
                asked = answer.why
        self._why[key] = f"{why}; {asked}"
        logger.warning(
            "price unknown", extra={"instance_type": instance_type, "region": region, "why": self._why[key]}
        )
        return None

    def _ask(self, instance_type: str, region: str, component: str | None, table: str) -> Answer:
        """The Price List's answer; a call that failed is not repeated by this book for FAILURE_SECONDS."""
        from costguard.aws.price_list import price_list  # imported only when the Price List is asked

        key = (instance_type, region, component or "")
        failed = self._failed.get(key)
        if failed and time.monotonic() - failed[0] < FAILURE_SECONDS:
            remembered: Answer = failed[1]
            return remembered
        answer: Answer = price_list(instance_type, region, component, table=table)
        if answer.failed:
            self._failed[key] = (time.monotonic(), answer)
        return answer

    def why_unknown(self, instance_type: str | None, region: str, *, component: str | None = None) -> str:
        """Why ``hourly`` found no price: the table's reason and the Price List's (which failed, and how)."""
        if not instance_type:
            return "no instance type"
        said = self._why.get((instance_type, region, component or ""))
        if said is None and component is None:  # asked for one SageMaker use: the first said of any
            said = next((w for (t, r, _), w in self._why.items() if (t, r) == (instance_type, region)), None)
        return said or why_unpriced(instance_type, region)


@lru_cache(maxsize=2)
def price_book(live: bool = False) -> PriceBook:
    return PriceBook(live=live)
