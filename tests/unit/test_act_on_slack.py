"""What a run queues for Slack (pipeline.act_on): one notice each, or one group per channel when there are many;
mutes and snoozes; one message per episode, then the daily digest."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from costguard.model import MARK_TAG_KEY, Action, Finding, Reason, Resource, ResourceKind
from costguard.notify.dedupe import MemoryRepeatGate
from costguard.notify.mutes import MemoryMutes
from costguard.notify.notice import AnyNotice, GroupNotice, Notice, parse_notice
from costguard.notify.queue import MemoryNoticeQueue
from costguard.pipeline import Report, act_on
from costguard.policy import SNOOZE_TAG_KEY, Policy

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=240)
SWEEP = timedelta(minutes=5)


class FakeRemediator:
    """Answers as AWS would; a stop of an id in ``failing`` raises (not a refusal: an error)."""

    def __init__(self, failing: set[str] | None = None) -> None:
        self.failing = failing or set()
        self.stopped: list[str] = []
        self.marked: list[str] = []

    def stop(self, resource: Resource) -> None:
        if resource.id in self.failing:
            raise RuntimeError("InternalError: injected")
        self.stopped.append(resource.id)

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        self.marked.append(resource.id)

    def unmark(self, resource: Resource) -> None:
        pass


class Runs:
    """Runs of act_on through one gate, queue and mutes."""

    def __init__(self, remediator: FakeRemediator | None = None) -> None:
        self.remediator = remediator or FakeRemediator()
        self.gate = MemoryRepeatGate()
        self.queue = MemoryNoticeQueue()
        self.mutes = MemoryMutes()
        self.policy = Policy(dry_run=False)

    def run(self, findings: Sequence[Finding], at: datetime = NOW) -> Report:
        return act_on(
            findings,
            policy=self.policy,
            now=at,
            remediator=self.remediator,
            queue=self.queue,
            gate=self.gate,
            repeat_window=WINDOW,
            routing_tag_key="team",
            source="/aws/lambda/costguard-sweep",
            mutes=self.mutes,
        )

    def queued(self, since: int = 0) -> list[AnyNotice]:
        return self.queue.sent[since:]


def _finding(
    n: int,
    *,
    team: str = "ml",
    hourly: float = 1.0,
    remediable: bool = False,
    marked: bool = False,
    tags: dict[str, str] | None = None,
) -> Finding:
    all_tags = {"team": team, **(tags or {})}
    if marked:
        all_tags[MARK_TAG_KEY] = (NOW - timedelta(hours=1)).isoformat()
    resource = Resource(
        kind=ResourceKind.EC2_INSTANCE,
        id=f"i-{n:017x}",
        account="123456789012",
        region="us-east-1",
        instance_type="p4d.24xlarge",
        tags=all_tags,
    )
    return Finding(
        reason=Reason.GPU_IDLE,
        resource=resource,
        summary=f"idle {n}",
        observed_at=NOW,
        hourly_usd=hourly,
        remediable=remediable,
    )


def test_five_findings_for_one_channel_are_one_group() -> None:
    runs = Runs()
    report = runs.run([_finding(n, hourly=float(n + 1)) for n in range(5)])
    [sent] = runs.queued()
    assert isinstance(sent, GroupNotice)
    assert sent.count == 5
    assert len(sent.rows) == 5
    assert sent.hourly_total_usd == 15.0
    assert sent.route_tags == {"team": "ml"}
    assert sent.source == "/aws/lambda/costguard-sweep"
    assert not sent.digest
    assert len(report.notices) == 5


def test_three_findings_for_one_channel_are_three_notices() -> None:
    runs = Runs()
    findings = [_finding(n) for n in range(3)]
    runs.run(findings)
    sent = runs.queued()
    assert len(sent) == 3
    assert all(isinstance(s, Notice) for s in sent)
    assert {s.decision.resource.id for s in sent if isinstance(s, Notice)} == {
        f.resource.id for f in findings
    }


def test_two_channels_with_four_each_are_two_groups() -> None:
    runs = Runs()
    runs.run([_finding(n, team="ml") for n in range(4)] + [_finding(n, team="infra") for n in range(4, 8)])
    sent = runs.queued()
    assert len(sent) == 2
    assert all(isinstance(s, GroupNotice) and s.count == 4 for s in sent)
    routes = {s.route_tags["team"] for s in sent if isinstance(s, GroupNotice)}
    assert routes == {"ml", "infra"}
    for s in sent:
        assert isinstance(s, GroupNotice)
        assert {r.decision.resource.tags["team"] for r in s.rows} == set(s.route_tags.values())


def test_a_muted_finding_is_not_queued_but_a_failed_stop_is() -> None:
    runs = Runs(FakeRemediator(failing={"i-00000000000000002"}))
    muted = _finding(1)
    failing = _finding(2, remediable=True, marked=True)  # a stop due: it fails
    told = _finding(3)
    for f in (muted, failing):
        runs.mutes.until[(f.resource.key, f.reason.value)] = NOW + timedelta(days=1)
    report = runs.run([muted, failing, told])
    sent = runs.queued()
    assert all(isinstance(s, Notice) for s in sent)
    ids = {s.decision.resource.id for s in sent if isinstance(s, Notice)}
    assert ids == {failing.resource.id, told.resource.id}
    assert [d.resource.id for d in report.suppressed] == [muted.resource.id]
    [failed] = [s for s in sent if isinstance(s, Notice) and s.decision.resource.id == failing.resource.id]
    assert failed.decision.action is Action.STOP
    assert failed.outcome.error is not None and failed.outcome.refused is None


def test_a_mute_that_has_ended_tells_again() -> None:
    runs = Runs()
    finding = _finding(1)
    runs.mutes.until[(finding.resource.key, finding.reason.value)] = NOW - timedelta(minutes=1)
    runs.run([finding])
    assert len(runs.queued()) == 1


def test_a_snoozed_resource_is_not_told_and_after_the_snooze_it_is_news_again() -> None:
    runs = Runs()
    plain = _finding(1)
    runs.run([plain], NOW)
    assert len(runs.queued()) == 1  # told once
    runs.run([plain], NOW + SWEEP)
    assert len(runs.queued()) == 1  # the same episode: not again

    until = NOW + timedelta(hours=1)
    snoozed = _finding(1, tags={SNOOZE_TAG_KEY: until.isoformat()})
    report = runs.run([snoozed], NOW + 2 * SWEEP)
    [decision] = report.decisions
    assert decision.action is Action.NOTIFY
    assert report.suppressed == [decision]
    assert len(runs.queued()) == 1  # snoozed: not queued

    later = until + SWEEP  # the snooze is over, still inside the same episode's window
    report = runs.run([snoozed], later)
    sent = runs.queued(1)
    assert len(sent) == 1, "after the snooze the same action is news again"
    [notice] = sent
    assert isinstance(notice, Notice)
    assert notice.decision.action is Action.NOTIFY
    assert any(key.endswith(f"|after-snooze:{until.isoformat()}") for key in runs.gate.told)
    runs.run([snoozed], later + SWEEP)
    assert len(runs.queued(1)) == 1  # and then once per episode again


def test_a_snoozed_remediable_resource_is_not_marked_or_told() -> None:
    runs = Runs()
    snoozed = _finding(1, remediable=True, tags={SNOOZE_TAG_KEY: (NOW + timedelta(hours=4)).isoformat()})
    report = runs.run([snoozed])
    assert [d.action for d in report.decisions] == [Action.NOTIFY]
    assert runs.remediator.marked == []
    assert runs.queued() == []


def test_a_finding_seen_all_day_is_told_once_then_in_the_digest() -> None:
    runs = Runs()
    finding = _finding(1, hourly=3.5)
    day = 24 * 60 // 5
    for n in range(day):  # every 5-minute sweep for 24 h
        runs.run([finding], NOW + n * SWEEP)
    [first] = runs.queued()
    assert isinstance(first, Notice)
    report = runs.run([finding], NOW + day * SWEEP)  # the first sweep a day later
    sent = runs.queued(1)
    [digest] = sent
    assert isinstance(digest, GroupNotice)
    assert digest.digest
    assert digest.count == 1
    assert digest.rows[0].decision.resource.key == finding.resource.key
    assert digest.hourly_total_usd == 3.5
    assert report.notices == []
    assert [n.decision.resource.key for n in report.digest] == [finding.resource.key]
    runs.run([finding], NOW + (day + 1) * SWEEP)
    assert len(runs.queued(1)) == 1  # not in the digest again at the next sweep


def test_a_group_notice_round_trips_through_the_queue_body() -> None:
    runs = Runs()
    runs.run(
        [_finding(n, hourly=float(n), tags={"owner": "alice@example.com"}) for n in range(5)]
        + [_finding(9, remediable=True)]
    )
    [sent] = runs.queued()
    assert isinstance(sent, GroupNotice)
    back = parse_notice(sent.model_dump_json())
    assert isinstance(back, GroupNotice)
    assert back == sent
    assert back.id == sent.id
    assert [r.id for r in back.rows] == [r.id for r in sent.rows]


def test_a_digest_group_round_trips_and_a_notice_stays_a_notice() -> None:
    runs = Runs()
    finding = _finding(1)
    for hours in range(0, 25, 3):  # seen every 3 h (inside the 4 h window) for a day
        runs.run([finding], NOW + timedelta(hours=hours))
    first, digest = runs.queued()
    assert isinstance(digest, GroupNotice) and digest.digest
    assert parse_notice(digest.model_dump_json()) == digest
    assert isinstance(first, Notice)
    assert parse_notice(first.model_dump_json()) == first


def test_a_group_of_rows_with_huge_names_still_fits_one_sqs_message() -> None:
    from costguard.notify.notice import MAX_GROUP_BYTES, group

    notices = [_notice_named(n, "x" * 20_000) for n in range(30)]
    made = group(notices, routing_tag_key="team")
    assert made.count == 30 and 1 <= len(made.rows) < 30
    assert len(made.model_dump_json().encode()) <= MAX_GROUP_BYTES


def _notice_named(n: int, name: str) -> Notice:
    from costguard.act.executor import Outcome
    from costguard.model import Decision

    finding = _finding(n)
    finding = finding.model_copy(update={"resource": finding.resource.model_copy(update={"name": name})})
    decision = Decision(
        action=Action.NOTIFY, reason=finding.reason, finding=finding, dry_run=True, note="n", decided_at=NOW
    )
    return Notice(decision=decision, outcome=Outcome(done=False, detail="no change"))
