"""Policy: findings to decisions (mode, protect tag, owner, grace period and the cap on stops)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard.model import MARK_TAG_KEY, Action, Finding, Reason, Resource, ResourceKind
from costguard.policy import Policy, decide, decide_all, is_protected

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
GRACE = timedelta(minutes=30)
PROTECT = "costguard:protect"


def _resource(
    rid: str = "i-0123456789abcdef0", tags: dict[str, str] | None = None, stop_blocker: str | None = None
) -> Resource:
    return Resource(
        kind=ResourceKind.EC2_INSTANCE,
        id=rid,
        account="123456789012",
        region="us-east-1",
        instance_type="p4d.24xlarge",
        tags=tags or {},
        stop_blocker=stop_blocker,
    )


def _finding(
    *,
    remediable: bool = True,
    tags: dict[str, str] | None = None,
    stop_blocker: str | None = None,
    hourly_usd: float | None = 21.958,
    rid: str = "i-0123456789abcdef0",
) -> Finding:
    return Finding(
        reason=Reason.GPU_IDLE,
        resource=_resource(rid, tags, stop_blocker),
        summary="idle",
        observed_at=NOW,
        hourly_usd=hourly_usd,
        remediable=remediable,
    )


def _marked(minutes_ago: float) -> dict[str, str]:
    return {MARK_TAG_KEY: (NOW - timedelta(minutes=minutes_ago)).isoformat()}


def test_non_remediable_finding_is_only_notified() -> None:
    decision = decide(_finding(remediable=False), Policy(dry_run=False), NOW)
    assert decision.action is Action.NOTIFY
    assert decision.stop_after is None


def test_non_remediable_finding_is_only_notified_even_when_long_marked() -> None:
    decision = decide(_finding(remediable=False, tags=_marked(600)), Policy(dry_run=False), NOW)
    assert decision.action is Action.NOTIFY


@pytest.mark.parametrize("value", ["true", "TRUE", "yes", "1", "", "please", " True "])
def test_protect_tag_means_notify_only(value: str) -> None:
    decision = decide(_finding(tags={PROTECT: value}), Policy(dry_run=False), NOW)
    assert decision.action is Action.NOTIFY
    assert PROTECT in decision.note


@pytest.mark.parametrize("value", ["true", "anything"])
def test_protected_resource_is_never_stopped_even_when_marked_long_ago(value: str) -> None:
    tags = {PROTECT: value, **_marked(24 * 60)}
    decision = decide(_finding(tags=tags), Policy(dry_run=False, grace=GRACE), NOW)
    assert decision.action is Action.NOTIFY
    assert decision.action is not Action.STOP


@pytest.mark.parametrize("value", ["false", "False", "no", "0", "off", " OFF "])
def test_protect_value_that_says_no_does_not_protect(value: str) -> None:
    assert is_protected({PROTECT: value}, PROTECT) is False
    decision = decide(_finding(tags={PROTECT: value}), Policy(grace=GRACE), NOW)
    assert decision.action is Action.MARK


def test_protect_tag_key_comes_from_the_policy() -> None:
    tags = {"keep-me": "true"}
    assert decide(_finding(tags=tags), Policy(), NOW).action is Action.MARK
    assert decide(_finding(tags=tags), Policy(protect_tag_key="keep-me"), NOW).action is Action.NOTIFY


def test_managed_resource_is_only_notified() -> None:
    decision = decide(
        _finding(stop_blocker="asg/training-fleet", tags=_marked(600)), Policy(dry_run=False), NOW
    )
    assert decision.action is Action.NOTIFY
    assert "asg/training-fleet" in decision.note


def test_unmarked_remediable_resource_is_marked_with_stop_after_the_grace() -> None:
    decision = decide(_finding(), Policy(grace=GRACE), NOW)
    assert decision.action is Action.MARK
    assert decision.stop_after == NOW + GRACE
    assert decision.decided_at == NOW


def test_unreadable_mark_restarts_the_grace_period() -> None:
    decision = decide(_finding(tags={MARK_TAG_KEY: "sometime"}), Policy(grace=GRACE), NOW)
    assert decision.action is Action.MARK
    assert decision.stop_after == NOW + GRACE


def test_marked_within_the_grace_period_does_nothing_yet() -> None:
    decision = decide(_finding(tags=_marked(10)), Policy(grace=GRACE), NOW)
    assert decision.action is Action.NONE
    assert decision.stop_after == NOW - timedelta(minutes=10) + GRACE


def test_marked_after_the_grace_period_is_stopped() -> None:
    decision = decide(_finding(tags=_marked(31)), Policy(grace=GRACE), NOW)
    assert decision.action is Action.STOP
    assert decision.stop_after == NOW - timedelta(minutes=31) + GRACE


@pytest.mark.parametrize("dry_run", [True, False])
@pytest.mark.parametrize(
    "finding",
    [
        _finding(remediable=False),
        _finding(tags={PROTECT: "true"}),
        _finding(stop_blocker="asg/x"),
        _finding(),
        _finding(tags=_marked(10)),
        _finding(tags=_marked(31)),
    ],
    ids=["not-remediable", "protected", "managed", "mark", "none", "stop"],
)
def test_dry_run_is_copied_from_the_policy(finding: Finding, dry_run: bool) -> None:
    decision = decide(finding, Policy(dry_run=dry_run, grace=GRACE), NOW)
    assert decision.dry_run is dry_run


def test_every_decision_from_decide_all_carries_the_policy_dry_run() -> None:
    findings = [_finding(tags=_marked(31), rid=f"i-{n}") for n in range(3)] + [_finding(remediable=False)]
    for dry_run in (True, False):
        decisions = decide_all(findings, Policy(dry_run=dry_run, grace=GRACE, max_stops=1), NOW)
        assert [d.dry_run for d in decisions] == [dry_run] * len(findings)


def test_stop_cap_keeps_the_costliest_stops_and_notifies_the_rest() -> None:
    prices = {"i-cheap": 0.526, "i-priciest": 55.04, "i-unknown": None, "i-middle": 21.958}
    findings = [_finding(tags=_marked(60), rid=rid, hourly_usd=usd) for rid, usd in prices.items()]
    decisions = decide_all(findings, Policy(dry_run=False, grace=GRACE, max_stops=2), NOW)

    assert [d.resource.id for d in decisions] == list(prices)  # order kept
    actions = {d.resource.id: d.action for d in decisions}
    assert actions == {
        "i-priciest": Action.STOP,
        "i-middle": Action.STOP,
        "i-cheap": Action.NOTIFY,
        "i-unknown": Action.NOTIFY,
    }
    for decision in decisions:
        if decision.action is Action.NOTIFY:
            assert "cap" in decision.note
            assert "2" in decision.note
            assert decision.reason is Reason.GPU_IDLE
        else:
            assert "cap" not in decision.note


def test_stop_cap_leaves_other_actions_alone() -> None:
    findings = [
        _finding(tags=_marked(60), rid="i-stop", hourly_usd=1.0),
        _finding(rid="i-mark", hourly_usd=99.0),
        _finding(tags=_marked(5), rid="i-wait", hourly_usd=99.0),
    ]
    decisions = decide_all(findings, Policy(grace=GRACE, max_stops=0), NOW)
    assert [d.action for d in decisions] == [Action.NOTIFY, Action.MARK, Action.NONE]


def test_stops_under_the_cap_are_all_kept() -> None:
    findings = [_finding(tags=_marked(60), rid=f"i-{n}") for n in range(3)]
    decisions = decide_all(findings, Policy(grace=GRACE, max_stops=5), NOW)
    assert [d.action for d in decisions] == [Action.STOP] * 3
