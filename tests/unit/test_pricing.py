"""Prices: the bundled dated table, and the live Price List path against botocore's real service model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from costguard.aws import clients
from costguard.aws.price_list import _filters, live_price
from costguard.pricing import (
    Price,
    PriceBook,
    bundled_price,
    bundled_regions,
    bundled_table,
    figure_source,
    region_prices,
    why_unpriced,
)

LIVE_SOURCE = "AWS Price List API"


def test_bundled_price_for_p4d_names_the_table_date_the_region_and_the_source() -> None:
    price = bundled_price("p4d.24xlarge", "us-east-1")
    assert price is not None
    assert price.usd_per_hour == 21.958
    as_of = bundled_table()["as_of"]
    assert price.source == f"bundled table of {as_of} (us-east-1, AWS Price List of 2026-09-30)"


def test_bundled_sagemaker_price_comes_from_the_sagemaker_table() -> None:
    price = bundled_price("ml.p3.2xlarge", "us-east-1")
    assert price is not None
    assert price.usd_per_hour == bundled_table()["sagemaker"]["ml.p3.2xlarge"]
    assert price.usd_per_hour != bundled_table()["ec2"]["p3.2xlarge"]


@pytest.mark.parametrize("instance_type", ["x9.mega", "p5e.48xlarge", "ml.x9.mega"])
def test_unknown_type_is_none_never_zero(instance_type: str) -> None:
    assert bundled_price(instance_type, "us-east-1") is None
    assert PriceBook(live=False).hourly(instance_type, "us-east-1") is None


def test_another_region_has_its_own_figure_and_source() -> None:
    price = bundled_price("g5.xlarge", "eu-west-1")
    assert price is not None
    assert price.usd_per_hour == 1.123
    assert "eu-west-1" in price.source
    assert "AWS Price List snapshot" in price.source
    assert bundled_price("g5.xlarge", "us-west-2") == Price(1.006, price_source("g5.xlarge", "us-west-2"))


@pytest.mark.parametrize(
    ("instance_type", "region"),
    [
        ("p5.48xlarge", "eu-west-1"),  # not offered there when the table was built
        ("x9.mega", "ap-east-2"),  # a region the table has no figures for
        ("g6.xlarge", "eu-west-1"),  # not offered there when the table was built
        ("ml.g6.xlarge", "eu-central-1"),  # no public source for the SageMaker type
    ],
)
def test_a_figure_the_table_lacks_is_unknown_never_borrowed_from_another_region(
    instance_type: str, region: str
) -> None:
    assert bundled_price(instance_type, region) is None
    assert PriceBook(live=False).hourly(instance_type, region) is None
    assert why_unpriced(instance_type, region).startswith(f"no price known for {instance_type} in {region}")


def test_why_unpriced_names_the_reason() -> None:
    assert "Capacity Blocks" in why_unpriced("p5e.48xlarge", "us-east-1")
    assert "has no figures for ap-east-2" in why_unpriced("x9.mega", "ap-east-2")
    assert "not offered there" in why_unpriced("g6.xlarge", "eu-west-1")


def test_every_figure_has_a_dated_source() -> None:
    for region in bundled_regions():
        for service in ("ec2", "sagemaker"):
            for instance_type in region_prices(region, service):
                source = figure_source(instance_type, region)
                assert source is not None, (region, instance_type)
                assert source["title"] and source["as_of"] and source["label"], (region, instance_type)


def test_the_table_covers_the_four_regions() -> None:
    assert {"us-east-1", "us-west-2", "eu-west-1", "eu-central-1"} <= set(bundled_regions())
    for region in ("us-east-1", "us-west-2", "eu-west-1", "eu-central-1"):
        assert len(region_prices(region, "ec2")) >= 25, region


def test_ml_p4d_has_a_price_and_says_it_may_be_stale() -> None:
    price = bundled_price("ml.p4d.24xlarge", "us-east-1")
    assert price is not None
    assert price.usd_per_hour == 37.688
    assert "before the 2025-06 P4/P5 reduction" in price.source


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
    instance_type: str,
    region: str = "us-east-1",
    service_code: str = "AmazonEC2",
    component: str | None = None,
) -> dict[str, Any]:
    return {
        "ServiceCode": service_code,
        "Filters": _filters(instance_type, region, component),
        "MaxResults": 10,
    }


def price_source(instance_type: str, region: str) -> str:
    price = bundled_price(instance_type, region)
    assert price is not None
    return price.source


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


def test_a_sagemaker_component_is_asked_for_by_name(pricing: StubbedPricing) -> None:
    expected = _expected("ml.g5.xlarge", service_code="AmazonSageMaker", component="Hosting")
    assert {"Type": "TERM_MATCH", "Field": "component", "Value": "Hosting"} in expected["Filters"]
    pricing.stubber.add_response("get_products", _response("1.4080000000"), expected)
    price = PriceBook(live=True).hourly("ml.g5.xlarge", "us-east-1", component="Hosting")
    assert price is not None
    assert price.usd_per_hour == 1.408
    pricing.stubber.assert_no_pending_responses()


def test_a_sagemaker_component_rate_that_differs_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    table = dict(bundled_table())
    table["sagemaker_components"] = {"us-east-1": {"Hosting": {"ml.g5.xlarge": 1.5}}}
    monkeypatch.setattr("costguard.pricing.bundled_table", lambda: table)
    hosting = PriceBook(live=False).hourly("ml.g5.xlarge", "us-east-1", component="Hosting")
    training = PriceBook(live=False).hourly("ml.g5.xlarge", "us-east-1", component="Training")
    assert hosting is not None and hosting.usd_per_hour == 1.5
    assert training is not None and training.usd_per_hour == 1.408
