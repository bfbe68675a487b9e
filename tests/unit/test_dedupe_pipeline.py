"""pipeline.act_on and the repeat gate: one batched read of a run's sightings, the same news told once a run,
an unreadable gate telling everything, and no queued message for a run with nothing new."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from costguard.model import Finding, Reason, Resource, ResourceKind
from costguard.notify.dedupe import DIGEST_AFTER, MemoryRepeatGate, Sighting
from costguard.notify.notice import AnyNotice
from costguard.notify.queue import MemoryNoticeQueue
from costguard.pipeline import Report, act_on
from costguard.policy import Policy

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=240)
SWEEP = timedelta(minutes=5)


class CountingGate(MemoryRepeatGate):
    """The memory gate, counting the batched reads it is asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[int] = []

    def sightings(
        self, windows: Mapping[str, timedelta], now: datetime, digest_after: timedelta = DIGEST_AFTER
    ) -> dict[str, Sighting]:
        self.asked.append(len(windows))
        return super().sightings(windows, now, digest_after)


class UnreachableGate(MemoryRepeatGate):
    def sightings(
        self, windows: Mapping[str, timedelta], now: datetime, digest_after: timedelta = DIGEST_AFTER
    ) -> dict[str, Sighting]:
        raise ConnectionError("state table unreachable")


class NoRemediator:
    def stop(self, resource: Resource) -> None:
        raise AssertionError("notify only")

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        raise AssertionError("notify only")

    def unmark(self, resource: Resource) -> None:
        raise AssertionError("notify only")


def finding(n: int, reason: Reason = Reason.GPU_IDLE) -> Finding:
    resource = Resource(
        kind=ResourceKind.EC2_INSTANCE,
        id=f"i-{n:017x}",
        account="123456789012",
        region="us-east-1",
        instance_type="g5.xlarge",
        tags={"team": "ml"},
    )
    return Finding(reason=reason, resource=resource, summary=f"idle {n}", observed_at=NOW, hourly_usd=1.0)


def run(
    findings: Sequence[Finding], gate: MemoryRepeatGate, at: datetime = NOW
) -> tuple[Report, list[AnyNotice]]:
    queue = MemoryNoticeQueue()
    report = act_on(
        findings,
        policy=Policy(dry_run=True),
        now=at,
        remediator=NoRemediator(),
        queue=queue,
        gate=gate,
        repeat_window=WINDOW,
        group_above=1000,
    )
    return report, queue.sent


def test_a_run_asks_the_gate_once_for_all_its_sightings() -> None:
    gate = CountingGate()
    fleet = [finding(n) for n in range(250)] + [finding(0, Reason.GPU_METRICS_MISSING)]
    report, sent = run(fleet, gate)
    assert gate.asked == [251]
    assert len(report.notices) == len(sent) == 251
    assert gate.writes == 251  # each news claimed


def test_an_unchanged_fleet_queues_nothing_and_the_gate_writes_nothing() -> None:
    gate = CountingGate()
    fleet = [finding(n) for n in range(250)]
    run(fleet, gate)
    writes = gate.writes
    report, sent = run(fleet, gate, NOW + SWEEP)
    assert len(report.findings) == 250 and len(report.suppressed) == 250
    assert sent == [] and report.notices == []
    assert gate.writes == writes


def test_the_same_news_twice_in_one_run_is_told_once() -> None:
    report, sent = run([finding(7), finding(7)], MemoryRepeatGate())
    assert len(report.notices) == len(sent) == 1
    assert len(report.suppressed) == 1


def test_an_unreadable_gate_tells_everything() -> None:
    report, sent = run([finding(n) for n in range(3)], UnreachableGate())
    assert len(report.notices) == len(sent) == 3
    assert report.suppressed == []
