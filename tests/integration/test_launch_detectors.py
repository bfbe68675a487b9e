"""data_cross_region and untagged_gpu_spend at launch, end to end on the local stack: the shipped events replayed
through their handlers, the dollar figures computed from the demo world and the price tables, and the calls they
add counted."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from costguard.aws import buckets, clients, inventory
from costguard.local.demo import run_demo
from costguard.local.render import render
from costguard.local.replay import ReplayResult, replay
from costguard.local.sink import SlackSink
from costguard.local.stack import LocalStack
from costguard.local.world import World
from costguard.model import Reason
from costguard.notify.titles import TITLES
from costguard.pricing import bundled_table
from costguard.pricing.transfer import transfer_table
from tests.conftest import EVENTS, load_event

CROSS = EVENTS / "sagemaker-training-job-inprogress-cross-region.json"
UNTAGGED = EVENTS / "ec2-instance-running-untagged.json"
REQUIRED = "team,project,owner"


@pytest.fixture(autouse=True)
def _fresh_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bucket regions and instance types are remembered per process: each test starts with none."""
    buckets.reset()
    monkeypatch.setattr(inventory, "catalog", inventory.AcceleratorCatalog())


@pytest.fixture
def tagged(world: World, sink: SlackSink, sleeps: list[float]) -> Iterator[LocalStack]:
    """The stack with the account's cost-allocation tags required (RequiredTags) and the world's buckets."""
    with LocalStack(world, sink=sink, overrides={"COSTGUARD_REQUIRED_TAGS": REQUIRED}) as running:
        yield running


def _variant(tmp_path: Path, source: Path, name: str, change: Callable[[dict[str, Any]], None]) -> Path:
    """Another delivery of a shipped event (its own id), changed."""
    event = load_event(source.name)
    event["id"] = f"{event['id'][:-4]}{len(name):04d}"
    change(event)
    path = tmp_path / name
    path.write_text(json.dumps(event))
    return path


def _calls(run: Callable[[], list[ReplayResult]]) -> tuple[list[ReplayResult], Counter[tuple[str, str]]]:
    before = Counter(clients.calls)
    results = run()
    return results, Counter(clients.calls) - before


def _of(result: ReplayResult, reason: str) -> list[dict[str, Any]]:
    return [d for d in result.decisions if d["reason"] == reason]


# -- data_cross_region ---------------------------------------------------------------------------------------


def _expected_transfer(world: World) -> tuple[str, str, float, float]:
    """From the world and the table: the bucket the job reads in another region, its region, the rate out of
    it, and what one pass over the channel costs (each host of a FullyReplicated channel reads all of it)."""
    detail = load_event(CROSS.name)["detail"]
    [channel] = [c for c in detail["InputDataConfig"] if "-eu-" in c["DataSource"]["S3DataSource"]["S3Uri"]]
    uri = channel["DataSource"]["S3DataSource"]["S3Uri"]
    bucket_name, prefix = uri.removeprefix("s3://").split("/", 1)
    [bucket] = [b for b in world.buckets if b.name == bucket_name]
    assert bucket.region != world.region
    gib = sum(size for key, size in bucket.objects.items() if key.startswith(prefix))
    rate = transfer_table()["usd_per_gb_out"][bucket.region]
    return bucket.name, bucket.region, rate, round(gib * detail["ResourceConfig"]["InstanceCount"] * rate, 2)


def test_a_job_reading_another_region_is_told_with_bucket_region_price_and_transfer_cost(
    stack: LocalStack, world: World
) -> None:
    [result] = replay(stack, [CROSS])  # the stack seeds the world's buckets
    assert result.ok, result.trace
    assert result.function == "TrainingJobsFunction"
    [decision] = result.decisions
    assert (decision["reason"], decision["action"]) == ("data_cross_region", "notify")
    bucket, region, rate, expected = _expected_transfer(world)
    assert expected == 5.74  # 143.5 GiB x 2 hosts x $0.02 (worlds/demo.yaml says so)
    [finding] = result.findings
    assert finding["evidence"]["transfer_usd_per_pass"] == expected
    assert finding["evidence"]["buckets"] == [f"{bucket} ({region})"]  # the same-region channel is not named
    [message] = result.slack
    text = json.dumps(message)
    assert bucket in text and region in text
    assert f"${rate:.2f} per GB" in text and f"${expected:,.2f}" in text


def test_each_bucket_region_is_asked_once_per_process_and_each_crossing_prefix_listed_once(
    stack: LocalStack, world: World, tmp_path: Path
) -> None:
    def another_job(event: dict[str, Any]) -> None:
        event["detail"]["TrainingJobName"] = "recsys-two-tower-2026-11-20-08-40-00"

    again = _variant(tmp_path, CROSS, "another-job.json", another_job)
    [first], calls = _calls(lambda: replay(stack, [CROSS]))
    assert first.ok, first.trace
    assert calls[("s3", "GetBucketLocation")] == 2  # two distinct buckets
    assert calls[("s3", "ListObjectsV2")] == 1  # one channel crosses regions: one page
    [second], calls = _calls(lambda: replay(stack, [again]))
    assert second.ok, second.trace
    assert _of(second, "data_cross_region")  # told of the other job too, from what the process knows
    assert calls[("s3", "GetBucketLocation")] == 0
    assert calls[("s3", "ListObjectsV2")] == 0


