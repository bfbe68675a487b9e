"""Bundled rates for what the audit prices besides instance-hours: Savings Plans discounts (estimates) and storage
per GB-month (published list rates), from holdings.json. A rate the table does not hold is unknown (None), never
zero and never borrowed from another region or family."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def holdings_table() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("holdings.json").read_text(encoding="utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def savings_plan_discount(family: str, plan: str, term: str) -> float | None:
    """The estimated share off on-demand a plan (``compute``, ``ec2_instance``) of ``term`` (``1yr``, ``3yr``), no
    upfront, gives ``family``, or None."""
    discounts = holdings_table()["savings_plans"]["discounts"]
    value = discounts.get(plan, {}).get(term, {}).get(family)
    return None if value is None else float(value)


def savings_plan_rate(on_demand_usd: float, family: str, plan: str, term: str) -> float | None:
    """The hourly rate under the plan, rounded to 4 places as AWS's rates are, or None."""
    discount = savings_plan_discount(family, plan, term)
    return None if discount is None else round(on_demand_usd * (1 - discount), 4)


def savings_plan_assumptions() -> dict[str, Any]:
    """What every commitment estimate assumes, as the report states it."""
    plans = holdings_table()["savings_plans"]
    return {
        **plans["assumptions"],
        "rates": "estimated discounts off on-demand, not quotes",
        "source": plans["source"],
        "url": plans["url"],
        "as_of": plans["as_of"],
    }


def ebs_gb_month(volume_type: str, region: str) -> float | None:
    value = holdings_table()["storage"]["ebs_gb_month"].get(region, {}).get(volume_type)
    return None if value is None else float(value)


def s3_gb_month(storage_class: str, region: str) -> float | None:
    value = holdings_table()["storage"]["s3_gb_month"].get(region, {}).get(storage_class)
    return None if value is None else float(value)


def storage_source() -> dict[str, Any]:
    storage = holdings_table()["storage"]
    return {"source": storage["source"], "urls": storage["urls"], "as_of": storage["as_of"]}
