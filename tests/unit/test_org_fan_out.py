"""An organization's fan-out at scale, without AWS: the hourly census, the present account-regions queued between
censuses, the items sized to the concurrency cap, and the calls each step makes (counted on in-memory clients)."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from costguard.aws import clients
from costguard.events.scheduled import ScheduledEvent
from costguard.flows import org
from costguard.local.template import Template
from costguard.pipeline import Report
from costguard.settings import Settings, parse_settings

ROOT = Path(__file__).resolve().parents[2]
HUB = "111111111111"
ACCOUNTS = [f"{n:012d}" for n in range(200000000000, 200000000040)]  # 40 accounts
REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
NOON = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def event(at: datetime) -> ScheduledEvent:
    return ScheduledEvent.model_validate(
        {
            "version": "0",
            "id": f"c0ffee00-0000-4000-8000-{at:%H%M}00000000",
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": HUB,
            "time": at.isoformat().replace("+00:00", "Z"),
            "region": "us-east-1",
            "resources": ["arn:aws:events:us-east-1:111111111111:rule/costguard-gpu-sweep"],
            "detail": {},
        }
    )


class Table:
    """The state table's census items, as DynamoDB keeps them (string sets; an emptied set is removed)."""

    def __init__(self, calls: Counter[str]) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.calls = calls

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.calls["BatchGetItem"] += 1
        [(table, request)] = RequestItems.items()
        assert len(request["Keys"]) <= 100
        found = [self.items[k["id"]["S"]] for k in request["Keys"] if k["id"]["S"] in self.items]
        return {"Responses": {table: found}}

    def update_item(self, **kw: Any) -> None:
        self.calls["UpdateItem"] += 1
        key = kw["Key"]["id"]["S"]
        item = self.items.setdefault(key, {"id": {"S": key}})
        verb, attribute, *_, name = kw["UpdateExpression"].split()  # SET a = :v, ADD a :v, DELETE a :v
        value = kw["ExpressionAttributeValues"][name]
        if verb == "SET":
            item[attribute] = value
        elif verb == "ADD":
            item[attribute] = {"SS": sorted(set(item.get(attribute, {}).get("SS", [])) | set(value["SS"]))}
        else:
            left = set(item.get(attribute, {}).get("SS", [])) - set(value["SS"])
            item.pop(attribute, None)
            if left:
                item[attribute] = {"SS": sorted(left)}


class Queue:
    def __init__(self, calls: Counter[str]) -> None:
        self.bodies: list[str] = []
        self.calls = calls

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> dict[str, Any]:
        self.calls["SendMessageBatch"] += 1
        assert len(Entries) <= 10
        self.bodies += [e["MessageBody"] for e in Entries]
        return {"Successful": [{"Id": e["Id"]} for e in Entries]}


