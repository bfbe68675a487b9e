"""Remediation widened one reason and one team at a time: ReasonModes and RemediateScope, read and validated at
start-up, and honoured by every decision (the policy, the pipeline's shadow marks and cap, a Stop now click)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from costguard.act.shadow import DynamoShadowMarks, MemoryShadowMarks, key_of, overlay
from costguard.interact.actions import carry_out
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
from costguard.notify.queue import MemoryNoticeQueue
from costguard.notify.values import action_value
from costguard.pipeline import Report, act_on
from costguard.policy import (
    Policy,
    PolicyError,
    decide,
    decide_all,
    decide_requested_stop,
    parse_reason_modes,
    parse_scope,
    policy_from,
    reasons_of,
)
from costguard.runtime import _shadow_marks
from costguard.settings import SettingsError, parse_settings
from tests.unit.test_interact_actions import KEY, Record, _click, _deps, world  # noqa: F401  (world: a fixture)
from tests.unit.test_shadow_marks import Tagging

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
GRACE = timedelta(minutes=15)
LONG_AGO = {MARK_TAG_KEY: (NOW - timedelta(hours=1)).isoformat()}
RESEARCH = {"team": "research"}
VISION = {"team": "vision"}


def finding(
    reason: Reason = Reason.GPU_IDLE,
    *,
    kind: ResourceKind = ResourceKind.EC2_INSTANCE,
    tags: dict[str, str] | None = None,
    rid: str = "i-1",
    hourly: float = 1.0,
    **extra: Any,
) -> Finding:
    resource = Resource(kind=kind, id=rid, account="123456789012", region="us-east-1", tags=tags or {})
    return Finding(
        reason=reason,
        resource=resource,
        summary="s",
        observed_at=NOW,
        hourly_usd=hourly,
        remediable=extra.pop("remediable", True),
        **extra,
    )


def policy(mode: str = "notify", modes: str = "", scope: str = "", **rest: Any) -> Policy:
    return Policy(
        dry_run=mode == "notify",
        grace=GRACE,
        modes=parse_reason_modes(modes),
        scope=parse_scope(scope),
        **rest,
    )


# -- reading the settings ------------------------------------------------------------------------------------


def test_reason_modes_read_each_reason_and_its_mode() -> None:
    modes = parse_reason_modes(" gpu_idle = remediate, job_stalled=REMEDIATE,notebook_idle=notify ,")
    assert modes == {Reason.GPU_IDLE: False, Reason.JOB_STALLED: False, Reason.NOTEBOOK_IDLE: True}
    assert parse_reason_modes("") == {}
    assert parse_reason_modes("gpu_idle=remediate,gpu_idle=remediate") == {Reason.GPU_IDLE: False}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("gpu_idel=remediate", "'gpu_idel' is not a reason code"),
        ("gpu_idle=stop", "the mode is notify or remediate"),
        ("gpu_idle", "each entry is <reason code>=<notify|remediate>"),
        ("=remediate", "each entry is"),
        ("gpu_idle=remediate,gpu_idle=notify", "gpu_idle is named twice"),
    ],
)
def test_a_bad_reason_mode_is_refused_saying_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(PolicyError, match=problem):
        parse_reason_modes(text)


def test_a_scope_reads_its_clauses_and_covers_what_they_all_allow() -> None:
    either = parse_scope("team=vision|nlp")
    assert either is not None and either.text == "team=vision|nlp"
    assert either.covers(VISION) and either.covers({"team": "nlp"})
    assert not either.covers(RESEARCH) and not either.covers({})  # no tag: outside `=`
    but = parse_scope("team != research , env=prod")
    assert but is not None and but.text == "team != research,env=prod"
    assert but.covers({"env": "prod"})  # no team tag: inside `!=`
    assert not but.covers({"team": "research", "env": "prod"}) and not but.covers(VISION)
    assert parse_scope("") is None and parse_scope(" , ") is None


@pytest.mark.parametrize("text", ["team", "team=", "=vision", "team=|", "team=a=b", "team!=", "!team=x"])
def test_a_bad_scope_is_refused(text: str) -> None:
    with pytest.raises(PolicyError, match="a clause is <tag key>="):
        parse_scope(text)


@pytest.mark.parametrize(
    ("name", "value", "variable"),
    [
        ("reason_modes", "gpu_idle=maybe", "COSTGUARD_REASON_MODES"),
        ("remediate_scope", "team", "COSTGUARD_REMEDIATE_SCOPE"),
    ],
)
def test_settings_fail_at_start_up_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, variable: str
) -> None:
    with pytest.raises(SettingsError, match=variable):
        parse_settings(**{name: value})
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match=variable):
        parse_settings()


def test_the_settings_make_the_policy_and_the_shadow_marks_exist_wherever_a_dry_run_can() -> None:
    plain = parse_settings(mode="remediate", state_table="t")
    assert not policy_from(plain).graded and _shadow_marks(plain) is None
    for settings in (
        parse_settings(mode="remediate", state_table="t", remediate_scope="team!=research"),
        parse_settings(mode="remediate", state_table="t", reason_modes="notebook_idle=notify"),
        parse_settings(mode="notify", state_table="t", reason_modes="gpu_idle=remediate"),
    ):
        assert isinstance(_shadow_marks(settings), DynamoShadowMarks)
    every = policy_from(parse_settings(mode="remediate", reason_modes="gpu_idle=remediate"))
    assert every.graded and not every.may_dry_run and every.may_act  # every reason acts: no shadow marks
    assert not policy_from(parse_settings(mode="notify", reason_modes="gpu_idle=notify")).may_act


# -- decisions -----------------------------------------------------------------------------------------------


def test_gpu_idle_in_remediate_with_the_rest_in_notify_marks_only_idle_instances() -> None:
    chosen = policy("notify", "gpu_idle=remediate")
    gpu = decide(finding(Reason.GPU_IDLE), chosen, NOW)
    assert (gpu.action, gpu.dry_run, gpu.held) == (Action.MARK, False, None)
    assert gpu.note.startswith("marked now")
    for reason, kind in (
        (Reason.NOTEBOOK_IDLE, ResourceKind.NOTEBOOK),
        (Reason.JOB_STALLED, ResourceKind.TRAINING_JOB),
    ):
        other = decide(finding(reason, kind=kind), chosen, NOW)
        assert (other.action, other.dry_run) == (Action.MARK, True)  # decided as notify mode decides it
        assert other.held == f"{reason.value} follows Mode (notify)"
        assert other.note.startswith(f"notify only: {reason.value} follows Mode (notify); marked now")


def test_a_reason_put_in_notify_in_remediate_mode_says_so() -> None:
    decision = decide(
        finding(Reason.NOTEBOOK_IDLE, kind=ResourceKind.NOTEBOOK, tags=LONG_AGO),
        policy("remediate", "notebook_idle=notify"),
        NOW,
    )
    assert (decision.action, decision.dry_run) == (Action.STOP, True)
    assert decision.note.startswith(
        "notify only: notebook_idle is in notify (ReasonModes); grace period over"
    )


def test_a_resource_outside_the_scope_is_reported_not_acted_on_and_says_why() -> None:
    chosen = policy("remediate", scope="team!=research")
    research = decide(finding(tags=RESEARCH), chosen, NOW)
    assert (research.action, research.dry_run) == (Action.MARK, True)
    assert research.held == "team=research is outside RemediateScope (team!=research)"
    assert research.note.startswith("notify only: team=research is outside RemediateScope (team!=research);")
    assert not decide(finding(tags=VISION), chosen, NOW).dry_run
    assert not decide(finding(), chosen, NOW).dry_run  # no team tag: not research
    only = decide(finding(), policy("remediate", scope="team=vision|nlp"), NOW)
    assert only.dry_run and only.held == "no team tag is outside RemediateScope (team=vision|nlp)"


def test_what_only_reports_says_what_it_said_before() -> None:
    chosen = policy("remediate", scope="team!=research")
    protected = decide(finding(tags={**RESEARCH, "costguard:protect": "true"}), chosen, NOW)
    assert protected.action is Action.NOTIFY and protected.note.startswith("protected by tag")
    starved = decide(finding(Reason.GPU_STARVED, tags=RESEARCH, remediable=False), chosen, NOW)
    assert starved.action is Action.NOTIFY and not starved.note.startswith("notify only")


def test_plain_modes_decide_as_before_with_no_note_added() -> None:
    for dry in (True, False):
        decision = decide(finding(tags=RESEARCH), Policy(dry_run=dry, grace=GRACE), NOW)
        assert decision.dry_run is dry and decision.held is None
        assert decision.note.startswith("marked now")


def test_a_budget_escalation_acts_only_where_budget_breach_and_the_kinds_own_reason_remediate() -> None:
    ec2 = finding(Reason.BUDGET_BREACH, tags=VISION)
    notebook = finding(Reason.BUDGET_BREACH, kind=ResourceKind.NOTEBOOK, tags=VISION, rid="nb")
    assert reasons_of(ec2) == (Reason.BUDGET_BREACH, Reason.GPU_IDLE)
    assert reasons_of(notebook) == (Reason.BUDGET_BREACH, Reason.NOTEBOOK_IDLE)
    summary = finding(Reason.BUDGET_BREACH, kind=ResourceKind.BUDGET, remediable=False)
    assert reasons_of(summary) == (Reason.BUDGET_BREACH,)

    chosen = policy("remediate", "notebook_idle=notify")
    assert not chosen.dry_run_for(ec2)
    assert chosen.held(notebook) == "notebook_idle is in notify (ReasonModes)"
    # gpu_idle alone in remediate: budget_breach follows Mode (notify), so no budget escalation acts.
    assert policy("notify", "gpu_idle=remediate").held(ec2) == "budget_breach follows Mode (notify)"
    # Remediate mode with budget_breach in notify: the budget escalation reports only.
    assert policy("remediate", "budget_breach=notify").dry_run_for(ec2)
    assert policy("remediate", scope="team!=vision").dry_run_for(ec2)


def test_working_again_follows_the_mode_of_the_reason_its_mark_was_made_for() -> None:
    def again(kind: ResourceKind, tags: dict[str, str]) -> Finding:
        return finding(Reason.GPU_ACTIVE_AGAIN, kind=kind, tags=tags, remediable=False, cancels_mark=True)

    diverged = again(ResourceKind.TRAINING_JOB, {MARK_TAG_KEY: mark_text(NOW, "training_diverged")})
    assert reasons_of(diverged) == (Reason.TRAINING_DIVERGED,)
    assert reasons_of(again(ResourceKind.EC2_INSTANCE, LONG_AGO)) == (Reason.GPU_IDLE,)
    unmark = decide(again(ResourceKind.EC2_INSTANCE, LONG_AGO), policy("remediate", "gpu_idle=notify"), NOW)
    assert (unmark.action, unmark.dry_run) == (Action.UNMARK, True)
    assert unmark.note.startswith("notify only: gpu_idle is in notify (ReasonModes); working again")


def test_the_cap_counts_live_and_dry_stops_apart() -> None:
    """A costlier resource out of scope never takes an in-scope stop's place under the per-run cap."""
    findings = [
        finding(tags={**RESEARCH, **LONG_AGO}, rid="i-research", hourly=30.0),
        finding(tags={**VISION, **LONG_AGO}, rid="i-vision-1", hourly=10.0),
        finding(tags={**VISION, **LONG_AGO}, rid="i-vision-2", hourly=5.0),
    ]
    decisions = decide_all(findings, policy("remediate", scope="team!=research", max_stops=1), NOW)
    assert [(d.resource.id, d.action, d.dry_run) for d in decisions] == [
        ("i-research", Action.STOP, True),
        ("i-vision-1", Action.STOP, False),
        ("i-vision-2", Action.NOTIFY, False),
    ]
    assert decisions[2].note == "stop cap of 1 per run reached: not stopped"


