"""Prices: the bundled dated table, and the live Price List path against botocore's real service model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from costguard.aws import clients
from costguard.pricing import PriceBook, bundled_price, bundled_table
from costguard.pricing.live import _filters, live_price

LIVE_SOURCE = "AWS Price List API"


def test_bundled_price_for_p4d_names_the_table_date() -> None:
    price = bundled_price("p4d.24xlarge", "us-east-1")
    assert price is not None
    assert price.usd_per_hour == 21.958
    as_of = bundled_table()["as_of"]
    assert as_of in price.source
    assert price.source == f"bundled table of {as_of}"


def test_bundled_sagemaker_price_comes_from_the_sagemaker_table() -> None:
    price = bundled_price("ml.p3.2xlarge", "us-east-1")
    assert price is not None
    assert price.usd_per_hour == bundled_table()["sagemaker"]["ml.p3.2xlarge"]
    assert price.usd_per_hour != bundled_table()["ec2"]["p3.2xlarge"]


@pytest.mark.parametrize("instance_type", ["x9.mega", "p5e.48xlarge", "ml.x9.mega"])
def test_unknown_type_is_none_never_zero(instance_type: str) -> None:
    assert bundled_price(instance_type, "us-east-1") is None
    assert PriceBook(live=False).hourly(instance_type, "us-east-1") is None


def test_other_region_says_it_is_the_us_east_1_figure() -> None:
    price = bundled_price("p4d.24xlarge", "eu-west-1")
    assert price is not None
    assert price.usd_per_hour == 21.958
    assert "us-east-1 figure" in price.source
    home = bundled_price("p4d.24xlarge", "us-east-1")
    assert home is not None
    assert "figure" not in home.source


@pytest.mark.parametrize("instance_type", [None, ""])
def test_no_instance_type_has_no_price(instance_type: str | None) -> None:
    assert PriceBook(live=False).hourly(instance_type, "us-east-1") is None


def test_bundled_book_matches_the_table() -> None:
    price = PriceBook(live=False).hourly("p4d.24xlarge", "us-east-1")
    assert price == bundled_price("p4d.24xlarge", "us-east-1")


# --- the live path -----------------------------------------------------------------------------------------


def _product(usd: str) -> str:
    """One Price List product, as the API returns it: a JSON string."""
    return json.dumps(
        {
            "product": {"productFamily": "Compute Instance", "attributes": {"instanceType": "p4d.24xlarge"}},
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    "ABC.JRTCKXETXF": {
                        "offerTermCode": "JRTCKXETXF",
                        "priceDimensions": {
                            "ABC.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "description": "on-demand",
                                "pricePerUnit": {"USD": usd},
                            }
                        },
                    }
                }
            },
        }
    )


def _expected(
    instance_type: str, region: str = "us-east-1", service_code: str = "AmazonEC2"
) -> dict[str, Any]:
    return {"ServiceCode": service_code, "Filters": _filters(instance_type, region), "MaxResults": 10}


def _response(*prices: str) -> dict[str, Any]:
    return {"FormatVersion": "aws_v1", "PriceList": [_product(p) for p in prices]}


class StubbedPricing:
    """A real pricing client (real service model) behind a Stubber, counting GetProducts calls."""

    def __init__(self) -> None:
        self.client = boto3.client("pricing", region_name="us-east-1")
        self.calls: list[dict[str, Any]] = []
        self.client.meta.events.register("before-parameter-build.pricing.GetProducts", self._record)
        self.stubber = Stubber(self.client)

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        self.calls.append(params)


@pytest.fixture
def pricing(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubbedPricing]:
    live_price.cache_clear()
    stubbed = StubbedPricing()
    monkeypatch.setattr(clients, "pricing", lambda: stubbed.client)
    with stubbed.stubber:
        yield stubbed
    live_price.cache_clear()


def test_filters_for_ec2_pin_linux_shared_on_demand() -> None:
    filters = {f["Field"]: f["Value"] for f in _filters("p4d.24xlarge", "us-west-2")}
    assert filters == {
        "instanceType": "p4d.24xlarge",
        "regionCode": "us-west-2",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
    }
    assert all(f["Type"] == "TERM_MATCH" for f in _filters("p4d.24xlarge", "us-west-2"))


def test_live_price_comes_from_the_price_list_api(pricing: StubbedPricing) -> None:
    pricing.stubber.add_response("get_products", _response("21.9580000000"), _expected("p4d.24xlarge"))
    price = PriceBook(live=True).hourly("p4d.24xlarge", "us-east-1")
    assert price is not None
    assert price.usd_per_hour == 21.958
    assert price.source == LIVE_SOURCE
    pricing.stubber.assert_no_pending_responses()


def test_live_price_is_cached_one_call_per_type_and_region(pricing: StubbedPricing) -> None:
    pricing.stubber.add_response("get_products", _response("21.9580000000"), _expected("p4d.24xlarge"))
    book = PriceBook(live=True)
    first = book.hourly("p4d.24xlarge", "us-east-1")
    second = book.hourly("p4d.24xlarge", "us-east-1")
    assert first == second
    assert second is not None
    assert second.source == LIVE_SOURCE
    assert len(pricing.calls) == 1
    pricing.stubber.assert_no_pending_responses()


def test_live_price_differs_from_table_is_taken_from_the_api(pricing: StubbedPricing) -> None:
    pricing.stubber.add_response("get_products", _response("25.5000000000"), _expected("p4d.24xlarge"))
    price = PriceBook(live=True).hourly("p4d.24xlarge", "us-east-1")
    assert price is not None
    assert price.usd_per_hour == 25.5
    assert price.source == LIVE_SOURCE


def test_zero_price_dimensions_are_ignored(pricing: StubbedPricing) -> None:
    pricing.stubber.add_response(
        "get_products", _response("0.0000000000", "25.5000000000"), _expected("p4d.24xlarge")
    )
    price = PriceBook(live=True).hourly("p4d.24xlarge", "us-east-1")
    assert price is not None
    assert price.usd_per_hour == 25.5
    assert price.source == LIVE_SOURCE


def test_ambiguous_live_response_falls_back_to_the_table(pricing: StubbedPricing) -> None:
    pricing.stubber.add_response(
        "get_products", _response("21.9580000000", "32.7726000000"), _expected("p4d.24xlarge")
    )
    price = PriceBook(live=True).hourly("p4d.24xlarge", "us-east-1")
    assert price == bundled_price("p4d.24xlarge", "us-east-1")
    assert price is not None
    assert price.source.startswith("bundled table of")
    pricing.stubber.assert_no_pending_responses()


def test_empty_live_response_for_unknown_type_is_none(pricing: StubbedPricing) -> None:
    pricing.stubber.add_response("get_products", {"PriceList": []}, _expected("x9.mega"))
    assert PriceBook(live=True).hourly("x9.mega", "us-east-1") is None
    pricing.stubber.assert_no_pending_responses()


def test_client_error_falls_back_to_the_table(pricing: StubbedPricing) -> None:
    pricing.stubber.add_client_error(
        "get_products",
        service_error_code="InternalErrorException",
        service_message="boom",
        http_status_code=500,
        expected_params=_expected("p4d.24xlarge"),
    )
    price = PriceBook(live=True).hourly("p4d.24xlarge", "us-east-1")
    assert price is not None
    assert price.usd_per_hour == 21.958
    assert price.source.startswith("bundled table of")
    assert len(pricing.calls) == 1
    pricing.stubber.assert_no_pending_responses()


def test_sagemaker_type_asks_the_sagemaker_service(pricing: StubbedPricing) -> None:
    expected = _expected("ml.p3.2xlarge", service_code="AmazonSageMaker")
    assert {"Type": "TERM_MATCH", "Field": "component", "Value": "Training"} in expected["Filters"]
    pricing.stubber.add_response("get_products", _response("3.8250000000"), expected)
    price = PriceBook(live=True).hourly("ml.p3.2xlarge", "us-east-1")
    assert price is not None
    assert price.usd_per_hour == 3.825
    assert price.source == LIVE_SOURCE
    assert pricing.calls[0]["ServiceCode"] == "AmazonSageMaker"
    pricing.stubber.assert_no_pending_responses()
