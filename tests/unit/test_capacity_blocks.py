"""Capacity Blocks (expiring, unused), future-dated reservation states, and how their events are recognised."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard.detect.capacity_blocks import expiring_finding, jobs_on, state_finding, unused_finding
from costguard.events.capacity import CapacityBlockEvent, ReservationStateChange
from costguard.events.registry import model_for
from costguard.model import Action, CapacityReservation, Ec2Instance, Reason
from costguard.policy import Policy, decide
from costguard.pricing import Price
from tests.conftest import load_event

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
P5 = Price(55.04, "t")
EVERY_MODE = [Policy(dry_run=True), Policy(dry_run=False, grace=timedelta(0))]


def block(start: datetime | None = NOW - timedelta(hours=1), total: int = 2) -> CapacityReservation:
    return CapacityReservation(
        id="cr-0b10c",
        account="123456789012",
        region="us-east-1",
        instance_type="p5.48xlarge",
        total=total,
        available=total,
        reservation_type="capacity-block",
        start=start,
        end=NOW + timedelta(days=1),
        # Even opted in and marked, a block is never cancelled.
        tags={"costguard:auto-cancel": "true", "costguard:marked-at": "2026-11-19T00:00:00+00:00"},
    )


def instance(instance_id: str, tags: dict[str, str]) -> Ec2Instance:
    return Ec2Instance(
        id=instance_id,
        type="p5.48xlarge",
        state="running",
        account="123456789012",
        region="us-east-1",
        launch_time=None,
        tags=tags,
    )


def test_unused_block_costs_each_idle_hour_and_is_never_cancelled() -> None:
    finding = unused_finding(block(), [], [], idle=timedelta(minutes=30), price=P5, now=NOW, event_id="e")
    assert finding is not None and finding.reason is Reason.CAPACITY_BLOCK_UNUSED
    assert finding.hourly_usd == pytest.approx(2 * 55.04)
    assert finding.cost_usd == pytest.approx(2 * 55.04)  # one idle hour since its start
    assert not finding.remediable
    for policy in EVERY_MODE:
        assert decide(finding, policy, NOW).action is Action.NOTIFY


def test_block_used_recently_is_not_unused() -> None:
    used = [(NOW - timedelta(minutes=20), 1.0), (NOW - timedelta(minutes=15), 0.0)]
    assert (
        unused_finding(block(), [], used, idle=timedelta(minutes=30), price=P5, now=NOW, event_id="e") is None
    )


def test_block_idle_since_its_last_use() -> None:
    used = [(NOW - timedelta(minutes=50), 1.0), (NOW - timedelta(minutes=45), 0.0)]
    finding = unused_finding(block(), [], used, idle=timedelta(minutes=30), price=P5, now=NOW, event_id="e")
    assert finding is not None and finding.evidence["idle_minutes"] == 45


def test_block_with_an_instance_running_is_not_unused() -> None:
    running = [instance("i-1", {})]
    assert (
        unused_finding(block(), running, [], idle=timedelta(minutes=30), price=P5, now=NOW, event_id="e")
        is None
    )


def test_block_delivered_minutes_ago_is_not_yet_unused() -> None:
    fresh = block(start=NOW - timedelta(minutes=10))
    assert unused_finding(fresh, [], [], idle=timedelta(minutes=30), price=P5, now=NOW, event_id="e") is None


def test_expiring_block_names_instances_and_jobs_and_when_termination_starts() -> None:
    end = NOW + timedelta(minutes=40)
    running = [
        instance("i-1", {"sagemaker:training-job-name": "llm-pretrain", "Name": "node-1"}),
        instance("i-2", {"costguard:job": "llm-pretrain"}),
    ]
    finding = expiring_finding(
        "cr-0b10c",
        block(),
        running,
        end=end,
        account="1",
        region="us-east-1",
        price=P5,
        now=NOW,
        event_id="e",
    )
    assert finding.reason is Reason.CAPACITY_BLOCK_EXPIRING
    assert finding.evidence["terminating_from"] == (end - timedelta(minutes=30)).isoformat()
    assert finding.evidence["jobs"] == ["llm-pretrain"]
    assert "i-1 (node-1)" in finding.summary and "i-2" in finding.summary
    assert "Checkpoint now" in finding.summary and "10 minutes from now" in finding.summary
    for policy in EVERY_MODE:
        assert decide(finding, policy, NOW).action is Action.NOTIFY


def test_jobs_are_named_once() -> None:
    assert jobs_on([instance("i-1", {"costguard:job": "a"}), instance("i-2", {"costguard:job": "a"})]) == [
        "a"
    ]


def test_state_notice_is_informational() -> None:
    finding = state_finding(
        "delayed", "cr-1", None, account="1", region="us-east-1", price=None, observed_at=NOW, event_id="e"
    )
    assert finding.reason is Reason.CAPACITY_RESERVATION_STATE
    assert "delayed" in finding.summary and not finding.remediable


@pytest.mark.parametrize(
    "detail_type",
    ["Capacity Block Delivered", "Capacity Block Expiration Warning", "Capacity Block Reservation Delivered"],
)
def test_capacity_block_detail_types_are_matched_by_prefix(detail_type: str) -> None:
    event = load_event("ec2-capacity-block-delivered.json") | {"detail-type": detail_type}
    assert model_for(event) is CapacityBlockEvent
    parsed = CapacityBlockEvent.model_validate(event)
    assert parsed.is_expiration_warning is ("Expiration" in detail_type)


def test_reservation_states_map_exactly_and_the_interruption_warning_is_not_one() -> None:
    event = load_event("ec2-capacity-reservation-active.json")
    assert model_for(event) is ReservationStateChange
    assert ReservationStateChange.model_validate(event).state == "active"
    other = event | {"detail-type": "EC2 Capacity Reservation Instance Interruption Warning"}
    assert model_for(other) is None


def test_warning_read_after_termination_began_says_so() -> None:
    finding = expiring_finding(
        "cr-0b10c",
        block(),
        [],
        end=NOW + timedelta(minutes=20),
        account="1",
        region="us-east-1",
        price=P5,
        now=NOW,
        event_id="e",
    )
    assert "already under way" in finding.summary and "nothing to save" in finding.summary


def test_successive_states_of_one_reservation_are_each_news_but_a_repeat_is_not() -> None:
    from costguard.notify.dedupe import MemoryRepeatGate
    from costguard.notify.queue import MemoryNoticeQueue
    from costguard.pipeline import act_on

    gate, queue = MemoryRepeatGate(), MemoryNoticeQueue()

    def notify(state: str, at: datetime) -> None:
        finding = state_finding(
            state, "cr-1", None, account="1", region="us-east-1", price=None, observed_at=at, event_id=state
        )
        act_on(
            [finding],
            policy=Policy(),
            now=at,
            remediator=object(),  # type: ignore[arg-type]  # notify-only: never called
            queue=queue,
            gate=gate,
            repeat_window=timedelta(hours=4),
        )

    notify("scheduled", NOW)
    notify("active", NOW + timedelta(minutes=30))
    notify("active", NOW + timedelta(minutes=40))
    assert [n.decision.finding.evidence["state"] for n in queue.sent] == ["scheduled", "active"]