def test_stop_now_is_refused_for_a_reason_in_notify_or_a_resource_outside_the_scope() -> None:
    marked = finding(tags={**RESEARCH, **LONG_AGO})
    refused = decide_requested_stop(marked, policy("remediate", scope="team!=research"), NOW)
    assert refused.action is Action.NOTIFY
    assert (
        refused.note == "not stopped: notify only: team=research is outside RemediateScope (team!=research)"
    )
    notebook = finding(Reason.NOTEBOOK_IDLE, kind=ResourceKind.NOTEBOOK, tags=LONG_AGO)
    held = decide_requested_stop(notebook, policy("notify", "gpu_idle=remediate"), NOW)
    assert held.note == "not stopped: notify only: notebook_idle follows Mode (notify)"
    done = decide_requested_stop(finding(tags=LONG_AGO), policy("notify", "gpu_idle=remediate"), NOW)
    assert (done.action, done.dry_run) == (Action.STOP, False)


# -- the pipeline: shadow marks for the dry runs, tags for the rest -----------------------------------------


def act(findings: list[Finding], chosen: Policy, shadow: MemoryShadowMarks, fleet: Tagging) -> Report:
    return act_on(
        findings,
        policy=chosen,
        now=NOW,
        remediator=fleet,
        queue=MemoryNoticeQueue(),
        gate=MemoryRepeatGate(),
        repeat_window=timedelta(hours=4),
        shadow=shadow,
    )


