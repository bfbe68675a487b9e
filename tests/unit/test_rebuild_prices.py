"""scripts/rebuild-prices, fed AWS bulk offer files made here (it cannot reach AWS from a test)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "rebuild-prices"


def _load() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("rebuild_prices", str(SCRIPT))
    spec = importlib.util.spec_from_loader("rebuild_prices", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


rebuild = _load()


def _term(usd: str, unit: str = "Hrs") -> dict[str, Any]:
    return {
        "T.JRTCKXETXF": {
            "priceDimensions": {"T.JRTCKXETXF.6YS6EN2CT7": {"unit": unit, "pricePerUnit": {"USD": usd}}}
        }
    }


def _offer(products: dict[str, dict[str, Any]], prices: dict[str, str]) -> dict[str, Any]:
    return {
        "formatVersion": "v1.0",
        "publicationDate": "2026-11-01T00:00:00Z",
        "products": {sku: {"sku": sku, "attributes": a} for sku, a in products.items()},
        "terms": {"OnDemand": {sku: _term(usd) for sku, usd in prices.items()}},
    }


EC2_LINUX = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
}


def _write_offers(root: Path, region: str, p4d: str, g5: str, ml_p4d: str, ml_p4d_hosting: str) -> None:
    (root / region).mkdir(parents=True)
    ec2 = _offer(
        {
            "A": {"instanceType": "p4d.24xlarge", **EC2_LINUX},
            "B": {"instanceType": "g5.xlarge", **EC2_LINUX},
            "C": {"instanceType": "g5.xlarge", **EC2_LINUX, "operatingSystem": "Windows"},  # not Linux
            "D": {"instanceType": "m5.large", **EC2_LINUX},  # not accelerated
            "E": {"instanceType": "p4d.24xlarge", **EC2_LINUX, "tenancy": "Dedicated"},
        },
        {"A": p4d, "B": g5, "C": "9.99", "D": "0.096", "E": "99.0"},
    )
    sagemaker = _offer(
        {
            "S1": {"instanceName": "ml.p4d.24xlarge", "component": "Training"},
            "S2": {"instanceName": "ml.p4d.24xlarge", "component": "Hosting"},
            "S3": {"instanceName": "ml.m5.large", "component": "Training"},
        },
        {"S1": ml_p4d, "S2": ml_p4d_hosting, "S3": "0.115"},
    )
    (root / region / "AmazonEC2.json").write_text(json.dumps(ec2))
    (root / region / "AmazonSageMaker.json").write_text(json.dumps(sagemaker))


def test_offer_files_make_a_table_the_price_book_reads(tmp_path: Path) -> None:
    offers = tmp_path / "offers"
    _write_offers(offers, "us-east-1", "21.9580000000", "1.0060000000", "37.6880000000", "37.6880000000")
    _write_offers(offers, "eu-west-1", "23.6000000000", "1.1230000000", "41.0000000000", "42.0000000000")
    out = tmp_path / "prices.json"
    out.write_text(json.dumps({"no_on_demand": {"p5e.48xlarge": "Capacity Blocks only"}, "unpriced": {}}))
    args = ["--offer-dir", str(offers), "--regions", "us-east-1,eu-west-1", "--out", str(out)]
    assert rebuild.main(args) == 0
    table = json.loads(out.read_text())
    assert table["ec2"] == {"g5.xlarge": 1.006, "p4d.24xlarge": 21.958}
    assert table["sagemaker"] == {"ml.p4d.24xlarge": 37.688}
    assert table["regions"]["eu-west-1"]["ec2"] == {"g5.xlarge": 1.123, "p4d.24xlarge": 23.6}
    assert table["sagemaker_components"] == {"eu-west-1": {"Hosting": {"ml.p4d.24xlarge": 42.0}}}
    assert table["as_of"] == "2026-11-01"
    assert table["no_on_demand"] == {"p5e.48xlarge": "Capacity Blocks only"}  # carried over
    [source_id] = table["sources"]
    assert table["figure_sources"]["eu-west-1"]["ec2"] == {"*": source_id}
    # --check against what it just wrote: nothing to change.
    assert rebuild.main([*args, "--check"]) == 0


@pytest.mark.parametrize(
    ("instance_type", "accelerated"),
    [("g4dn.xlarge", True), ("gr6.4xlarge", True), ("p6-b200.48xlarge", True), ("ml.inf2.xlarge", True),
     ("trn1n.32xlarge", True), ("dl1.24xlarge", True), ("m5.large", False), ("c7i.large", False)],
)  # fmt: skip
def test_accelerated_types_are_told_by_family(instance_type: str, accelerated: bool) -> None:
    assert rebuild.is_accelerated(instance_type) is accelerated


def test_an_ambiguous_product_is_never_guessed() -> None:
    product = {"terms": {"OnDemand": {**_term("1.0"), "X": _term("2.0")["T.JRTCKXETXF"]}}}
    assert rebuild.on_demand_usd(product) is None


def test_help_says_how_to_run_it_where_the_network_allows() -> None:
    shown = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert "pricing:GetProducts" in shown
    assert "offers/v1.0/aws/AmazonEC2/current" in shown
    assert "--offer-dir" in shown
