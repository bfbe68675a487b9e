"""Notify mode's marks (act/shadow.py): a dry run keeps its mark in the state table, so its "would be stopped at"
stays where a live run's stop is, from one run to the next; working again ends the episode; a would-be stop is
kept once, takes no place under the cap again, and its shadow mark is never shown as a tag."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import pytest

from costguard.act.shadow import (
    KEPT,
    DynamoShadowMarks,
    MemoryShadowMarks,
    Shadow,
    key_of,
    overlay,
)
from costguard.aws import clients
from costguard.model import (
    MARK_TAG_KEY,
    Action,
    Ec2Instance,
    Finding,
    Reason,
    Resource,
    ResourceKind,
    mark_text,
)
from costguard.notify.dedupe import MemoryRepeatGate
from costguard.notify.notice import Notice
from costguard.notify.queue import MemoryNoticeQueue
from costguard.pipeline import Report, act_on
from costguard.policy import Policy

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
GRACE = timedelta(minutes=15)
SWEEPS = [NOW + timedelta(minutes=m) for m in (0, 5, 10, 20, 30, 60)]


class Tagging:
    """A live run's remediator on an in-memory fleet: marks are tags, a stopped resource is gone."""

    def __init__(self) -> None:
        self.tags: dict[str, dict[str, str]] = {}
        self.stopped: set[str] = set()

    def stop(self, resource: Resource) -> None:
        self.stopped.add(resource.key)

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        self.tags.setdefault(resource.key, {})[MARK_TAG_KEY] = mark_text(at)

    def unmark(self, resource: Resource) -> None:
        self.tags.get(resource.key, {}).pop(MARK_TAG_KEY, None)


def idle(n: int, at: datetime, tags: dict[str, str] | None = None, hourly: float = 1.0) -> Finding:
    resource = Resource(
        kind=ResourceKind.EC2_INSTANCE,
        id=f"i-{n:017x}",
        account="123456789012",
        region="us-east-1",
        tags={"team": "ml", **(tags or {})},
    )
    return Finding(
        reason=Reason.GPU_IDLE,
        resource=resource,
        summary="idle",
        observed_at=at,
        hourly_usd=hourly,
        remediable=True,
    )


def working_again(n: int, at: datetime) -> Finding:
    return idle(n, at).model_copy(
        update={"reason": Reason.GPU_ACTIVE_AGAIN, "remediable": False, "cancels_mark": True}
    )


def run(
    findings: Iterable[Finding],
    at: datetime,
    *,
    dry_run: bool,
    shadow: MemoryShadowMarks | None = None,
    remediator: Tagging | None = None,
    gate: MemoryRepeatGate | None = None,
    max_stops: int = 5,
) -> tuple[Report, list[Notice]]:
    queue = MemoryNoticeQueue()
    report = act_on(
        list(findings),
        policy=Policy(dry_run=dry_run, grace=GRACE, max_stops=max_stops),
        now=at,
        remediator=remediator or Tagging(),
        queue=queue,
        gate=gate or MemoryRepeatGate(),
        repeat_window=timedelta(hours=4),
        group_above=1000,
        shadow=shadow,
    )
    return report, [n for n in queue.sent if isinstance(n, Notice)]


def decided(report: Report) -> list[tuple[Action, datetime | None]]:
    return [(d.action, d.stop_after) for d in report.decisions]


def test_a_dry_run_keeps_its_mark_so_its_stop_time_is_a_live_runs_and_stays_put() -> None:
    shadow, gate = MemoryShadowMarks(), MemoryRepeatGate()
    notify = [decided(run([idle(1, at)], at, dry_run=True, shadow=shadow, gate=gate)[0]) for at in SWEEPS]

    live = Tagging()
    remediate = []
    for at in SWEEPS:
        key = idle(1, at).resource.key
        seen = [] if key in live.stopped else [idle(1, at, live.tags.get(key))]  # stopped: no longer running
        remediate.append(decided(run(seen, at, dry_run=False, remediator=live)[0]))

    due = NOW + GRACE
    assert [d for ds in notify for d in ds] == [
        (Action.MARK, due),
        (Action.NONE, due),
        (Action.NONE, due),
        (Action.STOP, due),  # at 12:20, when remediate mode stops it
        (Action.STOP, due),  # still running: decided again, at the same stop time
        (Action.STOP, due),
    ]
    assert remediate[:4] == notify[:4] and remediate[4:] == [[], []]
    # One write for the mark, one for the would-be stop; one batched read per run.
    assert shadow.calls == {"read": len(SWEEPS), "put": 2, "delete": 0}


