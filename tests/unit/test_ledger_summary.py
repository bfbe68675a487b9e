"""The savings ledger where people look (detect/ledger_summary.py, flows/ledger_report.py): each team's week, the
day's line, the figures the metrics carry, all from ledger.Entry's one definition of a saving."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from costguard.detect.ledger_summary import (
    daily_finding,
    day_figures,
    still_burning,
    week_start,
    weekly_findings,
)
from costguard.flows.ledger_report import is_report_day, publish, report_findings
from costguard.ledger import ACTED, NO_TEAM, WOULD, Entry
from costguard.model import Reason, ResourceKind

MONDAY = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)  # a report day, 08:00 UTC
H = timedelta(hours=1)
D = timedelta(days=1)
ACCOUNT, REGION = "123456789012", "us-east-1"


def _entry(n: int, at: datetime, team: str = "vision", **overrides: object) -> Entry:
    base: dict[str, object] = {
        "id": f"d{n}",
        "at": at,
        "account": ACCOUNT,
        "region": REGION,
        "kind": "ec2_instance",
        "resource_id": f"i-{n}",
        "name": f"box-{n}",
        "team": team,
        "owner": None,
        "reason": "gpu_idle",
        "mode": ACTED,
        "hourly_usd": 10.0,
    }
    return Entry(**(base | overrides))  # type: ignore[arg-type]


def test_the_week_is_monday_to_monday_utc() -> None:
    assert week_start(MONDAY) == datetime(2026, 11, 30, tzinfo=UTC)
    assert week_start(MONDAY - 8 * H - timedelta(seconds=1)) == datetime(2026, 11, 23, tzinfo=UTC)
    assert is_report_day(MONDAY) and not is_report_day(MONDAY + D)


def test_one_report_per_team_each_routed_by_its_team_tag_with_the_weeks_figures_only() -> None:
    last_week = MONDAY - 7 * D
    entries = [
        _entry(1, last_week + 1 * D, returned_at=last_week + 1 * D + 5 * H),  # 5 h x $10 = $50
        _entry(2, last_week + 2 * D, returned_at=last_week + 2 * D + 30 * timedelta(minutes=1)),  # near-miss
        _entry(3, last_week + 3 * D, team="nlp", hourly_usd=4.0, returned_at=last_week + 3 * D + 2 * H),
        _entry(4, last_week - D, team="nlp"),  # the week before: not this report's
        _entry(5, MONDAY - 9 * H, team="infra", returned_at=MONDAY - 8.5 * H),  # Sunday 23:00: the week
        _entry(6, MONDAY - H, team="ops"),  # Monday 07:00: next week's
    ]
    findings = weekly_findings(
        entries, [], now=MONDAY, account=ACCOUNT, region=REGION, team_key="team", event_id="e"
    )
    by_team = {f.evidence["team"]: f for f in findings}
    assert sorted(by_team) == ["infra", "nlp", "vision"]
    vision = by_team["vision"]
    assert vision.reason is Reason.LEDGER_WEEKLY and vision.resource.kind is ResourceKind.SAVINGS_LEDGER
    assert vision.resource.tags == {"team": "vision"}  # the notifier routes it to the team's channel
    assert vision.evidence["stops"] == 2 and vision.evidence["saved_usd"] == 50.0
    assert vision.evidence["near_misses"] == 1 and vision.evidence["near_miss_usd"] == 5.0
    assert by_team["nlp"].evidence["stops"] == 1 and by_team["nlp"].evidence["saved_usd"] == 8.0
    assert "$50.00" in vision.summary and "near-miss" in vision.summary
    # Each week's report is its own resource: next week's is news, a redelivery of this one is not.
    assert vision.resource.id == "ledger-week-2026-11-23-vision"


def test_a_team_without_a_tag_goes_to_the_default_channel() -> None:
    [finding] = weekly_findings(
        [_entry(1, MONDAY - 2 * D, team=NO_TEAM)],
        [],
        now=MONDAY,
        account=ACCOUNT,
        region=REGION,
        team_key="team",
    )
    assert finding.resource.tags == {}


def test_notify_modes_would_be_stops_are_priced_apart_and_those_still_idle_are_still_burning() -> None:
    open_would = _entry(1, MONDAY - 3 * D, mode=WOULD, hourly_usd=12.0)
    worked_again = _entry(2, MONDAY - 3 * D, mode=WOULD, returned_at=MONDAY - 3 * D + 4 * H)
    made = _entry(3, MONDAY - 2 * D, returned_at=MONDAY - 2 * D + 2 * H)
    entries = [open_would, worked_again, made]
    assert still_burning(entries) == [open_would]  # a stop made is not burning, one worked again neither
    [finding] = weekly_findings(
        entries, still_burning(entries), now=MONDAY, account=ACCOUNT, region=REGION, team_key="team"
    )
    assert finding.evidence["stops"] == 1 and finding.evidence["saved_usd"] == 20.0
    # The open one is kept off (idle, would have been stopped) from its would-be stop to now: 3 days x $12.
    assert finding.evidence["would_be_stops"] == 2
    assert finding.evidence["would_have_saved_usd"] == pytest.approx(72 * 12 + 40.0)
    assert finding.evidence["still_burning_usd_per_hour"] == 12.0
    assert "Still burning: 1 idle resource(s)" in finding.summary


def test_the_day_line_says_yesterday_and_the_week_so_far_and_nothing_on_an_empty_week() -> None:
    wednesday = MONDAY + 2 * D
    entries = [
        _entry(1, MONDAY + 2 * H, returned_at=MONDAY + 4 * H),  # Monday: $20
        _entry(2, MONDAY + D + H, returned_at=MONDAY + D + 4 * H),  # Tuesday (yesterday): $30
        _entry(3, MONDAY - 2 * D),  # last week: not in the week so far
    ]
    daily = daily_finding(entries, now=wednesday, account=ACCOUNT, region=REGION)
    assert daily is not None and daily.reason is Reason.LEDGER_DAILY and daily.resource.tags == {}
    assert daily.evidence["day"] == "2026-12-01" and daily.evidence["saved_usd"] == 30.0
    assert daily.evidence["week_saved_usd"] == 50.0
    assert "Week so far: $50.00 saved" in daily.summary
    assert daily_finding(entries[2:], now=wednesday, account=ACCOUNT, region=REGION) is None


def test_the_weekly_reports_go_only_on_a_report_day() -> None:
    entries = [
        _entry(1, MONDAY - 2 * D, returned_at=MONDAY - 2 * D + H * 3),  # last Saturday
        _entry(2, MONDAY + H, returned_at=MONDAY + 2 * H),  # Monday 01:00: Tuesday's line
    ]
    on_monday = report_findings(
        entries, now=MONDAY, account=ACCOUNT, region=REGION, team_key="team", event_id=None
    )
    on_tuesday = report_findings(
        entries, now=MONDAY + D, account=ACCOUNT, region=REGION, team_key="team", event_id=None
    )
    assert [f.reason for f in on_monday] == [Reason.LEDGER_DAILY, Reason.LEDGER_WEEKLY]
    assert [f.reason for f in on_tuesday] == [Reason.LEDGER_DAILY]


def test_the_metrics_carry_yesterdays_figures_per_mode(capsys: pytest.CaptureFixture[str]) -> None:
    now = MONDAY + D
    entries = [
        _entry(1, MONDAY + H, returned_at=MONDAY + 3 * H),  # $20 saved
        _entry(2, MONDAY + 5 * H, returned_at=MONDAY + 5 * H + 10 * timedelta(minutes=1)),  # near-miss
        _entry(3, MONDAY + 6 * H, mode=WOULD, returned_at=MONDAY + 9 * H),  # $30 would
        _entry(4, MONDAY - D),  # the day before yesterday: not counted
    ]
    figures = day_figures(entries, now)
    assert figures[ACTED] == {"LedgerActions": 2.0, "LedgerSavedUsd": 20.0, "LedgerNearMisses": 1.0}
    assert figures[WOULD] == {"LedgerActions": 1.0, "LedgerSavedUsd": 30.0, "LedgerNearMisses": 0.0}
    publish(entries, now)
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    seen = {
        (m["Name"], blob["Mode"]): blob[m["Name"]][0]
        if isinstance(blob[m["Name"]], list)
        else blob[m["Name"]]
        for blob in blobs
        for directive in blob["_aws"]["CloudWatchMetrics"]
        for m in directive["Metrics"]
    }
    assert seen[("LedgerSavedUsd", ACTED)] == 20.0 and seen[("LedgerActions", WOULD)] == 1.0
    assert len(seen) == 6  # three figures x two modes, and no team dimension
    assert all(
        directive["Namespace"] == "Costguard" and all("team" not in d for d in directive["Dimensions"])
        for blob in blobs
        for directive in blob["_aws"]["CloudWatchMetrics"]
    )


def test_notify_modes_day_says_what_would_have_been_kept_off_never_that_it_was() -> None:
    wednesday = MONDAY + 2 * D
    entries = [_entry(1, MONDAY + D + H, mode=WOULD, returned_at=MONDAY + D + 3 * H)]  # Tuesday, $20
    daily = daily_finding(entries, now=wednesday, account=ACCOUNT, region=REGION)
    assert daily is not None and daily.evidence["would_have_saved_usd"] == 20.0
    assert daily.evidence["saved_usd"] == 0.0 and daily.evidence["stops"] == 0
    assert "notify mode held back would have kept $20.00" in daily.summary
    assert "$20.00 remediate would have saved" in daily.summary
