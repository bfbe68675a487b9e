"""What a sweep and a reconcile cost in API calls over a fleet of 1,000 GPU instances."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from costguard import clock
from costguard.aws import clients
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World

FLEET = 1000
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def fleet_world() -> World:
    return World.model_validate(
        {
            "now": NOW,
            "instances": [
                {
                    "id": f"i-{n:017x}",
                    "type": "g5.xlarge",
                    "gpu_metrics": {"pattern": "idle" if n % 2 else "busy", "lookback_minutes": 10},
                }
                for n in range(FLEET)
            ],
        }
    )


@pytest.fixture(scope="module")
def fleet() -> Iterator[LocalStack]:
    with SlackSink() as sink, LocalStack(fleet_world(), sink=sink) as stack:
        yield stack


def calls(service: str, operation: str) -> int:
    return clients.calls[(service, operation)]


def test_sweep_reads_the_fleet_within_the_batching_floor(fleet: LocalStack) -> None:
    from costguard.flows.gpu import evaluate
    from costguard.runtime import runtime

    clients.calls.clear()
    report = evaluate("us-east-1", runtime(), clock.now())
    gpu_series = FLEET  # one GPU per g5.xlarge
    # At most the CPU and network of every instance (an idle verdict reads its CPU only).
    queries = gpu_series + 2 * FLEET
    assert calls("ec2", "DescribeInstances") <= math.ceil(FLEET / 1000) + 1
    assert calls("cloudwatch", "GetMetricData") <= math.ceil(queries / 500) + 1
    assert calls("cloudwatch", "ListMetrics") <= math.ceil(gpu_series / 500) + 1
    assert calls("ec2", "DescribeInstanceTypes") <= 1
    assert calls("sqs", "SendMessageBatch") <= math.ceil(len(report.notices) / 10) + 1
    # No per-instance calls slipped in.
    assert sum(clients.calls.values()) < 30


def test_reconcile_lists_alarms_in_pages_and_creates_only_missing_ones(fleet: LocalStack) -> None:
    from costguard.flows.gpu import reconcile
    from costguard.runtime import runtime

    clients.calls.clear()
    first = reconcile(runtime(), "us-east-1")
    assert len(first["us-east-1"]["alarms_created"]) == FLEET
    assert calls("ec2", "DescribeInstances") <= math.ceil(FLEET / 1000) + 1
    clients.calls.clear()
    second = reconcile(runtime(), "us-east-1")
    assert second["us-east-1"] == {"alarms_created": [], "alarms_deleted": []}
    assert calls("cloudwatch", "PutMetricAlarm") == 0
    assert calls("cloudwatch", "DescribeAlarms") <= math.ceil(FLEET / 100) + 1


MEMBER, MEMBER_REGION = "222222222222", "us-west-2"


def member_fleet_world() -> World:
    """The same fleet in a member account and region of an organization, watched from the hub."""
    fleet = fleet_world()
    return World.model_validate(
        {
            "account": "111111111111",
            "now": NOW,
            "organization": {
                "accounts": [{"id": "111111111111", "name": "platform"}, {"id": MEMBER, "name": "research"}]
            },
            "members": [
                {
                    "account": MEMBER,
                    "region": MEMBER_REGION,
                    "instances": [i.model_dump(mode="json", exclude_none=True) for i in fleet.instances],
                }
            ],
        }
    )


@pytest.fixture(scope="module")
def member_fleet() -> Iterator[LocalStack]:
    with SlackSink() as sink, LocalStack(member_fleet_world(), sink=sink) as stack:
        yield stack


@pytest.mark.xdist_group("gpu_scale_member_fleet")
def test_a_member_regions_item_reads_at_the_same_floor_plus_one_assume_role(
    member_fleet: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.flows.gpu import evaluate
    from costguard.flows.org import SweepItem, sweep_item
    from costguard.runtime import runtime

    # The hub's variables (the module's stack outlives each test's isolated environment).
    monkeypatch.setenv("COSTGUARD_MEMBER_ROLE_NAME", "costguard-member")
    monkeypatch.setenv("COSTGUARD_HOME_ACCOUNT", "111111111111")
    item = SweepItem(sweep="gpu", account=MEMBER, region=MEMBER_REGION, event_id="scale", time=NOW)

    def sweep(it: SweepItem, now: datetime) -> object:
        return evaluate(it.region, runtime(), now, event_id=it.event_id)

    clients.calls.clear()
    report = sweep_item(item, runtime(), clock.now(), sweep)  # type: ignore[arg-type]
    queries = FLEET + 2 * FLEET
    assert calls("ec2", "DescribeInstances") <= math.ceil(FLEET / 1000) + 1
    assert calls("cloudwatch", "GetMetricData") <= math.ceil(queries / 500) + 1
    assert calls("cloudwatch", "ListMetrics") <= math.ceil(FLEET / 500) + 1
    assert calls("ec2", "DescribeInstanceTypes") <= 1
    assert calls("sqs", "SendMessageBatch") <= math.ceil(len(report.notices) / 10) + 1
    # The organization's own: one AssumeRole for the item, the account's name and OU once per process.
    assert calls("sts", "AssumeRole") == 1
    assert calls("organizations", "ListAccounts") <= 1 and calls("organizations", "ListParents") <= 1
    assert sum(clients.calls.values()) < 30 + 3
    clients.calls.clear()
    sweep_item(item, runtime(), clock.now(), sweep)  # type: ignore[arg-type]
    assert calls("sts", "AssumeRole") == 0  # the role session lasts an hour: no second AssumeRole
    assert calls("organizations", "ListAccounts") == 0 and calls("organizations", "ListParents") == 0
