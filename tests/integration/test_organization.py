"""An organization watched from one hub: 3 accounts x 2 regions (worlds/org.yaml), sweeps fanned out per account
and region, forwarded events acted on in their own account, a member region without its role reported by name."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from costguard import clock
from costguard.aws import clients
from costguard.flows import org
from costguard.local.org import place_client
from costguard.local.sink import SlackSink
from costguard.local.stack import STAND_IN_IMAGE, LocalStack
from costguard.local.world import World, load_world
from costguard.model import MARK_TAG_KEY
from tests.conftest import EVENTS

HUB, RESEARCH, VISION = "111111111111", "222222222222", "333333333333"
FORGOTTEN = "i-0c0f00000000000d1"  # research, us-west-2: idle for hours
VISION_IDLE = "i-0c0f00000000000e1"  # vision, us-east-1
UNSEEN = "i-0c0f00000000000f1"  # vision, us-west-2: member.yaml never deployed there


@pytest.fixture(scope="module")
def org_world() -> World:
    return load_world(EVENTS.parent / "worlds" / "org.yaml")


def scheduled(name: str, at: str, account: str = HUB) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS / name).read_text())
    return event | {"account": account, "time": at, "id": f"{event['id'][:-4]}{at[11:13]}{at[14:16]}"}


def gpu_sweep(at: str) -> dict[str, Any]:
    return scheduled("schedule-gpu-sweep-1200.json", at)


def ec2_in(account: str, region: str, instance_id: str) -> dict[str, Any]:
    [reservation] = place_client("ec2", account, region).describe_instances(InstanceIds=[instance_id])[
        "Reservations"
    ]
    described: dict[str, Any] = reservation["Instances"][0]
    return described


def tags_in(account: str, region: str, instance_id: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in ec2_in(account, region, instance_id).get("Tags", [])}


@pytest.fixture
def hub(org_world: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    with LocalStack(
        org_world,
        sink=sink,
        mode="remediate",
        until=org_world.now + timedelta(hours=1),
        routes={"account:" + RESEARCH: sink.url_for("research-alerts")},
    ) as running:
        yield running


def fanned(result: dict[str, Any] | None) -> dict[str, Any]:
    assert result is not None
    return {k: result[k] for k in ("sweep", "items", "accounts", "targets", "census")}


def test_the_hub_sweep_fans_out_one_item_per_account_and_region(hub: LocalStack) -> None:
    runs = hub.sweep("GpuIdleFunction", gpu_sweep("2026-11-20T12:00:00Z"))
    # The first sweep is a census: every account and region, one an item (a small organization needs no more).
    assert fanned(runs[0].result) == {"sweep": "gpu", "items": 6, "accounts": 3, "targets": 6, "census": True}
    items = runs[1:]
    assert len(items) == 6 and all(r.result == {"batchItemFailures": []} for r in items)


def test_between_censuses_only_the_account_regions_with_gpu_instances_are_swept(hub: LocalStack) -> None:
    swept: list[tuple[str, str]] = []
    org.item_observers.append(lambda item, report: swept.append((item.account, item.region)))
    try:
        hub.sweep("GpuIdleFunction", gpu_sweep("2026-11-20T12:00:00Z"))
        census = set(swept)
        swept.clear()
        clock.freeze(hub.world.now + timedelta(minutes=5))
        runs = hub.sweep("GpuIdleFunction", gpu_sweep("2026-11-20T12:05:00Z"))
    finally:
        org.item_observers.clear()
    holding = {
        (account, region)
        for account, region in census
        if (account, region) != (VISION, "us-west-2")  # its role refuses the hub: nothing was found there
        and place_client("ec2", account, region).describe_instances(
            Filters=[{"Name": "instance-state-name", "Values": ["running"]}]
        )["Reservations"]
    }
    assert fanned(runs[0].result)["census"] is False
    assert set(swept) == holding and 0 < len(holding) < 6
    assert all(r.result == {"batchItemFailures": []} for r in runs[1:])


def test_an_idle_member_instance_is_marked_then_stopped_in_its_own_account(hub: LocalStack) -> None:
    hub.sweep("GpuIdleFunction", gpu_sweep("2026-11-20T12:00:00Z"))
    assert MARK_TAG_KEY in tags_in(RESEARCH, "us-west-2", FORGOTTEN)
    assert MARK_TAG_KEY in tags_in(VISION, "us-east-1", VISION_IDLE)
    # Not in the hub's own account: the instance lives in research's.
    assert (
        clients.ec2("us-west-2").describe_instances()["Reservations"][0]["Instances"][0]["InstanceId"]
        != FORGOTTEN
    )
    clock.freeze(hub.world.now + timedelta(minutes=20))
    hub.sweep("GpuIdleFunction", gpu_sweep("2026-11-20T12:20:00Z"))
    assert ec2_in(RESEARCH, "us-west-2", FORGOTTEN)["State"]["Name"] in ("stopping", "stopped")
    assert ec2_in(VISION, "us-east-1", VISION_IDLE)["State"]["Name"] in ("stopping", "stopped")


def test_the_message_names_the_account_and_follows_the_account_route(hub: LocalStack) -> None:
    hub.sweep("GpuIdleFunction", gpu_sweep("2026-11-20T12:00:00Z"))
    hub.drain()
    research = [m for m in hub.sink.messages if m["channel"] == "research-alerts"]
    assert research, "research's findings go to the route of its account"
    text = json.dumps(research)
    assert "research (222222222222)" in text and "research-p4d-forgotten" in text
    elsewhere = json.dumps([m for m in hub.sink.messages if m["channel"] != "research-alerts"])
    assert "research-p4d-forgotten" not in elsewhere
    assert "vision (333333333333)" in elsewhere


def test_a_member_region_without_its_role_is_reported_by_name_and_the_others_complete(
    hub: LocalStack,
) -> None:
    runs = hub.sweep("GpuIdleFunction", gpu_sweep("2026-11-20T12:00:00Z"))
    assert all(r.result == {"batchItemFailures": []} for r in runs[1:])
    # The five reachable items were judged: their idle instances are marked in their own accounts.
    assert MARK_TAG_KEY in tags_in(RESEARCH, "us-west-2", FORGOTTEN)
    assert MARK_TAG_KEY in tags_in(VISION, "us-east-1", VISION_IDLE)
    assert MARK_TAG_KEY not in tags_in(VISION, "us-west-2", UNSEEN)
    hub.drain()
    told = [m for m in hub.sink.messages if "Member account not reachable" in json.dumps(m)]
    assert len(told) == 1
    text = json.dumps(told)
    assert "vision (333333333333)" in text and "us-west-2" in text and "AccessDenied" in text
    assert "costguard-member-us-west-2" in text
    # Reported, not retried: nothing waits for a retry or in the dead-letter queue.
    assert hub.queue_depth("GpuIdleSweepQueue") == 0 and hub.queue_depth("SweepDeadLetterQueue") == 0


def test_a_throttled_item_fails_alone_and_is_retried(
    hub: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    from costguard.aws import inventory

    real = inventory.describe_gpu_instances
    throttled: list[str] = []

    def describe(region: str, **kw: Any) -> Any:
        if clients.acting_account() == RESEARCH and region == "us-east-1" and not throttled:
            throttled.append(region)
            raise ClientError(
                {"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "DescribeInstances"
            )
        return real(region, **kw)

    monkeypatch.setattr("costguard.aws.inventory.describe_gpu_instances", describe)
    runs = hub.sweep("GpuIdleFunction", gpu_sweep("2026-11-20T12:00:00Z"))
    failures = [r for r in runs[1:] if r.result and r.result.get("batchItemFailures")]
    assert len(failures) == 1  # research/us-east-1 only, then redelivered and swept
    assert throttled == ["us-east-1"]
    assert len(runs) == 1 + 6 + 1
    assert hub.queue_depth("GpuIdleSweepQueue") == 0


def test_a_forwarded_alarm_acts_in_the_events_account(hub: LocalStack) -> None:
    event = json.loads((EVENTS / "cloudwatch-alarm-gpu-idle.json").read_text())
    text = json.dumps(event).replace("123456789012", RESEARCH).replace("us-east-1", "us-west-2")
    text = text.replace("i-0a1f00000000000a1", FORGOTTEN)
    result = hub.invoke("GpuIdleFunction", json.loads(text)).result
    assert [(f["reason"], f["resource_id"]) for f in result["findings"]] == [("gpu_idle", FORGOTTEN)]
    assert MARK_TAG_KEY in tags_in(RESEARCH, "us-west-2", FORGOTTEN)
    hub.drain()
    assert "research (222222222222)" in json.dumps(hub.sink.messages)


def test_a_gpu_instance_launched_between_censuses_is_swept_from_the_next_sweep(hub: LocalStack) -> None:
    account, region = RESEARCH, "us-east-1"
    ec2 = place_client("ec2", account, region)
    running = [i["InstanceId"] for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    ec2.terminate_instances(InstanceIds=running)  # nothing left there at the census
    swept: list[tuple[str, str]] = []
    org.item_observers.append(lambda item, report: swept.append((item.account, item.region)))
    try:
        hub.sweep("GpuIdleFunction", gpu_sweep("2026-11-20T12:00:00Z"))
        swept.clear()
        hub.sweep("GpuIdleFunction", gpu_sweep("2026-11-20T12:05:00Z"))
        assert (account, region) not in swept
        [launched] = ec2.run_instances(
            ImageId=STAND_IN_IMAGE, InstanceType="g5.xlarge", MinCount=1, MaxCount=1
        )["Instances"]
        text = (EVENTS / "ec2-instance-running.json").read_text().replace("123456789012", account)
        text = text.replace("i-0a1f00000000000a1", launched["InstanceId"])
        clients.calls.clear()
        result = hub.invoke("GpuAlarmsFunction", json.loads(text)).result
        assert result is not None and result.get("census") == "gpu"
        assert clients.calls[("dynamodb", "UpdateItem")] == 1
        swept.clear()
        clock.freeze(hub.world.now + timedelta(minutes=10))
        runs = hub.sweep("GpuIdleFunction", gpu_sweep("2026-11-20T12:10:00Z"))
    finally:
        org.item_observers.clear()
    assert fanned(runs[0].result)["census"] is False
    assert (account, region) in swept


def test_one_assume_role_per_item_and_session_lifetime(hub: LocalStack) -> None:
    hub.invoke("GpuIdleFunction", gpu_sweep("2026-11-20T12:00:00Z"))
    clients.calls.clear()
    hub.drain("GpuIdleSweepQueue")
    # Five items assume a role (the hub's own region alone needs none): four roles exist, one is refused.
    assert clients.calls[("sts", "AssumeRole")] == 5
    clients.calls.clear()
    hub.sweep("GpuIdleFunction", gpu_sweep("2026-11-20T12:05:00Z"))
    # The sessions are still valid; the refused role's region held nothing at the census: it is tried again at
    # the next census, an hour on.
    assert clients.calls[("sts", "AssumeRole")] == 0


def test_the_item_model_refuses_a_forged_account() -> None:
    with pytest.raises(ValueError):
        org.SweepItem.model_validate(
            {
                "sweep": "gpu",
                "account": "1234",
                "region": "us-east-1",
                "event_id": "x",
                "time": "2026-11-20T12:00:00Z",
            }
        )


@pytest.mark.parametrize(
    ("function", "event", "sweep"),
    [
        ("SageMakerIdleFunction", "schedule-sagemaker-sweep.json", "sagemaker"),
        ("CapacityFunction", "schedule-capacity-sweep.json", "capacity"),
        ("TrainingCeilingsFunction", "schedule-training-ceilings-1200.json", "training_ceilings"),
    ],
)
def test_every_scheduled_sweep_fans_out_and_names_the_unreachable_region(
    hub: LocalStack, function: str, event: str, sweep: str
) -> None:
    runs = hub.sweep(function, scheduled(event, "2026-11-20T12:00:00Z"))
    assert fanned(runs[0].result) == {
        "sweep": sweep,
        "items": 6,
        "accounts": 3,
        "targets": 6,
        "census": sweep != "capacity",  # hourly: every account and region each time, no census
    }
    assert len(runs) == 7 and all(r.result == {"batchItemFailures": []} for r in runs[1:])
    hub.drain()
    told = [m for m in hub.sink.messages if "Member account not reachable" in json.dumps(m)]
    assert len(told) == 1 and f"The {sweep} sweep" in json.dumps(told)


def test_an_organization_budget_lists_the_linked_accounts_resources_in_every_region(hub: LocalStack) -> None:
    text = (EVENTS / "budget-actual-100-ml-research.json").read_text()
    text = text.replace("123456789012", HUB).replace("ml-research-gpu", "org-gpu")
    text = text.replace("$5,000.00", "$20,000.00").replace("$5,120.40", "$20,480.00")
    result = hub.invoke("BudgetsFunction", json.loads(text)).result
    [summary] = [f["summary"] for f in result["findings"] if f["resource_id"].startswith("org-gpu/")]
    listed = summary.split("costliest first", 1)[1]
    # research's two regions and vision's reachable one; not the hub's own account (not a linked account).
    for name in (
        "research-p4d-forgotten",
        "research-p4d-7b-finetune",
        "research-g5-starved",
        "vision-g5-idle",
    ):
        assert name in listed
    assert "platform-g5" not in listed and "vision-g5-unseen" not in listed
    assert "(research 222222222222, us-west-2)" in listed and "(vision 333333333333, us-east-1)" in listed
    lines = [line for line in listed.splitlines() if line[:1].isdigit()]
    prices = [float(line.split("$", 1)[1].split("/h", 1)[0].replace(",", "")) for line in lines]
    assert prices == sorted(prices, reverse=True)  # costliest first, across accounts and regions
    assert (
        "Not read (member role missing or refused): vision 333333333333 us-west-2 (AccessDenied)" in summary
    )


def test_an_unreadable_work_item_is_kept_in_the_sweeps_dead_letter_queue(hub: LocalStack) -> None:
    clients.sqs().send_message(
        QueueUrl=hub.urls["GpuIdleSweepQueue"], MessageBody='{"sweep": "gpu", "account": "x"}'
    )
    runs = hub.drain("GpuIdleSweepQueue")
    assert runs and all(r.result and r.result["batchItemFailures"] for r in runs)
    assert hub.queue_depth("GpuIdleSweepQueue") == 0 and hub.queue_depth("SweepDeadLetterQueue") == 1
