"""The state table's keys at an organization's scale (bench/org_scale.py, ``dynamodb_keys``): the census and the
sweep between censuses of 50 accounts x 17 regions, the hub's real code and one member region's real sweep, spread
their reads and writes over keys of their own, so that no DynamoDB partition takes more than its share."""

from __future__ import annotations

from typing import Any

import pytest

from bench import org_scale
from bench.org_scale import PLACE, KeyCounts, Touch, item_bytes, updated
from costguard.aws import read_plan
from costguard.flows.org import CENSUS_SHARDS

ACCOUNTS = 50
# The member sweep's calls only time the items (the sweep's finish); its keys are recorded by member_sweep_keys.
SWEEP_CALLS = {
    "ec2:DescribeInstances": 1,
    "ec2:DescribeInstanceTypes": 1,
    "cloudwatch:ListMetrics": 1,
    "cloudwatch:GetMetricData": 1,
    "dynamodb:BatchGetItem": 2,
    "dynamodb:BatchWriteItem": 1,
}


@pytest.fixture(scope="module")
def member() -> dict[str, list[Touch]]:
    return org_scale.member_sweep_keys()


@pytest.fixture(scope="module")
def run(member: dict[str, list[Touch]]) -> tuple[dict[str, Any], dict[str, Any]]:
    keys: dict[str, KeyCounts] = {}
    runs = org_scale.simulate(SWEEP_CALLS, accounts=ACCOUNTS, member_keys=member, keys=keys)
    return runs, org_scale.dynamodb_keys(runs, keys)


def test_a_member_sweeps_keys_are_its_account_regions_own(member: dict[str, list[Touch]]) -> None:
    """Every key a member region's sweep reads or writes names its account and region: none is shared by the
    organization's account-regions. The read schedule's and the repeat gate's items are among them."""
    for label in ("census", "between_censuses"):
        assert member[label]
        shared = [t.key for t in member[label] if PLACE not in t.key]
        assert shared == []
    census = {t.key.split("#", 1)[0] for t in member["census"]}
    assert {"read-plan", "repeat", "shadow-mark"} <= census
    # The read schedule: every shard read in one BatchGetItem, eventually consistent.
    plan_reads = [t for t in member["census"] if t.key.startswith("read-plan#") and not t.write]
    assert len(plan_reads) == read_plan.SHARDS
    assert not any(t.consistent for t in plan_reads)


@pytest.mark.parametrize("label", ["census", "between_censuses"])
def test_no_key_is_hot(run: tuple[dict[str, Any], dict[str, Any]], label: str) -> None:
    runs, figures = run
    sweep = figures[label]
    assert sweep["work_items"] == runs[label]["items"]
    assert sweep["keys_every_item_touches"] == []
    assert figures["hot_keys"] == []
    # No key is written more than once by one item, and the busiest takes a sliver of one partition's limits.
    assert sweep["most_writes_to_one_key_by_one_item"] == 1
    assert sweep["busiest_key"]["share_of_partition_limit"] < 0.01
    assert sweep["top5_share_of_units"] < 0.05
    assert sweep["widest_key"]["share_of_work_items"] < 0.05
    # The only keys a sweep's items share are the census's: its time and its shards, read once by the fan-out.
    shared = sweep["shared_keys"]
    assert shared["prefix"] == "census#gpu"
    assert shared["keys"] == CENSUS_SHARDS + 1
    assert shared["read_units"] == CENSUS_SHARDS + 1


def test_the_keys_count_every_present_account_region(run: tuple[dict[str, Any], dict[str, Any]]) -> None:
    runs, figures = run
    present = runs["present_account_regions"]
    census = figures["census"]["by_prefix"]
    assert census["read-plan"]["keys"] == present * read_plan.SHARDS
    assert census["repeat"]["keys"] == present  # one idle instance a region: its finding told once
    assert census["repeat"]["write_units"] == present
    # The first census writes each present account-region once into its shard, as it finds it.
    assert census["census"]["keys"] == CENSUS_SHARDS + 1
    assert figures["census"]["writes"] >= present
    hour = figures["steady_hour"]
    assert hour["reads"] == figures["census"]["reads"] + 11 * figures["between_censuses"]["reads"]
    assert hour["busiest_key"]["share_of_partition_limit"] < 0.001


def test_request_units_follow_the_item_sizes() -> None:
    # An item's size: its attribute names and values (a number: a byte per two digits, and one).
    assert item_bytes({"id": {"S": "abc"}, "n": {"N": "123"}}) == 2 + 3 + 1 + 3
    assert item_bytes({"m": {"M": {"k": {"S": "v"}}}}) == 1 + 3 + 1 + 1 + 1
    assert item_bytes(None) == 0
    assert Touch("k", True, 1024).units == 1
    assert Touch("k", True, 1025).units == 2
    assert Touch("k", False, 0, consistent=True).units == 1  # an item not found is read all the same
    assert Touch("k", False, 4097).units == 1  # eventually consistent: half a unit a 4 KB
    assert Touch("k", False, 4097, consistent=True).units == 2


def test_updates_as_the_census_and_the_repeat_gate_write_them() -> None:
    item = updated({"id": {"S": "census#gpu#0"}}, "ADD present :keys", {":keys": {"SS": ["b", "a"]}})
    assert item["present"] == {"SS": ["a", "b"]}
    item = updated(item, "DELETE present :keys", {":keys": {"SS": ["a", "b"]}})
    assert "present" not in item
    item = updated(
        {"id": {"S": "stops#h"}},
        "ADD stops :one SET expiration = :end",
        {":one": {"N": "1"}, ":end": {"N": "9"}},
    )
    assert item == {"id": {"S": "stops#h"}, "stops": {"N": "1"}, "expiration": {"N": "9"}}