def test_a_bucket_whose_region_cannot_be_read_is_not_judged_and_is_asked_once(
    world: World, sink: SlackSink, sleeps: list[float], tmp_path: Path
) -> None:
    # A world without its buckets: GetBucketLocation answers NoSuchBucket.
    again = _variant(tmp_path, CROSS, "again.json", lambda e: None)
    with LocalStack(world.model_copy(update={"buckets": []}), sink=sink) as stack:
        results, calls = _calls(lambda: replay(stack, [CROSS, again]))
    assert all(r.ok for r in results), [r.trace for r in results]
    assert not any(_of(r, "data_cross_region") for r in results)
    assert calls[("s3", "GetBucketLocation")] == 2  # once per bucket, the unknown answer remembered
    assert calls[("s3", "ListObjectsV2")] == 0


# -- untagged_gpu_spend at launch ----------------------------------------------------------------------------


def test_an_untagged_gpu_instance_is_told_once_per_launch_with_its_price(
    tagged: LocalStack, world: World, tmp_path: Path
) -> None:
    instance_id = load_event(UNTAGGED.name)["detail"]["instance-id"]
    [spec] = [i for i in world.instances if i.id == instance_id]
    missing = [t for t in REQUIRED.split(",") if t not in spec.tags]
    assert missing == ["project", "owner"]
    [result] = replay(tagged, [UNTAGGED])
    assert result.ok, result.trace
    assert result.function == "GpuAlarmsFunction"
    [decision] = result.decisions
    assert (decision["reason"], decision["action"]) == ("untagged_gpu_spend", "notify")
    price = bundled_table()["ec2"][spec.type]
    assert decision["hourly_usd"] == price
    [finding] = result.findings
    assert finding["evidence"]["missing_tags"] == missing
    assert finding["evidence"]["monthly_usd_at_this_rate"] == round(price * 730, 2)
    [message] = result.slack
    assert "project, owner" in json.dumps(message)
    # The same launch delivered again: no second message.
    [again] = replay(tagged, [_variant(tmp_path, UNTAGGED, "again.json", lambda e: None)])
    assert again.ok and again.slack == []
    assert len(tagged.sink.messages) == 1


def test_the_alarm_and_the_tag_check_read_the_instance_once(
    world: World, sink: SlackSink, sleeps: list[float]
) -> None:
    overrides = {"COSTGUARD_REQUIRED_TAGS": REQUIRED, "COSTGUARD_GPU_ALARMS": "on"}
    with LocalStack(world, sink=sink, overrides=overrides) as stack:
        [result], calls = _calls(lambda: replay(stack, [UNTAGGED]))
    assert result.ok, result.trace
    assert result.output["alarms_created"] == [load_event(UNTAGGED.name)["detail"]["instance-id"]]
    assert _of(result, "untagged_gpu_spend")
    assert calls[("ec2", "DescribeInstances")] == 1
    assert calls[("ec2", "DescribeInstanceTypes")] == 1


def test_nothing_is_read_when_no_tag_is_required(stack: LocalStack) -> None:
    [result], calls = _calls(lambda: replay(stack, [UNTAGGED]))
    assert result.ok, result.trace
    assert result.decisions == []
    assert result.output == {"ignored": "running: GpuAlarms is off"}
    assert calls[("ec2", "DescribeInstances")] == 0


def test_an_untagged_gpu_training_job_is_told_at_in_progress(tagged: LocalStack, tmp_path: Path) -> None:
    def untagged(event: dict[str, Any]) -> None:
        del event["detail"]["Tags"]["owner"]

    def untagged_too(event: dict[str, Any]) -> None:
        untagged(event)
        event["detail"]["TrainingJobName"] = "recsys-two-tower-2026-11-20-09-00-00"

    first = _variant(tmp_path, CROSS, "untagged.json", untagged)
    second = _variant(tmp_path, CROSS, "untagged-too.json", untagged_too)
    [result], calls = _calls(lambda: replay(tagged, [first]))
    assert result.ok, result.trace
    [decision] = _of(result, "untagged_gpu_spend")
    detail = load_event(CROSS.name)["detail"]
    price = bundled_table()["sagemaker"][detail["ResourceConfig"]["InstanceType"]]
    assert decision["hourly_usd"] == round(price * detail["ResourceConfig"]["InstanceCount"], 4)
    [finding] = [f for f in result.findings if f["reason"] == "untagged_gpu_spend"]
    assert finding["evidence"]["missing_tags"] == ["owner"]
    assert finding["evidence"]["runs_as"] == detail["RoleArn"]
    assert calls[("ec2", "DescribeInstanceTypes")] == 1
    [result], calls = _calls(lambda: replay(tagged, [second]))
    assert _of(result, "untagged_gpu_spend")
    assert calls[("ec2", "DescribeInstanceTypes")] == 0  # the type is known to the process


def test_a_tagged_job_costs_no_call_for_its_tags(tagged: LocalStack) -> None:
    [result], calls = _calls(lambda: replay(tagged, [CROSS]))
    assert result.ok, result.trace
    assert not _of(result, "untagged_gpu_spend")
    assert calls[("ec2", "DescribeInstanceTypes")] == 0


# -- the demo ------------------------------------------------------------------------------------------------


def test_the_demo_shows_the_cross_region_input(world: World) -> None:
    run = run_demo(world, "notify")
    [finding] = [f for r in run.results for f in r.findings if f["reason"] == "data_cross_region"]
    bucket, region, rate, expected = _expected_transfer(world)
    assert finding["evidence"]["transfer_usd_per_pass"] == expected
    for said in (bucket, region, f"${rate:.2f} per GB", f"${expected:,.2f}"):
        assert said in finding["summary"]
    shown = "\n".join(render(m) for m in run.posted)
    assert finding["resource_id"] in shown
    assert TITLES[Reason.DATA_CROSS_REGION] in shown.replace("\n│   ", " ")