def test_out_of_scope_marks_are_kept_in_the_state_table_and_in_scope_ones_are_tags() -> None:
    shadow, fleet = MemoryShadowMarks(), Tagging()
    research, vision = finding(tags=RESEARCH, rid="i-research"), finding(tags=VISION, rid="i-vision")
    report = act([research, vision], policy("remediate", scope="team!=research"), shadow, fleet)
    assert [(d.action, d.dry_run) for d in report.decisions] == [(Action.MARK, True), (Action.MARK, False)]
    assert set(fleet.tags) == {vision.resource.key}  # research's instance is not marked
    assert set(shadow.items) == {research.resource.key}  # its mark is the state table's, as notify mode keeps


def test_a_live_decision_never_reads_a_shadow_mark_as_its_mark() -> None:
    """gpu_idle widened to remediate after a week in notify: its shadow mark from then is no tag; the instance is
    marked now, and stopped only after its own grace period."""
    shadow, fleet = MemoryShadowMarks(), Tagging()
    idle = finding(tags=VISION)
    shadow.mark(idle.resource, NOW - timedelta(days=2))
    [decision] = act([idle], policy("notify", "gpu_idle=remediate"), shadow, fleet).decisions
    assert (decision.action, decision.dry_run) == (Action.MARK, False)
    assert MARK_TAG_KEY in fleet.tags[idle.resource.key]
    assert fleet.stopped == set()


