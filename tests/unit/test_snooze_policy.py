"""The snooze tag (costguard:snooze-until, set by Slack's keep button): kept like a protected resource until its
time, judged normally after; an unreadable value is ignored. And "Stop now": the policy's rules, grace skipped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from costguard.model import MARK_TAG_KEY, Action, Finding, Reason, Resource, ResourceKind
from costguard.policy import (
    SNOOZE_TAG_KEY,
    Policy,
    decide,
    decide_all,
    decide_requested_stop,
    snoozed_until,
    stop_candidates,
)

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
POLICY = Policy(dry_run=False, grace=timedelta(minutes=30))
MARKED_LONG_AGO = {MARK_TAG_KEY: (NOW - timedelta(hours=2)).isoformat()}


def _finding(tags: dict[str, str], stop_blocker: str | None = None) -> Finding:
    return Finding(
        reason=Reason.GPU_IDLE,
        resource=Resource(
            kind=ResourceKind.EC2_INSTANCE,
            id="i-0a1f00000000000d1",
            account="123456789012",
            region="us-east-1",
            tags=tags,
            stop_blocker=stop_blocker,
        ),
        summary="idle",
        observed_at=NOW,
        hourly_usd=10.0,
        remediable=True,
    )


def test_a_snoozed_resource_is_neither_marked_nor_stopped_and_says_until_when() -> None:
    until = {SNOOZE_TAG_KEY: "2026-11-21T12:00:00+00:00"}
    unmarked = decide(_finding(until), POLICY, NOW)
    assert unmarked.action is Action.NOTIFY
    assert unmarked.note == "kept running until 2026-11-21 12:00 UTC (snoozed)"
    overdue = decide(_finding(until | MARKED_LONG_AGO), POLICY, NOW)
    assert overdue.action is Action.NOTIFY
    assert stop_candidates([_finding(until | MARKED_LONG_AGO)], POLICY, NOW) == []


def test_once_the_snooze_has_ended_the_resource_is_judged_normally() -> None:
    ended = {SNOOZE_TAG_KEY: (NOW - timedelta(minutes=1)).isoformat()}
    assert decide(_finding(ended), POLICY, NOW).action is Action.MARK
    assert decide(_finding(ended | MARKED_LONG_AGO), POLICY, NOW).action is Action.STOP
    # the moment it ends counts as ended
    assert snoozed_until({SNOOZE_TAG_KEY: NOW.isoformat()}, NOW) is None


def test_an_unreadable_snooze_is_ignored() -> None:
    for value in ("tomorrow", "2026-13-45T99:00:00Z", ""):
        assert snoozed_until({SNOOZE_TAG_KEY: value}, NOW) is None
        assert decide(_finding({SNOOZE_TAG_KEY: value} | MARKED_LONG_AGO), POLICY, NOW).action is Action.STOP


def test_a_snooze_does_not_hide_a_protect_tag_and_counts_against_no_cap() -> None:
    both = {SNOOZE_TAG_KEY: "2026-11-21T12:00:00+00:00", "costguard:protect": "true"}
    assert "protected" in decide(_finding(both), POLICY, NOW).note
    snoozed = _finding({SNOOZE_TAG_KEY: "2026-11-21T12:00:00Z"} | MARKED_LONG_AGO)
    other = _finding(MARKED_LONG_AGO).model_copy(
        update={"resource": _finding(MARKED_LONG_AGO).resource.model_copy(update={"id": "i-other"})}
    )
    decisions = decide_all([snoozed, other], Policy(dry_run=False, max_stops=1), NOW)
    assert [d.action for d in decisions] == [Action.NOTIFY, Action.STOP]


def test_stop_now_skips_the_grace_period_of_a_marked_resource_only() -> None:
    in_grace = {MARK_TAG_KEY: (NOW - timedelta(minutes=1)).isoformat()}
    decision = decide_requested_stop(_finding(in_grace), POLICY, NOW)
    assert decision.action is Action.STOP
    assert decide(_finding(in_grace), POLICY, NOW).action is Action.NONE  # the sweep would still wait
    unmarked = decide_requested_stop(_finding({}), POLICY, NOW)
    assert unmarked.action is Action.NOTIFY and "not marked" in unmarked.note


def test_stop_now_is_refused_for_protected_snoozed_and_blocked_resources() -> None:
    protected = decide_requested_stop(_finding(MARKED_LONG_AGO | {"costguard:protect": "yes"}), POLICY, NOW)
    snoozed = decide_requested_stop(
        _finding(MARKED_LONG_AGO | {SNOOZE_TAG_KEY: "2026-11-20T14:00:00Z"}), POLICY, NOW
    )
    blocked = decide_requested_stop(_finding(MARKED_LONG_AGO, stop_blocker="a spot instance"), POLICY, NOW)
    assert [d.action for d in (protected, snoozed, blocked)] == [Action.NOTIFY] * 3
    assert "protected" in protected.note
    assert "2026-11-20 14:00 UTC (snoozed)" in snoozed.note
    assert "a spot instance" in blocked.note