def test_a_would_be_stop_is_told_once_whatever_it_is_decided_for() -> None:
    shadow, gate = MemoryShadowMarks(), MemoryRepeatGate()
    run([idle(1, NOW)], NOW, dry_run=True, shadow=shadow, gate=gate)
    later = NOW + timedelta(minutes=20)
    _, told = run([idle(1, later)], later, dry_run=True, shadow=shadow, gate=gate)
    assert [n.decision.action for n in told] == [Action.STOP]
    budget = idle(1, later + timedelta(minutes=10)).model_copy(update={"reason": Reason.BUDGET_BREACH})
    report, told = run([budget], budget.observed_at, dry_run=True, shadow=shadow, gate=gate)
    assert decided(report) == [(Action.STOP, NOW + GRACE)] and told == []


def test_working_again_ends_the_episode_and_the_next_one_has_its_own_stop_time() -> None:
    shadow = MemoryShadowMarks()
    run([idle(1, NOW)], NOW, dry_run=True, shadow=shadow)
    busy = NOW + timedelta(minutes=10)
    report, _ = run([working_again(1, busy)], busy, dry_run=True, shadow=shadow)
    assert decided(report) == [(Action.UNMARK, None)]
    assert shadow.items == {}
    again = NOW + timedelta(minutes=40)
    report, _ = run([idle(1, again)], again, dry_run=True, shadow=shadow)
    assert decided(report) == [(Action.MARK, again + GRACE)]


def test_a_resource_would_be_stopped_takes_no_place_under_the_cap_again() -> None:
    """A live run would have stopped it: the next one goes as it would in remediate mode."""
    shadow = MemoryShadowMarks()
    fleet = [(1, 3.0), (2, 2.0), (3, 1.0)]
    run([idle(n, NOW, hourly=h) for n, h in fleet], NOW, dry_run=True, shadow=shadow, max_stops=1)
    actions = []
    for minutes in (20, 25, 30):
        at = NOW + timedelta(minutes=minutes)
        report, _ = run(
            [idle(n, at, hourly=h) for n, h in fleet], at, dry_run=True, shadow=shadow, max_stops=1
        )
        actions.append([d.action for d in report.decisions])
    assert actions == [
        [Action.STOP, Action.NOTIFY, Action.NOTIFY],
        [Action.STOP, Action.STOP, Action.NOTIFY],
        [Action.STOP, Action.STOP, Action.STOP],
    ]


def test_the_message_shows_the_tags_the_resource_has_not_the_shadow_mark() -> None:
    shadow = MemoryShadowMarks()
    run([idle(1, NOW)], NOW, dry_run=True, shadow=shadow)
    later = NOW + timedelta(minutes=20)
    report, [told] = run([idle(1, later)], later, dry_run=True, shadow=shadow)
    assert MARK_TAG_KEY in report.decisions[0].resource.tags  # decided on the mark
    assert told.decision.resource.tags == {"team": "ml"}  # told with the instance's own tags
    assert told.decision.stop_after == NOW + GRACE


def test_an_unreadable_store_decides_without_it_and_moves_no_mark() -> None:
    class Unreadable(MemoryShadowMarks):
        def _fetch(self, keys: object, now: datetime) -> dict[str, Shadow]:
            raise ConnectionError("state table unreachable")

    shadow = Unreadable()
    key = idle(1, NOW).resource.key
    shadow.items[key] = (Shadow(mark=mark_text(NOW - timedelta(minutes=5))), NOW + KEPT)
    report, told = run([idle(1, NOW)], NOW, dry_run=True, shadow=shadow)
    assert [d.action for d in report.decisions] == [Action.MARK] and len(told) == 1
    assert shadow.items[key][0].mark == mark_text(NOW - timedelta(minutes=5))  # the kept mark did not move