def test_a_flow_overlays_shadow_marks_only_on_what_it_decides_as_dry_runs() -> None:
    shadow = MemoryShadowMarks()
    instances = [
        Ec2Instance(
            id=f"i-{team}", type="p4d.24xlarge", state="running", account="1", region="r", launch_time=NOW
        )
        for team in ("research", "vision")
    ]
    instances = [dataclasses.replace(i, tags={"team": i.id[2:]}) for i in instances]

    def key(i: Ec2Instance) -> str:
        return key_of(i.account, i.region, ResourceKind.EC2_INSTANCE, i.id)

    for i in instances:
        shadow.mark(Resource(kind=ResourceKind.EC2_INSTANCE, id=i.id, account="1", region="r"), NOW)
    chosen = policy("remediate", scope="team!=research")
    read = overlay(instances, shadow, NOW, key, dry=lambda i: chosen.dry_run_as((Reason.GPU_IDLE,), i.tags))
    assert [MARK_TAG_KEY in i.tags for i in read] == [True, False]


# -- a Stop now click ----------------------------------------------------------------------------------------


def test_a_stop_now_click_outside_the_scope_is_refused_with_the_reason(world: dict[str, Any]) -> None:  # noqa: F811
    world["tags"]["team"] = "research"
    deps = dataclasses.replace(_deps(), policy=policy("remediate", scope="team!=research"))
    result = carry_out(_click("costguard:stop", action_value("gpu_idle", KEY)), deps, NOW)
    assert result.outcome == "refused"
    assert deps.remediator.stopped == []  # type: ignore[attr-defined]
    assert "team=research is outside RemediateScope (team!=research)" in deps.slack.replies[0]  # type: ignore[attr-defined]
    world["tags"]["team"] = "vision"
    Record.seen.clear()  # the same click again, as a new one
    assert carry_out(_click("costguard:stop", action_value("gpu_idle", KEY)), deps, NOW).outcome == "done"


def test_a_stop_now_click_for_a_reason_in_notify_is_refused_while_another_acts(
    world: dict[str, Any],  # noqa: F811
) -> None:
    deps = dataclasses.replace(_deps(), policy=policy("remediate", "gpu_idle=notify"))
    result = carry_out(_click("costguard:stop", action_value("gpu_idle", KEY)), deps, NOW)
    assert result.outcome == "refused"
    assert "gpu_idle is in notify (ReasonModes)" in deps.slack.replies[0]  # type: ignore[attr-defined]
    assert deps.remediator.stopped == []  # type: ignore[attr-defined]
