"""The Price List API path (moto has no Pricing service: tested with botocore's Stubber)."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from costguard.aws import clients
from costguard.permissions import needs
from costguard.pricing import SAGEMAKER_COMPONENTS, Price, service_of

if TYPE_CHECKING:
    from mypy_boto3_pricing.type_defs import FilterTypeDef

# Asked only when COSTGUARD_PRICE_SOURCE is live, which a stack parameter may choose at any time.
PERMISSIONS = needs("pricing:GetProducts")

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
        wanted = component if component in SAGEMAKER_COMPONENTS else "Training"
        filters.append(term("component", wanted))
    return filters


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
    return Price(prices.pop(), "AWS Price List API")
