"""Issue 40: the demo world moved to another region gives the audit it gives in us-east-1, each finding priced,
except where AWS does not offer a type in that region, which the report names as such."""

from __future__ import annotations

from typing import Any

import pytest

from costguard.local.audit import run_audit
from costguard.local.world import load_world
from costguard.pricing import bundled_price, not_offered
from tests.conftest import DEMO_WORLD

HOME = "us-east-1"
MOVED = ("eu-west-1", "ap-northeast-1")


def audit_in(region: str) -> dict[str, Any]:
    world = load_world(DEMO_WORLD)
    run = run_audit(world.model_copy(update={"region": region}))
    assert run.status == "SUCCEEDED", run.error
    assert run.report is not None
    return run.report


@pytest.fixture(scope="module")
def home() -> dict[str, Any]:
    return audit_in(HOME)


@pytest.fixture(scope="module", params=MOVED)
def moved(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    return request.param, audit_in(request.param)


def verdicts(report: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(f["resource"]["id"], f["reason"]): f for f in report["findings"]}


def test_the_same_findings_except_where_a_type_is_not_offered(
    home: dict[str, Any], moved: tuple[str, dict[str, Any]]
) -> None:
    region, report = moved
    there, here = verdicts(report), verdicts(home)
    assert here, "the demo world's audit finds something at home"
    skipped = {s["id"]: s for s in report["skipped"]}
    unoffered = {(u["id"], u["reason"]): u for u in report["unoffered"]}
    for (rid, reason), finding in here.items():
        kind = finding["current_type"]
        target = finding.get("recommended_type")
        if (rid, reason) in there:
            assert there[(rid, reason)].get("recommended_type") == target, (rid, reason)
        elif not_offered(kind.removeprefix("ml."), region):
            # The resource's own type is not offered there: named as such, or judged with its cost unknown.
            named = skipped.get(rid) or {"why": ""}
            told = [f for (i, _), f in there.items() if i == rid]
            assert "not offered there" in named["why"] or told, (rid, named)
        else:
            # The move is to a type the region does not offer: the report says so.
            assert target and not_offered(target.removeprefix("ml."), region), (rid, reason, target)
            assert (rid, reason) in unoffered, (rid, reason, sorted(unoffered))
            assert f"{target} is not offered in {region}" in unoffered[(rid, reason)]["why"]
    # Nothing new appears only because the region moved.
    assert set(there) <= set(here), sorted(set(there) - set(here))


def test_each_finding_is_priced_at_the_regions_own_rate(moved: tuple[str, dict[str, Any]]) -> None:
    region, report = moved
    assert report["findings"]
    for finding in report["findings"]:
        kind = finding["current_type"]
        if not_offered(kind.removeprefix("ml."), region):
            assert finding["monthly_saving_usd"] is None or finding["current_hourly_usd"] is not None
            continue
        price = bundled_price(kind, region)
        assert price is not None, (kind, region)
        count = finding["instance_count"]
        assert finding["current_hourly_usd"] == pytest.approx(price.usd_per_hour * count, abs=0.001), finding
        assert finding["monthly_saving_usd"] is not None, finding


def test_what_is_not_offered_is_named_in_the_page(moved: tuple[str, dict[str, Any]]) -> None:
    region, report = moved
    from costguard.audit.html import render_html

    page = render_html(report)
    for move in report["unoffered"]:
        assert move["region"] == region
        assert f"{move['target']} is not offered in {region}" in page
    for s in report["skipped"]:
        if "not offered there" in s["why"]:
            assert s["hourly_usd"] is None  # unknown, never $0.00
