"""The Price List API path, the price book's adapter (moto has no Pricing service: tested with botocore's Stubber).

``live_price`` asks GetProducts once per type, region (and SageMaker component) for the life of the process.
``price_list`` is what the price book calls: the same answer, kept in the state table (where one is configured)
so that a cold start or another function does not ask again, and with the reason when there is no answer.
"""

from __future__ import annotations

import json
from datetime import timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from costguard import clock
from costguard.aws import clients
from costguard.observability import logger
from costguard.permissions import needs
from costguard.pricing import SAGEMAKER_COMPONENTS, Answer, Price, service_of

if TYPE_CHECKING:
    from mypy_boto3_pricing.type_defs import FilterTypeDef

# Asked when COSTGUARD_PRICE_SOURCE is live (a stack parameter may choose it at any time), and, with the
# bundled default, for a type the table has no figure for.
PERMISSIONS = needs("pricing:GetProducts")
# The answers kept in the state table (one item per type, region and component; read, then written).
CACHE_PERMISSIONS = needs("dynamodb:GetItem", "dynamodb:UpdateItem")

SOURCE = "AWS Price List API"
CACHE_PREFIX = "price-list#"
FOUND_TTL = timedelta(days=30)  # a rate AWS lists is kept a month (rates change a few times a year)
NONE_TTL = timedelta(days=1)  # "lists none" is asked again the next day

_SERVICE_CODES = {"ec2": "AmazonEC2", "sagemaker": "AmazonSageMaker"}


def _filters(instance_type: str, region: str, component: str | None = None) -> list[FilterTypeDef]:
    def term(field: str, value: str) -> FilterTypeDef:
        return {"Type": "TERM_MATCH", "Field": field, "Value": value}

    filters = [term("instanceType", instance_type), term("regionCode", region)]
    if service_of(instance_type) == "ec2":
        filters += [
            term("operatingSystem", "Linux"),
            term("tenancy", "Shared"),
            term("preInstalledSw", "NA"),
            term("capacitystatus", "Used"),
        ]
    else:
        # SageMaker lists one product per component (use); training is the reference rate.
        filters.append(term("component", _component(instance_type, component)))
    return filters


def _component(instance_type: str, component: str | None) -> str:
    if service_of(instance_type) == "ec2":
        return ""
    return component if component in SAGEMAKER_COMPONENTS else "Training"


def _on_demand_usd(product: dict[str, Any]) -> float | None:
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if usd is not None and float(usd) > 0:
                return float(usd)
    return None


@lru_cache(maxsize=512)
def live_price(instance_type: str, region: str, component: str | None = None) -> Price | None:
    """One GetProducts call per type, region (and SageMaker component) for the life of the process."""
    service = service_of(instance_type)
    response = clients.pricing().get_products(
        ServiceCode=_SERVICE_CODES[service],
        Filters=_filters(instance_type, region, component),
        MaxResults=10,
    )
    prices = {usd for raw in response.get("PriceList", []) if (usd := _on_demand_usd(json.loads(raw)))}
    if len(prices) != 1:
        # None or several candidates: refuse to guess; the caller falls back to the table.
        return None
    return Price(prices.pop(), SOURCE)


def cache_key(instance_type: str, region: str, component: str | None = None) -> str:
    """The state table item of one Price List answer."""
    return f"{CACHE_PREFIX}{service_of(instance_type)}#{region}#{instance_type}#{_component(instance_type, component)}"


def _cached(table: str, key: str) -> Answer | None:
    try:
        item = clients.client("dynamodb").get_item(TableName=table, Key={"id": {"S": key}}).get("Item")
    except Exception as error:  # the cache is a saving, never a reason to lose the price
        logger.warning("price cache read failed", extra={"key": key, "error": str(error)})
        return None
    if not item or int(item.get("expiration", {}).get("N", "0")) < clock.now().timestamp():
        return None
    if "usd" in item:
        asked = item.get("asked_at", {}).get("S", "")[:10]
        return Answer(Price(float(item["usd"]["N"]), f"{SOURCE} (asked {asked})" if asked else SOURCE))
    return Answer(None, "the AWS Price List API lists no single on-demand rate for it")


def _keep(table: str, key: str, price: Price | None) -> None:
    now = clock.now()
    expires = now + (FOUND_TTL if price is not None else NONE_TTL)
    values: dict[str, Any] = {
        ":asked": {"S": now.isoformat()},
        ":expires": {"N": str(int(expires.timestamp()))},
    }
    update = "SET asked_at = :asked, expiration = :expires"
    if price is not None:
        values[":usd"] = {"N": repr(price.usd_per_hour)}
        update += ", usd = :usd REMOVE lists_none"
    else:
        values[":none"] = {"BOOL": True}
        update += ", lists_none = :none REMOVE usd"
    try:
        clients.client("dynamodb").update_item(
            TableName=table, Key={"id": {"S": key}}, UpdateExpression=update, ExpressionAttributeValues=values
        )
    except Exception as error:
        logger.warning("price cache write failed", extra={"key": key, "error": str(error)})


def price_list(instance_type: str, region: str, component: str | None = None, *, table: str = "") -> Answer:
    """The Price List's on-demand rate of one type: from the state table ``table`` when it holds a recent
    answer, else asked (and kept there). A failed call is an Answer with ``failed`` and the error, never raised."""
    key = cache_key(instance_type, region, component)
    if table and (kept := _cached(table, key)) is not None:
        return kept
    try:
        price = live_price(instance_type, region, component)
    except Exception as error:  # any Price List failure: no price, and why
        why = f"the AWS Price List API failed ({type(error).__name__}: {error})"
        logger.warning(
            "live price lookup failed", extra={"instance_type": instance_type, "region": region, "why": why}
        )
        return Answer(None, why, failed=True)
    if table:
        _keep(table, key, price)
    if price is None:
        return Answer(None, "the AWS Price List API lists no single on-demand rate for it")
    return Answer(price)
