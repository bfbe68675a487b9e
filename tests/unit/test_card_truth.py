"""What a Slack message says is so: group totals count each resource once, budget alerts and anomalies are never
rows of a group, a card states the verdict as it is now with its figures labelled, and a button is there only
where its action can be done."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.act.executor import Outcome
from costguard.detect.budgets import Running, anomaly_finding
from costguard.events.budgets import Anomaly
from costguard.model import MARK_TAG_KEY, Action, Decision, Finding, Reason, Resource, ResourceKind
from costguard.notify import notice as notice_module
from costguard.notify.conversation import Conversation, destination_id
from costguard.notify.group_message import build_group_message
from costguard.notify.message import KEEP, MUTE, PROTECT, STOP_NOW, actions_for, build_message
from costguard.notify.notice import (
    ROWS_CARRIED,
    GroupNotice,
    Notice,
    by_route,
    group,
    merged_totals,
    totals_without,
)
from costguard.notify.planning import plan
from costguard.policy import SNOOZE_TAG_KEY

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
ACCOUNT, REGION = "123456789012", "us-east-1"
USER = "U0123ABCDEF"


def _resource(
    rid: str,
    *,
    kind: ResourceKind = ResourceKind.EC2_INSTANCE,
    instance_type: str | None = "p4d.24xlarge",
    count: int = 1,
    tags: dict[str, str] | None = None,
    name: str | None = None,
) -> Resource:
    return Resource(
        kind=kind,
        id=rid,
        account=ACCOUNT,
        region=REGION,
        name=name,
        instance_type=instance_type,
        instance_count=count,
        tags={"team": "ml", **(tags or {})},
    )


def _notice(
    resource: Resource,
    *,
    reason: Reason = Reason.GPU_IDLE,
    hourly: float | None = 1.0,
    action: Action = Action.NOTIFY,
    dry_run: bool = False,
    remediable: bool = True,
    outcome: Outcome | None = None,
    evidence: dict[str, Any] | None = None,
    report_note: str | None = None,
    actor: str | None = None,
    thread: str | None = None,
    summary: str = "found",
) -> Notice:
    finding = Finding(
        reason=reason,
        resource=resource,
        summary=summary,
        observed_at=NOW,
        hourly_usd=hourly,
        remediable=remediable,
        evidence=evidence or {},
        report_note=report_note,
        thread=thread,
    )
    decision = Decision(
        action=action,
        reason=reason,
        finding=finding,
        dry_run=dry_run,
        note=report_note or "n",
        decided_at=NOW,
    )
    return Notice(decision=decision, outcome=outcome or Outcome(done=False, detail="no change"), actor=actor)


def _everything(message: dict[str, Any]) -> str:
    return json.dumps(message)


def _distinct_total(rows: list[Notice]) -> float:
    rates: dict[str, float] = {}
    for row in rows:
        resource = row.decision.resource
        if resource.kind.has_own_rate and row.decision.hourly_usd is not None:
            rates[resource.key] = row.decision.hourly_usd
    return round(sum(rates.values()), 2)


# -- group totals: each resource once ------------------------------------------------------------------------


def test_a_resource_with_two_findings_counts_once_at_its_own_price() -> None:
    """The demo's "$20.97/h" was a job counted twice beside a spot instance: $13.32 is true."""
    job = _resource("gpt-eval-sweep", kind=ResourceKind.TRAINING_JOB, instance_type="ml.p3.2xlarge", count=2)
    notices = [
        _notice(job, reason=Reason.JOB_COST_CEILING, hourly=7.65),
        _notice(job, reason=Reason.SPOT_RECOMMENDED, hourly=7.65),
        _notice(_resource("j-2", kind=ResourceKind.TRAINING_JOB), reason=Reason.JOB_STALLED, hourly=5.67),
    ]
    grouped = group(notices, routing_tag_key="team")
    assert (grouped.count, grouped.resource_count, grouped.hourly_total_usd) == (3, 2, 13.32)
    summary = build_group_message(grouped)["blocks"][1]["text"]["text"]
    assert summary.startswith("*3 findings* on 2 training jobs costing *$13.32/h* together")
    assert "$20.97" not in summary


