"""Writes on change only: a sweep over an unchanged fleet of standing findings writes nothing to the state table
and queues no message; a finding that changed still does both. Counted on the embedded AWS through the deployed
GPU sweep handler, with the fleet's metrics answered in-process (local/metric_responder.py)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard import clock
from costguard.act.shadow import PREFIX as SHADOW_PREFIX
from costguard.aws import clients
from costguard.local.metric_responder import Dimensions, MetricResponder
from costguard.local.sink import SlackSink
from costguard.local.stack import STAND_IN_IMAGE, LocalStack
from costguard.local.world import World
from costguard.notify.notice import GroupNotice, Notice

REGION = "us-east-1"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
FLEET = 600
DYNAMODB_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
SQS_SENDS = {"SendMessage", "SendMessageBatch"}
# The standing findings are read again within the idle window whether or not the sweep reads on a schedule
# (an unmarked idle instance is read once per idle window); 30 minutes is well inside the refresh of the
# default 240-minute repeat window (60 minutes), so no episode end has to move.
LATER = timedelta(minutes=30)


def launch_fleet(stack: LocalStack, size: int, *, protected: bool = True) -> list[str]:
    """Running g5.xlarge instances (one A10G each), launched a day ago, in one RunInstances call (the world's
    one call per instance would make this test slow); their series are answered by ``responder``. Protected,
    their idle findings stand as they are (never marked, never due a stop) for as long as nothing changes."""
    from moto.ec2.models import ec2_backends  # the embedded AWS only

    ec2 = clients.ec2(REGION)
    tags = [{"Key": "team", "Value": "research"}]
    if protected:
        tags.append({"Key": "costguard:protect", "Value": "true"})
    made = ec2.run_instances(
        ImageId=STAND_IN_IMAGE,
        InstanceType="g5.xlarge",
        MinCount=size,
        MaxCount=size,
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )
    reservation = ec2_backends[stack.world.account][REGION].reservations[made["ReservationId"]]
    for instance in reservation.instances:
        instance.launch_time = NOW - timedelta(days=1)
    return sorted(i["InstanceId"] for i in made["Instances"])


def responder(ids: list[str], busy: dict[str, tuple[datetime, datetime]] | None = None) -> MetricResponder:
    """Every GPU idle (1%) at all times, but those ``busy`` over [start, end) (90%)."""
    busy = busy or {}
    metrics: list[tuple[str, str, Dimensions]] = []
    for instance_id in ids:
        gpu = (("InstanceId", instance_id), ("index", "0"), ("name", "NVIDIA A10G"))
        metrics.append(("CWAgent", "nvidia_smi_utilization_gpu", gpu))
        metrics.append(("AWS/EC2", "CPUUtilization", (("InstanceId", instance_id),)))
        metrics.append(("AWS/EC2", "NetworkIn", (("InstanceId", instance_id),)))

    def values(namespace: str, metric: str, dims: Dimensions, times: list[datetime]) -> list[float | None]:
        if metric == "CPUUtilization":
            return [3.0 for _ in times]
        if metric == "NetworkIn":
            return [1e5 for _ in times]
        span = busy.get(dict(dims)["InstanceId"])
        return [90.0 if span and span[0] <= t < span[1] else 1.0 for t in times]

    return MetricResponder(metrics, values)


class Calls:
    """Every call the handlers make through the client factory, and the parameters of each write and send."""

    def __init__(self) -> None:
        self.params: list[tuple[str, dict[str, Any]]] = []

    def watch(self) -> None:
        for service in ("dynamodb", "sqs"):
            clients.client(service).meta.events.register(f"provide-client-params.{service}.*", self._keep)

    def _keep(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if model.name in DYNAMODB_WRITES | SQS_SENDS:
            self.params.append((model.name, dict(params)))

    def clear(self) -> None:
        clients.calls.clear()
        self.params.clear()

    def dynamodb(self) -> Counter[str]:
        return Counter({op: n for (service, op), n in clients.calls.items() if service == "dynamodb" and n})

    def sends(self) -> Counter[str]:
        return Counter({op: n for (service, op), n in clients.calls.items() if service == "sqs" and n})

    def dynamodb_writes(self) -> int:
        return sum(n for op, n in self.dynamodb().items() if op in DYNAMODB_WRITES)

    def sqs_sends(self) -> int:
        return sum(n for op, n in self.sends().items() if op in SQS_SENDS)

    def notices(self) -> list[Notice | GroupNotice]:
        """The notices the sends queued (a group counts its rows)."""
        bodies = [
            entry["MessageBody"]
            for op, params in self.params
            if op in SQS_SENDS
            for entry in params.get("Entries", [params])
        ]
        return [_notice(body) for body in bodies]


def _notice(body: str) -> Notice | GroupNotice:
    if json.loads(body).get("kind") == "group":
        return GroupNotice.model_validate_json(body)
    return Notice.model_validate_json(body)


def sweep(stack: LocalStack, at: datetime) -> dict[str, Any]:
    """The scheduled GPU sweep at ``at``, as EventBridge delivers it to GpuIdleFunction: its summary."""
    clock.freeze(at)
    event = {
        "version": "0",
        "id": f"sweep-{at:%H%M}",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": stack.world.account,
        "time": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "resources": ["arn:aws:events:us-east-1:123456789012:rule/costguard-gpu-sweep"],
        "detail": {},
    }
    result: dict[str, Any] = stack.invoke("GpuIdleFunction", event).result
    return result


def idle_findings(summary: dict[str, Any]) -> set[str]:
    return {f["resource_id"] for f in summary["findings"] if f["reason"] == "gpu_idle"}


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def fleet(calls: Calls) -> Iterator[LocalStack]:
    with SlackSink() as sink, LocalStack(World(now=NOW), sink=sink) as stack:
        responder(launch_fleet(stack, FLEET)).install(clients.cloudwatch(REGION))
        calls.watch()
        yield stack


def test_a_sweep_over_an_unchanged_fleet_of_600_standing_findings_writes_nothing_and_queues_nothing(
    fleet: LocalStack, calls: Calls
) -> None:
    calls.clear()
    first = sweep(fleet, NOW)
    assert len(idle_findings(first)) == FLEET
    # The first sweep tells them: each episode claimed (one conditional update each), one grouped message.
    assert calls.dynamodb()["UpdateItem"] >= FLEET
    assert calls.sqs_sends() >= 1
    assert sum(n.count if isinstance(n, GroupNotice) else 1 for n in calls.notices()) == FLEET

    calls.clear()
    second = sweep(fleet, NOW + LATER)
    # Nothing changed, and the sweep did see it all again: the same 600 standing findings, each decided.
    assert idle_findings(second) == idle_findings(first)
    assert len(second["decisions"]) == FLEET
    assert second["notified"] == 0 and second["suppressed"] == FLEET
    # ... and sent nothing. Its only writes are the read schedule's: read at their slot (an idle window after the
    # first reading), each standing finding's next slot, written by shard (64 items, 25 a call), never per
    # instance; the repeat gate writes nothing.
    assert calls.sqs_sends() == 0, calls.sends()
    assert calls.dynamodb_writes() == calls.dynamodb()["BatchWriteItem"] <= 3, calls.dynamodb()
    written = {
        request["PutRequest"]["Item"]["id"]["S"].split("#", 1)[0]
        for op, params in calls.params
        for requests in params.get("RequestItems", {}).values()
        for request in requests
    }
    assert written == {"read-plan"}, written
    # What it did ask of the state table otherwise: reads only, the repeat gate's in batches of 100.
    assert calls.dynamodb()["BatchGetItem"] >= FLEET // 100

    calls.clear()
    between = sweep(fleet, NOW + LATER + timedelta(minutes=5))
    # Between two slots nothing is due: nothing read, decided, written or sent.
    assert len(between["decisions"]) == 0
    assert calls.dynamodb_writes() == 0 and calls.sqs_sends() == 0 and calls.params == []


SMALL = 20


def test_a_finding_that_changed_is_written_and_told(calls: Calls) -> None:
    """One instance works from 12:05 to 13:20, then idles again. Under a 60-minute repeat window (stored 75
    minutes ahead), its episode has ended by its next idle verdict at 14:00: that sighting is news, written and
    queued. The others, seen at every sweep, stay one episode each and are not told again."""
    overrides = {"COSTGUARD_DEDUPE_WINDOW_MINUTES": "60"}
    with SlackSink() as sink, LocalStack(World(now=NOW), sink=sink, overrides=overrides) as stack:
        ids = launch_fleet(stack, SMALL)
        changed = ids[3]
        busy = {changed: (NOW + timedelta(minutes=5), NOW + timedelta(minutes=80))}
        responder(ids, busy).install(clients.cloudwatch(REGION))
        calls.watch()
        first = sweep(stack, NOW)
        assert idle_findings(first) == set(ids)
        for minutes in (30, 60, 90):
            between = sweep(stack, NOW + timedelta(minutes=minutes))
            assert changed not in idle_findings(between)  # working: no idle verdict
            assert between["notified"] == 0
        calls.clear()
        last = sweep(stack, NOW + timedelta(minutes=120))
        assert idle_findings(last) == set(ids)
        assert last["notified"] == 1
        [notice] = calls.notices()
        assert isinstance(notice, Notice)
        assert (notice.decision.resource.id, notice.decision.reason.value) == (changed, "gpu_idle")
        assert calls.sqs_sends() == 1
        claimed = [
            p["Key"]["id"]["S"]
            for op, p in calls.params
            if op == "UpdateItem" and "told" in p.get("UpdateExpression", "")
        ]
        assert len(claimed) == 1 and changed in claimed[0]


MARKED = 150  # more than one BatchGetItem of keys


def shadow_writes(calls: Calls) -> list[tuple[str, str]]:
    """The writes to notify mode's marks (act/shadow.py): (operation, resource key)."""
    written = []
    for op, params in calls.params:
        item = params.get("Item") or params.get("Key") or {}
        key = item.get("id", {}).get("S", "")
        if key.startswith(SHADOW_PREFIX):
            written.append((op, key.removeprefix(SHADOW_PREFIX)))
    return written


