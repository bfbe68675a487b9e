"""The savings ledger's entry (costguard/ledger.py): hours kept off, their cap, the near-miss, the totals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard.ledger import (
    ACTED,
    CSV_FIELDS,
    DEFAULT_MAX_RUNTIME,
    NO_TEAM,
    WOULD,
    Entry,
    csv_rows,
    entry_for,
    render,
    totals,
)
from costguard.model import Action, Decision, Finding, Reason, Resource, ResourceKind

T0 = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
H = timedelta(hours=1)


def _entry(**overrides: object) -> Entry:
    base: dict[str, object] = {
        "id": "d1",
        "at": T0,
        "account": "123456789012",
        "region": "us-east-1",
        "kind": "ec2_instance",
        "resource_id": "i-1",
        "name": "box",
        "team": "vision",
        "owner": None,
        "reason": "gpu_idle",
        "mode": ACTED,
        "hourly_usd": 10.0,
    }
    return Entry(**(base | overrides))  # type: ignore[arg-type]


def test_hours_run_to_the_return_or_to_now_while_it_stays_off() -> None:
    off = _entry()
    assert (
        off.hours_off(T0 + 5 * H) == 5 and off.dollars(T0 + 5 * H) == 50 and off.saved_usd(T0 + 5 * H) == 50
    )
    back = off.returned(T0 + 3 * H)
    assert back.hours_off(T0 + 5 * H) == 3 and back.saved_usd(T0 + 10 * H) == 30
    # The first return counts; a later one changes nothing.
    assert back.returned(T0 + 4 * H).returned_at == T0 + 3 * H


def test_hours_stop_at_the_planned_end_and_never_run_backwards() -> None:
    job = _entry(kind="training_job", planned_end=T0 + 2 * H)
    assert job.hours_off(T0 + 9 * H) == 2
    ended = _entry(planned_end=T0 - H)  # past its planned end already when stopped: nothing kept off
    assert ended.hours_off(T0 + 9 * H) == 0 and ended.saved_usd(T0 + 9 * H) == 0
    early = _entry().returned(T0 - H)  # a return dated before the action counts as at the action
    assert early.hours_off(T0 + H) == 0


@pytest.mark.parametrize(("minutes", "near"), [(59, True), (60, False), (61, False)])
def test_back_within_an_hour_is_a_near_miss_and_no_saving(minutes: int, near: bool) -> None:
    entry = _entry().returned(T0 + timedelta(minutes=minutes))
    assert entry.near_miss is near
    assert entry.dollars(T0 + 2 * H) == pytest.approx(10 * minutes / 60)
    assert entry.saved_usd(T0 + 2 * H) == (0 if near else pytest.approx(10 * minutes / 60))


def test_an_unknown_rate_counts_the_action_but_no_dollar() -> None:
    entry = _entry(hourly_usd=None)
    assert entry.dollars(T0 + H) is None and entry.saved_usd(T0 + H) == 0
    [team] = totals([entry], T0 + H)
    assert team.actions == 1 and team.unknown_rate == 1 and team.saved_usd == 0


def _decision(kind: ResourceKind, *, dry_run: bool = False, **resource: object) -> Decision:
    finding = Finding(
        reason=Reason.GPU_IDLE if kind is ResourceKind.EC2_INSTANCE else Reason.JOB_STALLED,
        resource=Resource(kind=kind, id="r-1", account="123456789012", region="eu-west-1", **resource),  # type: ignore[arg-type]
        summary="idle",
        observed_at=T0,
        hourly_usd=4.0,
    )
    return Decision(
        action=Action.STOP, reason=finding.reason, finding=finding, dry_run=dry_run, decided_at=T0
    )


def test_an_entry_names_its_team_owner_place_and_mode() -> None:
    entry = entry_for(
        _decision(ResourceKind.EC2_INSTANCE, tags={"squad": "nlp", "owner": "li"}, name="n1"),
        team_key="squad",
    )
    assert (entry.team, entry.owner, entry.account, entry.region, entry.name) == (
        "nlp",
        "li",
        "123456789012",
        "eu-west-1",
        "n1",
    )
    assert entry.mode == ACTED and entry.hourly_usd == 4.0 and entry.planned_end is None
    would = entry_for(
        _decision(ResourceKind.EC2_INSTANCE, dry_run=True, tags={"team": "  "}), team_key="team"
    )
    assert would.mode == WOULD and would.team == NO_TEAM


def test_a_stopped_job_is_kept_off_to_its_max_runtime_or_a_days() -> None:
    started = T0 - 3 * H
    plain = entry_for(_decision(ResourceKind.TRAINING_JOB, started=started), team_key="team")
    assert plain.planned_end == started + DEFAULT_MAX_RUNTIME


def test_totals_per_team_and_one_csv_row_per_action() -> None:
    entries = [
        _entry(id="a", team="vision").returned(T0 + 2 * H),
        _entry(id="b", team="vision").returned(T0 + timedelta(minutes=10)),  # near-miss
        _entry(id="c", team="nlp", hourly_usd=1.0),
        _entry(id="d", team="nlp", kind="training_job", planned_end=T0 + H),
    ]
    now = T0 + 4 * H
    by_team = {t.team: t for t in totals(entries, now)}
    assert by_team["vision"].saved_usd == 20 and by_team["vision"].near_misses == 1
    assert by_team["vision"].near_miss_usd == pytest.approx(10 / 6)
    assert by_team["nlp"].saved_usd == 4 + 10 and by_team["nlp"].still_off == 1  # a stopped job is not "off"
    rows = csv_rows(entries, now)
    assert len(rows) == 4 and list(rows[0]) == list(CSV_FIELDS)
    text = render(entries, now)
    assert "NEAR-MISS, not a saving" in text and "ended for good" in text and "team vision" in text