def test_a_group_larger_than_the_rows_it_carries_still_counts_each_resource_once() -> None:
    resources = [_resource(f"i-{n:017x}") for n in range(150)]
    notices = [
        _notice(r, hourly=float(n + 1), reason=reason)
        for n, r in enumerate(resources)
        for reason in (
            Reason.GPU_IDLE,
            Reason.GPU_METRICS_MISSING,
        )
    ]
    grouped = group(notices, routing_tag_key="team")
    assert len(grouped.rows) == ROWS_CARRIED < grouped.count == 300
    assert grouped.resource_count == 150
    assert grouped.hourly_total_usd == sum(range(1, 151))


def test_groups_merged_by_the_notifier_count_a_shared_resource_once() -> None:
    """Two producers' groups (beyond the rows they carry) with 100 resources in common, and loose notices."""
    first = group(
        [_notice(_resource(f"i-{n:017x}"), hourly=2.0) for n in range(0, 200)], routing_tag_key="team"
    )
    second = group(
        [_notice(_resource(f"i-{n:017x}"), hourly=2.0, reason=Reason.GPU_STARVED) for n in range(100, 300)],
        routing_tag_key="team",
    )
    loose = [
        _notice(_resource(f"i-{n:017x}"), hourly=2.0, reason=Reason.GPU_METRICS_MISSING) for n in (5, 400)
    ]
    items: list[tuple[str, Notice | GroupNotice]] = [
        ("g1", first),
        ("g2", second),
        ("a", loose[0]),
        ("b", loose[1]),
    ]
    posts, _ = plan(items, {}, threads=True)
    [post] = posts
    assert post.group is not None
    assert post.group.count == 402
    assert post.group.resource_count == 301  # 0..299 and 400
    assert post.group.hourly_total_usd == 602.0