def test_a_live_run_keeps_nothing_in_the_state_table() -> None:
    shadow = MemoryShadowMarks()
    run([idle(1, NOW)], NOW, dry_run=False, shadow=shadow)
    assert shadow.calls == {"read": 0, "put": 0, "delete": 0}


def test_a_flow_reads_the_marks_as_the_tags_a_live_run_would_read() -> None:
    shadow = MemoryShadowMarks()
    marked = Resource(kind=ResourceKind.EC2_INSTANCE, id="i-1", account="123456789012", region="us-east-1")
    shadow.mark(marked, NOW)
    instances = [
        Ec2Instance(
            id=i,
            type="g5.xlarge",
            state="running",
            account="123456789012",
            region="us-east-1",
            launch_time=None,
            tags={"team": "ml"},
        )
        for i in ("i-1", "i-2")
    ]
    later = NOW + timedelta(minutes=5)
    seen = overlay(
        instances, shadow, later, lambda i: key_of(i.account, i.region, ResourceKind.EC2_INSTANCE, i.id)
    )
    assert [i.tags for i in seen] == [{"team": "ml", MARK_TAG_KEY: mark_text(NOW)}, {"team": "ml"}]
    assert overlay(instances, None, later, lambda i: i.id) == instances
    # Read once a run: the pipeline asks again for nothing.
    assert shadow.calls["read"] == 1
    shadow.read([marked.key, "123456789012/us-east-1/ec2_instance/i-2"], later)
    assert shadow.calls["read"] == 1


def test_the_state_table_holds_one_item_per_mark_read_in_batches_and_ignores_an_expired_one(
    state_table: str,
) -> None:
    store = DynamoShadowMarks(state_table)
    fleet = [Resource(kind=ResourceKind.NOTEBOOK, id=f"nb-{n}", account="1", region="r") for n in range(150)]
    for resource in fleet:
        store.mark(resource, NOW)
    store.stop(fleet[0], NOW + GRACE)
    item = clients.client("dynamodb").get_item(
        TableName=state_table, Key={"id": {"S": f"shadow-mark#{fleet[0].key}"}}
    )
    assert item["Item"]["mark"]["S"] == mark_text(NOW)
    assert item["Item"]["stopped"]["S"] == (NOW + GRACE).isoformat()
    assert int(item["Item"]["expiration"]["N"]) == int((NOW + GRACE + KEPT).timestamp())

    fresh = DynamoShadowMarks(state_table)
    clients.calls.clear()
    found = fresh.read([r.key for r in fleet], NOW + timedelta(minutes=30))
    assert len(found) == 150 and found[fleet[0].key] == Shadow(mark=mark_text(NOW), stopped=NOW + GRACE)
    assert clients.calls[("dynamodb", "BatchGetItem")] == 2
    # Expired (the TTL deletes late): not a mark; and a new mark may take its place.
    expired = DynamoShadowMarks(state_table)
    assert expired.read([fleet[1].key], NOW + KEPT + timedelta(minutes=1)) == {}
    expired.mark(fleet[1], NOW + KEPT + timedelta(minutes=1))
    # A mark kept already is not moved by a run that did not read it.
    store.mark(fleet[2], NOW + timedelta(minutes=30))
    again = DynamoShadowMarks(state_table).read(
        [fleet[1].key, fleet[2].key], NOW + KEPT + timedelta(minutes=2)
    )
    assert again == {fleet[1].key: Shadow(mark=mark_text(NOW + KEPT + timedelta(minutes=1)))}


@pytest.mark.parametrize("action", ["unmark", "stop"])
def test_a_write_kept_from_before_is_not_made_again(action: str) -> None:
    shadow = MemoryShadowMarks()
    resource = idle(1, NOW).resource
    if action == "unmark":
        shadow.read([resource.key], NOW)
        shadow.unmark(resource)  # nothing kept: nothing to delete
        assert shadow.calls["delete"] == 0
    else:
        shadow.mark(resource, NOW)
        shadow.stop(resource, NOW + GRACE)
        shadow.stop(resource, NOW + GRACE)
        assert shadow.calls["put"] == 2