def test_a_fleet_marked_in_notify_mode_keeps_its_stop_time_and_writes_nothing_once_it_is_told(
    calls: Calls,
) -> None:
    """Notify mode keeps its marks in the state table: an idle fleet is marked once (a write each), waits out
    its grace period (nothing written), is due its stop when remediate mode would stop it (a write each, told
    once), then stands (nothing written, nothing told). The stop time never moves."""
    overrides = {"COSTGUARD_MAX_STOPS_PER_RUN": "1000"}
    with SlackSink() as sink, LocalStack(World(now=NOW), sink=sink, overrides=overrides) as stack:
        ids = launch_fleet(stack, MARKED, protected=False)
        responder(ids).install(clients.cloudwatch(REGION))
        calls.watch()
        due = (NOW + timedelta(minutes=15)).isoformat()  # the template's 15-minute grace period

        def decided(summary: dict[str, Any]) -> set[tuple[str, str | None]]:
            return {(d["action"], d["stop_after"]) for d in summary["decisions"]}

        marked = sweep(stack, NOW)
        assert decided(marked) == {("mark", due)} and len(marked["decisions"]) == MARKED
        assert sorted(shadow_writes(calls)) == sorted(
            ("PutItem", f"123456789012/{REGION}/ec2_instance/{i}") for i in ids
        )

        calls.clear()
        waiting = sweep(stack, NOW + timedelta(minutes=10))
        assert decided(waiting) == {("none", due)} and len(waiting["decisions"]) == MARKED
        assert shadow_writes(calls) == [] and calls.sqs_sends() == 0
        assert calls.dynamodb()["BatchGetItem"] >= MARKED // 100 + 1  # the marks, read back in batches

        calls.clear()
        stopping = sweep(stack, NOW + timedelta(minutes=30))
        assert decided(stopping) == {("stop", due)} and stopping["notified"] == MARKED
        assert len(shadow_writes(calls)) == MARKED  # each would-be stop kept once

        calls.clear()
        standing = sweep(stack, NOW + timedelta(minutes=60))
        assert decided(standing) == {("stop", due)}
        assert standing["notified"] == 0 and standing["suppressed"] == MARKED
        assert shadow_writes(calls) == []
        assert calls.dynamodb()["UpdateItem"] == 0 and calls.sqs_sends() == 0
        assert {state for state in instance_states(ids)} == {"running"}  # a dry run stops nothing


def instance_states(ids: list[str]) -> list[str]:
    reservations = clients.ec2(REGION).describe_instances(InstanceIds=ids)["Reservations"]
    return [i["State"]["Name"] for r in reservations for i in r["Instances"]]