def test_totals_stay_exact_beyond_the_resources_a_group_tallies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_TALLIED a group keeps the rest of its total as a sum: merged and split, it still adds up."""
    monkeypatch.setattr(notice_module, "MAX_TALLIED", 5)
    first = group(
        [_notice(_resource(f"i-{n}"), hourly=float(n)) for n in range(1, 9)], routing_tag_key="team"
    )
    assert len(first.resources) == 5 and first.resource_count == 8 and first.hourly_total_usd == 36.0
    second = group(
        [_notice(_resource(f"i-{n}"), hourly=float(n), reason=Reason.GPU_STARVED) for n in range(6, 11)],
        routing_tag_key="team",
    )
    merged = GroupNotice(rows=[], count=13, by_reason={}, **merged_totals([first, second]))
    assert (merged.resource_count, merged.hourly_total_usd) == (10, 55.0)  # 1..10, each once
    less = totals_without(
        first, [_notice(_resource("i-2"), hourly=2.0), _notice(_resource("i-8"), hourly=8.0)]
    )
    assert (less["resource_count"], less["hourly_total_usd"]) == (6, 26.0)


def _conversation(notice: Notice, *, ts: str | None, told: tuple[str, ...] = ()) -> Conversation:
    return Conversation(
        key=notice.decision.finding.conversation,
        destination=destination_id("C0123456789"),
        channel="C0123456789" if ts else None,
        ts=ts,
        told=told,
    )


def test_a_resource_counts_in_what_is_left_of_a_group_until_its_last_row_is_taken_out() -> None:
    resource = _resource("i-0a")
    idle = _notice(resource, reason=Reason.GPU_IDLE, hourly=21.96)
    spot = _notice(resource, reason=Reason.SPOT_RECOMMENDED, hourly=21.96)
    others = [_notice(_resource(f"i-{n}"), hourly=1.0) for n in range(4)]
    produced = group([idle, spot, *others], routing_tag_key="team")
    assert produced.hourly_total_usd == 25.96
    # A webhook (no threads): the spot advice was told already, the idle row is still news.
    told_once = _conversation(idle, ts=None, told=(spot.id,))
    posts, _ = plan([("g", produced)], {told_once.key: told_once}, threads=False)
    [rest] = [p.group for p in posts if p.kind == "group"]
    assert rest is not None and (rest.count, rest.resource_count, rest.hourly_total_usd) == (5, 5, 25.96)
    # A Slack app with the resource's thread open: both rows are replies there, and it leaves the total.
    open_thread = _conversation(idle, ts="1700000000.000100", told=(spot.id,))
    posts, _ = plan([("g", produced)], {open_thread.key: open_thread}, threads=True)
    [rest] = [p.group for p in posts if p.kind == "group"]
    assert rest is not None and (rest.count, rest.resource_count, rest.hourly_total_usd) == (4, 4, 4.0)


def test_a_budget_or_family_figure_is_never_summed_into_an_hourly_total() -> None:
    families = [
        _notice(
            _resource(f"fam-{n}", kind=ResourceKind.JOB_FAMILY, instance_type=None),
            hourly=40.0,
            reason=Reason.JOB_FAILURE_LOOP,
        )
        for n in range(4)
    ]
    grouped = group(families, routing_tag_key="team")
    assert grouped.hourly_total_usd == 0.0 and grouped.resource_count == 0
    message = build_group_message(grouped)
    assert not re.search(r"\$[0-9,.]+/h", _everything(message)), _everything(message)


# -- budget alerts and anomalies: their own messages ---------------------------------------------------------


def _budget_alert(alert_type: str, threshold: int, percent: float) -> Notice:
    budget = Resource(
        kind=ResourceKind.BUDGET,
        id=f"ml-research-gpu/{alert_type}>{threshold}",
        name="ml-research-gpu",
        account=ACCOUNT,
        region=REGION,
    )
    return _notice(
        budget,
        reason=Reason.BUDGET_BREACH,
        hourly=46.73,
        remediable=False,
        evidence={"alert_type": alert_type, "percent_of_budget": percent, "ranked": []},
        report_note="reported only: this level stops nothing",
        thread=f"{ACCOUNT}/global/budget/ml-research-gpu",
        summary="Budget ml-research-gpu. Running GPU and accelerator resources in scope, costliest first:\n"
        "1. $21.96/h ec2_instance research-p4d-forgotten [p4d.24xlarge x 1] idle\nWhat this level did:\n- x",
    )


FOUR_ALERTS = [
    _budget_alert("FORECASTED", 5000, 124.8),
    _budget_alert("ACTUAL", 4000, 81.6),
    _budget_alert("ACTUAL", 5000, 102.4),
    _budget_alert("ACTUAL", 7500, 153.0),
]


def test_four_alerts_on_one_budget_are_four_messages_never_a_group() -> None:
    idle = _notice(_resource("i-0a"), hourly=21.96)
    queued = by_route([*FOUR_ALERTS, idle], routing_tag_key="team")
    assert queued == [*FOUR_ALERTS, idle]
    posts, told = plan([(f"m{n}", n_) for n, n_ in enumerate(queued)], {}, threads=True, above=3)
    assert told == []
    assert [p.kind for p in posts] == ["opener"] * 5
    assert {p.notices[0].decision.finding.conversation for p in posts[:4]} == {
        f"{ACCOUNT}/global/budget/ml-research-gpu"
    }


def test_an_alert_on_an_open_budget_thread_is_a_reply_there() -> None:
    thread = Conversation(
        key=f"{ACCOUNT}/global/budget/ml-research-gpu",
        destination=destination_id("C0123456789"),
        channel="C0123456789",
        ts="1700000000.000100",
    )
    items: list[tuple[str, Notice | GroupNotice]] = [(f"m{n}", a) for n, a in enumerate(FOUR_ALERTS)]
    posts, _ = plan(items, {thread.key: thread}, threads=True, above=3)
    assert [p.kind for p in posts] == ["reply"] * 4


def test_a_group_queued_with_budget_rows_and_mixed_kinds_is_told_apart_again() -> None:
    """A group queued before groups were made per kind: its budget rows go out on their own, its kinds apart."""
    instances = [_notice(_resource(f"i-{n}"), hourly=1.0) for n in range(4)]
    jobs = [_notice(_resource(f"j-{n}", kind=ResourceKind.TRAINING_JOB), hourly=2.0) for n in range(2)]
    mixed = group([*FOUR_ALERTS, *instances, *jobs], routing_tag_key="team")
    posts, _ = plan([("g", mixed)], {}, threads=True, above=3)
    groups = [p.group for p in posts if p.group is not None]
    assert sorted(g.count for g in groups) == [2, 4]
    for grouped in groups:
        assert len({r.decision.resource.kind for r in grouped.rows}) == 1
        assert not any(r.decision.resource.kind is ResourceKind.BUDGET for r in grouped.rows)
    assert sum(p.kind == "opener" for p in posts) == 4


def test_a_group_mixes_no_resource_kinds() -> None:
    notices = [
        *[_notice(_resource(f"i-{n}"), hourly=1.0) for n in range(3)],
        *[_notice(_resource(f"j-{n}", kind=ResourceKind.TRAINING_JOB), hourly=2.0) for n in range(2)],
        _notice(_resource("nb", kind=ResourceKind.NOTEBOOK), hourly=1.41, reason=Reason.NOTEBOOK_IDLE),
    ]
    queued = by_route(notices, routing_tag_key="team")
    groups = [q for q in queued if isinstance(q, GroupNotice)]
    assert sorted((g.rows[0].decision.resource.kind.value, g.count) for g in groups) == [
        ("ec2_instance", 3),
        ("training_job", 2),
    ]
    assert [q.decision.resource.id for q in queued if isinstance(q, Notice)] == ["nb"]  # alone of its kind
    assert "on 3 EC2 instances costing *$3.00/h*" in _everything(build_group_message(groups[0]))


def test_a_forecast_is_not_titled_a_breach_and_the_card_lists_what_runs_once() -> None:
    forecast, actual = FOUR_ALERTS[0], FOUR_ALERTS[2]
    header = build_message(forecast)["blocks"][0]["text"]["text"]
    assert "breached" not in header.lower() and "forecast" in header.lower()
    assert "Budget breached" in build_message(actual)["blocks"][0]["text"]["text"]
    everything = _everything(build_message(forecast))
    assert (
        everything.count("research-p4d-forgotten") == 1 and "Running now, costliest first" not in everything
    )
    assert "Cost per hour" not in everything  # $46.73/h runs in its scope: not the budget's own cost


# -- what a card says ----------------------------------------------------------------------------------------


def test_a_protected_busy_instance_is_told_as_protected_not_as_idle() -> None:
    """After a Protect click on a busy instance: the card says what was done, not "Idle GPU instance"."""
    busy = _resource(
        "i-0a1f00000000000a2", name="research-p4d-one-busy-gpu", tags={"costguard:protect": "true"}
    )
    note = "protected: costguard will never stop it (tag costguard:protect=true)"
    notice = _notice(busy, hourly=21.96, report_note=note, actor=USER, summary="Protect asked in Slack")
    message = build_message(notice, interactive=True)
    header = message["blocks"][0]["text"]["text"]
    assert header == "costguard: EC2 instance protected"
    everything = _everything(message)
    assert "Asked from its message about: Idle GPU instance." in everything
    assert f"<@{USER}>" in everything
    assert [e["action_id"] for e in actions_for(notice).to_dict()["elements"]] == [MUTE]  # type: ignore[union-attr]
    row = build_group_message(group([notice, _notice(_resource("i-1"))], routing_tag_key="team"))
    assert "Protected (asked from: Idle GPU instance)" in _everything(row)


def test_a_mute_click_says_muted_and_a_keep_click_says_kept_running() -> None:
    resource = _resource("i-0a")
    muted = _notice(resource, report_note="gpu_idle muted until 2026-11-21 12:00 UTC", actor=USER)
    kept = _notice(resource, report_note="kept running until 2026-11-20 16:00 UTC", actor=USER)
    assert build_message(muted)["blocks"][0]["text"]["text"] == "costguard: Muted: Idle GPU instance"
    assert build_message(kept)["blocks"][0]["text"]["text"] == "costguard: EC2 instance kept running"
    decided = _notice(resource)  # costguard's own finding: its verdict
    assert build_message(decided)["blocks"][0]["text"]["text"] == "costguard: Idle GPU instance"


def _running(
    rid: str, instance_type: str, hourly: float, kind: ResourceKind = ResourceKind.EC2_INSTANCE
) -> Running:
    return Running(_resource(rid, kind=kind, instance_type=instance_type), hourly, "busy")


def _anomaly_finding(anomaly: Anomaly, fleet: list[Running]) -> Finding:
    return anomaly_finding(
        anomaly,
        fleet,
        account=ACCOUNT,
        region=REGION,
        now=NOW,
        event_id="e",
        protect_tag_key="costguard:protect",
    )


def test_an_anomaly_lists_only_what_its_root_causes_name_each_once() -> None:
    anomaly = Anomaly.model_validate(
        {
            "anomalyId": "a1",
            "dimensionValue": "Amazon Elastic Compute Cloud - Compute",
            "impact": {"totalImpact": 1054.39, "totalExpectedSpend": 620.0, "totalActualSpend": 1674.39},
            "rootCauses": [
                {
                    "service": "Amazon Elastic Compute Cloud - Compute",
                    "region": REGION,
                    "linkedAccount": ACCOUNT,
                    "usageType": "BoxUsage:p4d.24xlarge",
                }
            ],
        }
    )
    fleet = [
        _running("i-p5", "p5.48xlarge", 55.04),
        _running("i-p4d-1", "p4d.24xlarge", 21.96),
        _running("i-g5", "g5.12xlarge", 5.67),
        _running("i-p4d-2", "p4d.24xlarge", 21.96),
        _running("i-p4d-1", "p4d.24xlarge", 21.96),  # read twice
        _running("job-p4d", "ml.p4d.24xlarge", 75.38, ResourceKind.TRAINING_JOB),
    ]
    finding = _anomaly_finding(anomaly, fleet)
    assert [r["id"] for r in finding.evidence["ranked"]] == ["i-p4d-1", "i-p4d-2"]
    decision = Decision(
        action=Action.NOTIFY, reason=finding.reason, finding=finding, dry_run=True, decided_at=NOW
    )
    message = build_message(Notice(decision=decision, outcome=Outcome(done=False, detail="")))
    everything = _everything(message)
    assert everything.count("i-p4d-1") == 1 and "i-p5" not in everything and "i-g5" not in everything
    assert "Cost per hour" not in everything and "*Impact*\\n$1,054.39" in everything
    assert message["text"].endswith(": $1,054.39 impact")


def test_a_sagemaker_anomaly_lists_the_kind_its_usage_runs_on() -> None:
    anomaly = Anomaly.model_validate(
        {
            "anomalyId": "a2",
            "rootCauses": [
                {"service": "Amazon SageMaker", "region": REGION, "usageType": "USE1-Notebk:ml.g5.xlarge"},
                {"service": "Amazon SageMaker", "region": REGION, "usageType": "USE1-Train:ml.p4d.24xlarge"},
            ],
        }
    )
    fleet = [
        _running("nb", "ml.g5.xlarge", 1.41, ResourceKind.NOTEBOOK),
        _running("ep", "ml.g5.xlarge", 1.41, ResourceKind.ENDPOINT),
        _running("job-p4d", "ml.p4d.24xlarge", 75.38, ResourceKind.TRAINING_JOB),
        _running("job-g5", "ml.g5.xlarge", 1.41, ResourceKind.TRAINING_JOB),
    ]
    finding = _anomaly_finding(anomaly, fleet)
    assert [r["id"] for r in finding.evidence["ranked"]] == ["job-p4d", "nb"]


def test_a_training_card_says_which_price_is_per_instance() -> None:
    job = _resource("llama-ft", kind=ResourceKind.TRAINING_JOB, instance_type="ml.p3.2xlarge", count=2)
    notice = _notice(
        job,
        reason=Reason.TRAINING_JOB_FAILED,
        hourly=7.65,
        remediable=False,
        evidence={"price_usd_per_hour": 3.825},
    )
    everything = _everything(build_message(notice))
    assert "*Cost per hour (2 instances)*\\n$7.65/h" in everything
    assert "Price per instance-hour: $3.83" in everything
    assert "Price per hour" not in everything


# -- buttons only where they work ----------------------------------------------------------------------------


def _actions(notice: Notice) -> list[str]:
    block = actions_for(notice)
    assert block is not None
    return [e["action_id"] for e in block.to_dict()["elements"]]


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        (Reason.TRAINING_JOB_FAILED, ResourceKind.TRAINING_JOB),
        (Reason.SPOT_INTERRUPTION, ResourceKind.EC2_INSTANCE),
        (Reason.GPU_STARVED, ResourceKind.EC2_INSTANCE),
        (Reason.CHECKPOINT_STALE, ResourceKind.TRAINING_JOB),
    ],
)
def test_what_costguard_never_stops_gets_no_stop_now(reason: Reason, kind: ResourceKind) -> None:
    resource = _resource("r-1", kind=kind, tags={MARK_TAG_KEY: NOW.isoformat()})
    notice = _notice(resource, reason=reason, remediable=False)
    assert _actions(notice) == [MUTE]


def test_notify_mode_offers_keep_and_protect_but_no_stop_now_and_says_why() -> None:
    notice = _notice(
        _resource("i-1"), action=Action.MARK, dry_run=True, outcome=Outcome(done=False, detail="dry")
    )
    assert _actions(notice) == [KEEP, PROTECT, MUTE]
    everything = _everything(build_message(notice, interactive=True))
    assert (
        "Would mark for stop (dry run)" in everything and "Notify mode: costguard stops nothing" in everything
    )


def test_stop_now_only_on_what_costguard_has_marked() -> None:
    unmarked = _notice(_resource("i-1"))
    marked_now = _notice(_resource("i-2"), action=Action.MARK, outcome=Outcome(done=True, detail="marked"))
    marked_before = _notice(_resource("i-3", tags={MARK_TAG_KEY: (NOW - timedelta(minutes=5)).isoformat()}))
    snoozed = _notice(
        _resource(
            "i-4",
            tags={
                MARK_TAG_KEY: (NOW - timedelta(minutes=5)).isoformat(),
                SNOOZE_TAG_KEY: (NOW + timedelta(hours=4)).isoformat(),
            },
        )
    )
    assert _actions(unmarked) == [KEEP, PROTECT, MUTE]
    assert _actions(marked_now) == [KEEP, STOP_NOW, PROTECT, MUTE]
    assert _actions(marked_before) == [KEEP, STOP_NOW, PROTECT, MUTE]
    assert _actions(snoozed) == [KEEP, PROTECT, MUTE]


def test_mute_stays_on_budgets_anomalies_and_capacity_reservations() -> None:
    reservation = _resource("cr-1", kind=ResourceKind.CAPACITY_RESERVATION)
    assert _actions(_notice(reservation, reason=Reason.CAPACITY_RESERVATION_IDLE)) == [MUTE]
    assert _actions(FOUR_ALERTS[0]) == [MUTE]
