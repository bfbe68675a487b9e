"""Prices everywhere (issue 40): the bundled table covers every commercial region the catalogs offer each GPU and
accelerator type in, the default price book falls back to AWS's Price List (kept in the state table) for what
the table lacks and says which source failed, and scripts/rebuild-prices rebuilds the same table from the same
inputs."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws
from moto.ec2.models.instance_types import INSTANCE_TYPES

import costguard.pricing as pricing
from costguard.aws import clients
from costguard.aws.price_list import _filters, cache_key, live_price
from costguard.pricing import (
    PriceBook,
    bundled_price,
    bundled_regions,
    bundled_table,
    figure_source,
    offered_regions,
    region_prices,
    why_unpriced,
)
from tests.unit.test_price_coverage import event_types, world_types

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "rebuild-prices"
COMMERCIAL = re.compile(
    r"(af|ap|ca|eu|il|me|mx|sa|us)-(central|north|south|east|west|northeast|northwest|southeast|southwest)-\d+"
)
REASONS = {"not offered", "no public source"}
TABLE_NAME = "costguard-state"


def _script() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("rebuild_prices_regions", str(SCRIPT))
    spec = importlib.util.spec_from_loader("rebuild_prices_regions", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


rebuild = _script()


# --- the shipped table ------------------------------------------------------------------------------------


def known_types() -> set[str]:
    """Every type the code knows: the table's, the worlds' and events', and the GPU and Neuron types AWS
    describes (moto's DescribeInstanceTypes)."""
    table = bundled_table()
    types = {
        t for region in bundled_regions() for s in ("ec2", "sagemaker") for t in region_prices(region, s)
    }
    types |= {t for _, _, t in event_types() | world_types()}
    types |= {
        name
        for name, described in INSTANCE_TYPES.items()
        if (described.get("GpuInfo") or {}).get("Gpus")
        or (described.get("NeuronInfo") or {}).get("NeuronDevices")
    }
    return types | set(table["unpriced"]) | set(table["no_on_demand"])


def offered_in(instance_type: str) -> list[str]:
    """The commercial regions the table's catalogs offer a type in (an ``ml.`` type: its EC2 type's)."""
    return [r for r in offered_regions(instance_type) or [] if COMMERCIAL.fullmatch(r)]


def test_the_table_covers_every_commercial_region_the_catalogs_offer_gpus_in() -> None:
    regions = set(bundled_regions())
    assert all(COMMERCIAL.fullmatch(r) for r in regions), sorted(regions)
    assert len(regions) >= 25
    offered = {r for regions_of in bundled_table()["offered"].values() for r in regions_of}
    assert offered <= regions  # every region a type is offered in has figures


@pytest.mark.parametrize("instance_type", sorted(known_types()))
def test_every_known_type_has_a_price_where_it_is_offered_or_a_stated_reason(instance_type: str) -> None:
    table = bundled_table()
    if reason := table["no_on_demand"].get(instance_type) or table["unpriced"].get(instance_type):
        assert reason.strip()
        return
    regions = offered_in(instance_type)
    assert regions or bundled_price(instance_type, "us-east-1"), (
        f"{instance_type}: offered nowhere, no reason"
    )
    for region in regions:
        stated = table["missing"].get(region, {}).get(instance_type)
        assert bundled_price(instance_type, region) is not None or stated in REASONS, (
            f"{instance_type} is offered in {region}: no price and no stated reason"
        )


def test_every_missing_figure_says_why() -> None:
    for region, by_type in bundled_table()["missing"].items():
        assert COMMERCIAL.fullmatch(region)
        for instance_type, reason in by_type.items():
            assert reason in REASONS, (region, instance_type, reason)
            assert bundled_price(instance_type, region) is None
            assert reason in why_unpriced(instance_type, region) or "not offered there" in why_unpriced(
                instance_type, region
            )


@pytest.mark.parametrize("region", ["eu-west-1", "eu-central-1"])
def test_the_issue_regions_price_sagemaker_and_the_big_types(region: str) -> None:
    table = bundled_table()
    for instance_type in [
        *table["sagemaker"],
        "p4d.24xlarge",
        "p4de.24xlarge",
        "p5.48xlarge",
        "trn1.32xlarge",
    ]:
        if bundled_price(instance_type, region) is None:
            assert region not in offered_in(instance_type), (
                f"{instance_type} is offered in {region}: no price"
            )
            assert "not offered there" in why_unpriced(instance_type, region)
    price = bundled_price("ml.p4d.24xlarge", "eu-west-1")
    assert price is not None
    source = figure_source("ml.p4d.24xlarge", "eu-west-1")
    assert source is not None and "derived" in source["label"] and source["as_of"]


def test_a_derived_sagemaker_rate_follows_the_ec2_rate_of_its_region() -> None:
    ec2 = region_prices("eu-west-1", "ec2")["g5.xlarge"] / bundled_table()["ec2"]["g5.xlarge"]
    derived = region_prices("eu-west-1", "sagemaker")["ml.g5.xlarge"]
    assert derived == pytest.approx(bundled_table()["sagemaker"]["ml.g5.xlarge"] * ec2, abs=1e-4)


def test_every_snapshot_source_names_its_repository_commit_and_date() -> None:
    sources = bundled_table()["sources"]
    snapshots = [s for s in sources.values() if "snapshot" in s["label"] and "derived_from" not in s]
    assert snapshots
    for record in snapshots:
        assert record["repo"] and re.fullmatch(r"[0-9a-f]{40}", record["commit"]) and record["path"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", bundled_table()["as_of"])


def test_the_shipped_table_is_small() -> None:
    assert (ROOT / "shared" / "costguard" / "pricing" / "prices.json").stat().st_size < 300_000


# --- the Price List fallback --------------------------------------------------------------------------------


def _product(usd: str) -> str:
    return json.dumps(
        {
            "product": {"attributes": {"instanceType": "ml.g6e.xlarge"}},
            "terms": {
                "OnDemand": {
                    "T.JRTCKXETXF": {
                        "priceDimensions": {"T.D": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}
                    }
                }
            },
        }
    )


class StubbedPricing:
    def __init__(self) -> None:
        self.client = boto3.client("pricing", region_name="us-east-1")
        self.calls: list[dict[str, Any]] = []
        self.client.meta.events.register("before-parameter-build.pricing.GetProducts", self._record)
        self.stubber = Stubber(self.client)

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        self.calls.append(params)

    def answers(self, instance_type: str, region: str, *prices: str) -> None:
        expected = {
            "ServiceCode": "AmazonSageMaker" if instance_type.startswith("ml.") else "AmazonEC2",
            "Filters": _filters(instance_type, region),
            "MaxResults": 10,
        }
        self.stubber.add_response(
            "get_products", {"FormatVersion": "aws_v1", "PriceList": [_product(p) for p in prices]}, expected
        )

    def fails(self, instance_type: str, region: str) -> None:
        self.stubber.add_client_error(
            "get_products",
            service_error_code="AccessDeniedException",
            service_message="not allowed",
            http_status_code=400,
        )


@pytest.fixture
def state_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with mock_aws():
        clients.client("dynamodb").create_table(
            TableName=TABLE_NAME,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        monkeypatch.setattr(pricing, "_state_table", lambda: TABLE_NAME)
        yield TABLE_NAME


@pytest.fixture
def price_list(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubbedPricing]:
    live_price.cache_clear()
    stubbed = StubbedPricing()
    monkeypatch.setattr(clients, "pricing", lambda: stubbed.client)
    with stubbed.stubber:
        yield stubbed
    live_price.cache_clear()


def test_the_default_book_asks_the_price_list_for_what_the_table_lacks_and_keeps_it(
    state_table: str, price_list: StubbedPricing
) -> None:
    assert bundled_price("ml.g6e.xlarge", "us-east-1") is None
    price_list.answers("ml.g6e.xlarge", "us-east-1", "2.7950000000")
    price = PriceBook().hourly("ml.g6e.xlarge", "us-east-1")
    assert price is not None and price.usd_per_hour == 2.795 and price.source == "AWS Price List API"
    price_list.stubber.assert_no_pending_responses()
    item = clients.client("dynamodb").get_item(
        TableName=state_table, Key={"id": {"S": cache_key("ml.g6e.xlarge", "us-east-1")}}
    )["Item"]
    assert item["usd"]["N"] == "2.795" and int(item["expiration"]["N"]) > 0
    # Another process (a cold start, another function): the state table answers, the Price List is not asked.
    live_price.cache_clear()
    again = PriceBook().hourly("ml.g6e.xlarge", "us-east-1")
    assert again is not None and again.usd_per_hour == 2.795 and again.source.startswith("AWS Price List API")
    assert len(price_list.calls) == 1


def test_the_table_comes_first_for_the_default_book(state_table: str, price_list: StubbedPricing) -> None:
    price = PriceBook().hourly("ml.p4d.24xlarge", "eu-west-1")
    assert price == bundled_price("ml.p4d.24xlarge", "eu-west-1")
    assert price_list.calls == []


def test_unknown_only_when_both_fail_and_it_says_which(state_table: str, price_list: StubbedPricing) -> None:
    price_list.fails("ml.g6e.xlarge", "us-east-1")
    book = PriceBook()
    assert book.hourly("ml.g6e.xlarge", "us-east-1") is None
    why = book.why_unknown("ml.g6e.xlarge", "us-east-1")
    assert why.startswith("no price known for ml.g6e.xlarge in us-east-1: no public source for its SageMaker")
    assert "; the AWS Price List API failed (AccessDeniedException" in why
    # The failure is not asked again at once, and not kept in the state table.
    assert book.hourly("ml.g6e.xlarge", "us-east-1") is None
    assert len(price_list.calls) == 1
    stored = clients.client("dynamodb").get_item(
        TableName=state_table, Key={"id": {"S": cache_key("ml.g6e.xlarge", "us-east-1")}}
    )
    assert "Item" not in stored


def test_a_price_list_without_a_rate_is_said_and_kept(state_table: str, price_list: StubbedPricing) -> None:
    price_list.answers("ml.g6e.xlarge", "us-east-1")
    book = PriceBook()
    assert book.hourly("ml.g6e.xlarge", "us-east-1") is None
    assert "lists no single on-demand rate" in book.why_unknown("ml.g6e.xlarge", "us-east-1")
    live_price.cache_clear()
    assert (
        PriceBook().hourly("ml.g6e.xlarge", "us-east-1") is None
    )  # the state table's "none", not asked again
    assert len(price_list.calls) == 1


def test_what_the_table_says_is_not_offered_is_not_asked(
    state_table: str, price_list: StubbedPricing
) -> None:
    book = PriceBook()
    assert book.hourly("g6.xlarge", "eu-west-1") is None
    assert book.hourly("p5e.48xlarge", "us-east-1") is None
    assert price_list.calls == []
    assert "not offered there" in book.why_unknown("g6.xlarge", "eu-west-1")
    assert "was not asked" in book.why_unknown("g6.xlarge", "eu-west-1")


def test_without_a_state_table_the_default_book_does_not_ask(price_list: StubbedPricing) -> None:
    book = PriceBook()
    assert book.hourly("ml.g6e.xlarge", "us-east-1") is None
    assert price_list.calls == []
    assert "no state table" in book.why_unknown("ml.g6e.xlarge", "us-east-1")


# --- scripts/rebuild-prices on fixture catalogs -----------------------------------------------------------


def _fixtures(root: Path) -> list[str]:
    """A vantage-style GPU list, a skypilot-style CSV and a rates file, with the sources file, as the real
    inputs are shaped (a few types and regions)."""
    vantage = [
        {
            "name": "g5.xlarge",
            "pricing": {
                "us-east-1": {"onDemand": 1.006},
                "eu-west-1": {"onDemand": 1.123},
                "us-east-1-atl-1": {"onDemand": 1.2},  # a Local Zone: not a region
                "us-gov-west-1": {"onDemand": 1.3},  # GovCloud: not commercial
            },
            "availability": ["us-east-1", "eu-west-1", "us-east-1-atl-1", "us-gov-west-1"],
        },
        {
            "name": "p4d.24xlarge",
            "pricing": {"us-east-1": {"onDemand": 21.957642}, "eu-west-1": {"onDemand": 23.71569}},
            "availability": ["us-east-1", "eu-west-1", "ap-south-2"],  # offered, no rate: no public source
        },
        {"name": "p5.48xlarge", "pricing": {"us-east-1": {"onDemand": 55.04}}, "availability": ["us-east-1"]},
        {"name": "m5.large", "pricing": {"us-east-1": {"onDemand": 0.096}}, "availability": ["us-east-1"]},
    ]
    (root / "gpus.js").write_text("// made here\nconst allGPUInstances = " + json.dumps(vantage) + ";\n")
    (root / "vms.csv").write_text(
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone\n"
        "dl1.24xlarge,Gaudi,8,96,768,,13.10904,,us-east-1,use1-az1\n"
        "dl1.24xlarge,Gaudi,8,96,768,,13.10904,,us-east-1,use1-az2\n"
        "g5.xlarge,A10G,1,4,16,,9.99,,eu-west-1,euw1-az1\n"  # older: the first input's figure wins
    )
    rates = {
        "ec2": {"us-east-1": {"p4d.24xlarge": {"usd": 21.958, "source": "published"}}},
        "sagemaker": {
            "us-east-1": {
                "ml.g5.xlarge": {"usd": 1.408, "source": "published"},
                "ml.p5.48xlarge": {"usd": 113.068, "source": "published"},
            }
        },
    }
    (root / "rates.json").write_text(json.dumps(rates))
    sources = {
        "published": {"label": "AWS pricing page", "title": "t", "as_of": "2026-09-30", "url": "u"},
        "gpus": {"label": "GPU snapshot", "title": "t", "as_of": "2026-01-21", "url": "u", "repo": "o/r"},
        "sky": {"label": "older snapshot", "title": "t", "as_of": "before 2025-06-05", "url": "u"},
    }
    (root / "sources.json").write_text(json.dumps(sources))
    return [
        "--sources",
        str(root / "sources.json"),
        "--input",
        str(root / "rates.json"),
        "--input",
        f"gpus={root / 'gpus.js'}",
        "--input",
        f"sky={root / 'vms.csv'}",
    ]


def test_the_script_rebuilds_the_same_table_from_the_same_inputs(tmp_path: Path) -> None:
    args = _fixtures(tmp_path)
    current = {"no_on_demand": {"p5e.48xlarge": "Capacity Blocks only"}, "unpriced": {"g7.2xlarge": "newer"}}
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    for out in (first, second):
        out.write_text(json.dumps(current))
        assert rebuild.main([*args, "--out", str(out)]) == 0
    assert first.read_bytes() == second.read_bytes()
    assert rebuild.main([*args, "--out", str(first), "--check"]) == 0
    table = json.loads(first.read_text())
    assert sorted(table["regions"]) == ["eu-west-1"]  # no Local Zone, no GovCloud, no region without a figure
    assert (
        "ap-south-2" in table["offered"]["p4d.24xlarge"]
        and "us-gov-west-1" not in table["offered"]["g5.xlarge"]
    )
    assert table["ec2"] == {
        "dl1.24xlarge": 13.10904,
        "g5.xlarge": 1.006,
        "p4d.24xlarge": 21.958,
        "p5.48xlarge": 55.04,
    }
    assert table["regions"]["eu-west-1"]["ec2"] == {"g5.xlarge": 1.123, "p4d.24xlarge": 23.71569}
    assert table["figure_sources"]["us-east-1"]["ec2"] == {
        "*": "gpus",
        "dl1.24xlarge": "sky",
        "p4d.24xlarge": "published",
    }
    # SageMaker: derived from the us-east-1 rate and the one snapshot's two EC2 rates; the rest says why.
    assert table["regions"]["eu-west-1"]["sagemaker"] == {"ml.g5.xlarge": round(1.408 * 1.123 / 1.006, 4)}
    assert table["figure_sources"]["eu-west-1"]["sagemaker"] == {"*": "sagemaker-derived-gpus"}
    assert table["sources"]["sagemaker-derived-gpus"]["as_of"] == "2026-01-21"
    assert table["missing"] == {
        "ap-south-2": {
            "ml.g5.xlarge": "not offered",
            "ml.p5.48xlarge": "not offered",
            "p4d.24xlarge": "no public source",
        },
        "eu-west-1": {"ml.p5.48xlarge": "not offered"},
    }
    assert table["offered"]["p4d.24xlarge"] == ["ap-south-2", "eu-west-1", "us-east-1"]
    assert table["as_of"] == "2026-09-30"
    assert table["no_on_demand"] == current["no_on_demand"] and table["unpriced"] == current["unpriced"]
    assert "m5.large" not in table["ec2"]


def test_regions_keeps_only_the_regions_named(tmp_path: Path) -> None:
    args = _fixtures(tmp_path)
    out = tmp_path / "prices.json"
    assert rebuild.main([*args, "--out", str(out), "--regions", "us-east-1,eu-west-1"]) == 0
    table = json.loads(out.read_text())
    assert sorted(table["missing"]) == ["eu-west-1"]
    assert table["offered"]["p4d.24xlarge"] == ["eu-west-1", "us-east-1"]


def test_a_catalog_id_without_a_source_record_is_refused(tmp_path: Path) -> None:
    args = _fixtures(tmp_path)
    args[args.index(f"gpus={tmp_path / 'gpus.js'}")] = f"unknown={tmp_path / 'gpus.js'}"
    with pytest.raises(SystemExit, match="no source record for unknown"):
        rebuild.main([*args, "--out", str(tmp_path / "prices.json")])