class Hub:
    """The hub's clients in memory, its queue drained by hand: a probe and a sweep that count their calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, holding: set[tuple[str, str]], cap: int = 20) -> None:
        self.calls: Counter[str] = Counter()
        self.table, self.queue = Table(self.calls), Queue(self.calls)
        self.holding = holding
        self.swept: list[tuple[str, str]] = []
        monkeypatch.setattr(clients, "client", lambda service, *a, **k: {"dynamodb": self.table}[service])
        monkeypatch.setattr(clients, "sqs", lambda *a, **k: self.queue)
        self.settings: Settings = parse_settings(
            member_role_name="costguard-member",
            accounts=",".join(ACCOUNTS),
            regions=",".join(REGIONS),
            state_table="state",
            sweep_queue_url="https://sqs.us-east-1.amazonaws.com/111111111111/gpu-sweep",
            sweep_concurrency=str(cap),
        )

    def fan_out(self, at: datetime) -> dict[str, Any]:
        self.calls.clear()
        self.queue.bodies.clear()
        return org.fan_out("gpu", event(at), self.settings, census=True, interval=timedelta(minutes=5))

    def probe(self, region: str) -> bool:
        self.calls["probe"] += 1
        return (clients.acting_account() or HUB, region) in self.holding

    def sweep(self, item: org.SweepItem, now: datetime) -> Report:
        self.calls["sweep"] += 1
        self.swept.append((item.account, item.region))
        return Report()

    def drain(self) -> list[org.WorkItem]:
        """Each queued item as run_items runs it: a census target probed first, its answer kept."""
        self.calls.clear()
        self.swept.clear()
        work = [org.read_work(body) for body in self.queue.bodies]
        for one in work:
            census = org.Census("state", one.sweep) if one.census else None
            for item, target in zip(one.items(), one.targets, strict=True):
                org.sweep_item(
                    item,
                    None,  # type: ignore[arg-type]  # the runtime is only asked to report an unreachable member
                    NOON,
                    self.sweep,
                    probe=self.probe if one.census else None,
                    census=census,
                    known=target.present,
                )
        return work


def test_the_census_queues_every_account_region_then_only_those_holding_gpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    holding = {(ACCOUNTS[n], REGIONS[n % 3]) for n in range(0, 40, 8)}  # 5 of 120: about 5%
    hub = Hub(monkeypatch, holding)

    first = hub.fan_out(NOON)
    assert first["census"] is True and first["targets"] == 120 and first["items"] == 120
    # One read of the census, one write of its time, ten items a SendMessageBatch.
    assert hub.calls == Counter({"BatchGetItem": 1, "UpdateItem": 1, "SendMessageBatch": 12})
    work = hub.drain()
    assert all(w.census for w in work)
    # Every target probed, only those holding GPUs swept, each one's new answer written once.
    assert hub.calls == Counter({"probe": 120, "sweep": 5, "UpdateItem": 5})
    assert set(hub.swept) == holding

    between = hub.fan_out(NOON + timedelta(minutes=5))
    assert between["census"] is False and between["targets"] == 5 and between["items"] == 5
    assert hub.calls == Counter({"BatchGetItem": 1, "SendMessageBatch": 1})
    hub.drain()
    assert hub.calls == Counter({"sweep": 5}) and set(hub.swept) == holding  # no probe, no write

    # An hour on, the census again: the instances of one account-region are gone, another has some now.
    gone, new = sorted(holding)[0], (ACCOUNTS[1], REGIONS[2])
    hub.holding = (holding - {gone}) | {new}
    again = hub.fan_out(NOON + timedelta(minutes=60))
    assert again["census"] is True and again["targets"] == 120
    hub.drain()
    assert hub.calls == Counter({"probe": 120, "sweep": 5, "UpdateItem": 2})  # only the two changes written
    after = hub.fan_out(NOON + timedelta(minutes=65))
    assert after["targets"] == 5
    hub.drain()
    assert set(hub.swept) == hub.holding


def test_an_account_region_no_longer_planned_is_forgotten_at_the_census(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hub = Hub(monkeypatch, {(ACCOUNTS[0], "eu-west-1")})
    hub.fan_out(NOON)
    hub.drain()
    hub.settings = hub.settings.model_copy(update={"regions": ("us-east-1", "us-west-2")})
    census = hub.fan_out(NOON + timedelta(hours=1))
    assert census["targets"] == 80
    assert hub.calls["UpdateItem"] == 2  # the census's time, and the dropped region forgotten
    assert org.Census("state", "gpu").read()[1] == set()


def test_a_one_target_item_of_the_older_shape_is_read_as_a_work_item() -> None:
    body = (
        '{"sweep": "gpu", "account": "222222222222", "region": "us-west-2", "event_id": "e", '
        '"time": "2026-11-20T12:00:00Z"}'
    )
    work = org.read_work(body)
    assert not work.census and [(t.account, t.region) for t in work.targets] == [
        ("222222222222", "us-west-2")
    ]


def test_items_hold_one_target_while_the_cap_finishes_the_sweep_in_time() -> None:
    five = timedelta(minutes=5)
    # 850 account-regions with GPUs (5% of 1,000 accounts x 17 regions) at 3 s each, at a cap of 20.
    sizing = org.size([org.TARGET_SECONDS] * 850, cap=20, interval=five)
    assert sizing.per_item == 1 and sizing.items == 850 and sizing.fits
    assert sizing.finish_seconds <= 0.8 * 300 and sizing.needed == 11
    # The hourly census of 17,000 at a cap of 50: one a item would not finish in time; ten an item do.
    census = [org.PROBE_SECONDS] * 16_150 + [org.TARGET_SECONDS + org.PROBE_SECONDS] * 850
    sizing = org.size(census, cap=50, interval=five)
    assert sizing.per_item > 1 and sizing.fits and sizing.finish_seconds <= 240
    assert sizing.items == -(-17_000 // sizing.per_item)
    # At the default cap the census cannot: said, not hidden.
    assert not org.size(census, cap=5, interval=five).fits


def test_a_small_organization_keeps_one_target_an_item() -> None:
    sizing = org.size([org.PROBE_SECONDS] * 6, cap=20, interval=timedelta(minutes=5))
    assert (sizing.items, sizing.per_item, sizing.concurrency) == (6, 1, 6)
    assert org.size([], cap=20, interval=timedelta(minutes=5)).items == 0


@pytest.mark.parametrize(
    ("sweep", "function"),
    [
        ("gpu", "GpuIdleFunction"),
        ("sagemaker", "SageMakerIdleFunction"),
        ("training_ceilings", "TrainingCeilingsFunction"),
        ("capacity", "CapacityFunction"),
    ],
)
def test_each_sweeps_interval_is_its_schedule_and_its_queue_runs_at_the_cap(
    sweep: str, function: str
) -> None:
    events = Template.load(ROOT / "template.yaml").resources[function]["Properties"]["Events"]
    [schedule] = [e["Properties"]["Schedule"] for e in events.values() if e["Type"] == "Schedule"][:1]
    number, unit = re.fullmatch(r"rate\((\d+) (minutes?|hours?)\)", schedule).groups()  # type: ignore[union-attr]
    rate = timedelta(**{unit.rstrip("s") + "s": int(number)})
    assert org.SWEEP_INTERVALS[sweep] == rate
    [items] = [e for e in events.values() if e["Type"] == "SQS"]
    assert items["Properties"]["ScalingConfig"]["MaximumConcurrency"] == {"Ref": "SweepConcurrencyCap"}
