"""The hourly sweep's capacity_reservation_idle verdict and when the policy lets an ODCR be cancelled."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard.detect.capacity import AUTO_CANCEL_TAG, UsageWindow, sweep_findings
from costguard.local.template import Template
from costguard.model import MARK_TAG_KEY, Action, CapacityReservation, Reason
from costguard.policy import Policy, decide
from costguard.pricing import Price
from costguard.settings import CAPACITY_STATES, SettingsError, parse_settings
from tests.conftest import ROOT

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
WINDOW = UsageWindow(hours=24, threshold_percent=20.0)
PRICE = Price(21.958, "t")
LIVE = Policy(dry_run=False, grace=timedelta(minutes=15))


def odcr(tags: dict[str, str] | None = None, reservation_type: str = "default") -> CapacityReservation:
    return CapacityReservation(
        id="cr-0123",
        account="123456789012",
        region="us-east-1",
        instance_type="p4d.24xlarge",
        total=2,
        available=2,
        reservation_type=reservation_type,
        tags=tags if tags is not None else {AUTO_CANCEL_TAG: "true"},
    )


def hours(values: list[float]) -> list[tuple[datetime, float]]:
    start = NOW - timedelta(hours=len(values))
    return [(start + timedelta(hours=n), v) for n, v in enumerate(values)]


def test_idle_whole_window_opted_in_is_cancellable_with_the_money_wasted() -> None:
    mean = hours([5.0] * 24)
    [finding] = sweep_findings(odcr(), mean, mean, window=WINDOW, price=PRICE, now=NOW, event_id="e")
    assert finding.reason is Reason.CAPACITY_RESERVATION_IDLE
    assert finding.remediable and finding.resource.stop_blocker is None
    assert finding.cost_usd == pytest.approx(round(24 * 0.95 * 2 * 21.958, 2))
    assert finding.evidence["usd_per_day_unused"] == pytest.approx(round(0.95 * 2 * 21.958 * 24, 2))
    assert finding.hourly_usd == pytest.approx(2 * 21.958)


def test_above_the_threshold_gives_nothing() -> None:
    mean = hours([35.0] * 24)
    assert sweep_findings(odcr(), mean, mean, window=WINDOW, price=PRICE, now=NOW, event_id="e") == []


def test_no_data_gives_nothing() -> None:
    assert sweep_findings(odcr(), [], [], window=WINDOW, price=PRICE, now=NOW, event_id="e") == []


def test_a_capacity_block_is_never_judged_by_the_odcr_sweep() -> None:
    mean = hours([0.0] * 24)
    block = odcr(reservation_type="capacity-block")
    assert sweep_findings(block, mean, mean, window=WINDOW, price=PRICE, now=NOW, event_id="e") == []


def test_partial_window_is_reported_but_blocked_from_cancel() -> None:
    mean = hours([0.0] * 5)
    [finding] = sweep_findings(odcr(), mean, mean, window=WINDOW, price=PRICE, now=NOW, event_id="e")
    assert finding.resource.stop_blocker and "5 of the last 24 hours" in finding.resource.stop_blocker
    assert finding.cost_usd == pytest.approx(round(5 * 2 * 21.958, 2))


def test_a_busy_hour_blocks_the_cancel_though_the_mean_is_idle() -> None:
    mean = hours([10.0] * 24)
    peak = hours([10.0] * 23 + [60.0])
    [finding] = sweep_findings(odcr(), mean, peak, window=WINDOW, price=PRICE, now=NOW, event_id="e")
    assert finding.resource.stop_blocker and "60%" in finding.resource.stop_blocker


def test_not_opted_in_is_notify_only() -> None:
    mean = hours([0.0] * 24)
    [finding] = sweep_findings(odcr({}), mean, mean, window=WINDOW, price=PRICE, now=NOW, event_id="e")
    assert not finding.remediable
    assert decide(finding, LIVE, NOW).action is Action.NOTIFY


def test_marked_reservation_in_use_again_loses_its_mark() -> None:
    mean = hours([80.0] * 24)
    tags = {AUTO_CANCEL_TAG: "true", MARK_TAG_KEY: "2026-11-20T10:00:00+00:00"}
    [finding] = sweep_findings(odcr(tags), mean, mean, window=WINDOW, price=PRICE, now=NOW, event_id="e")
    assert finding.cancels_mark
    assert decide(finding, LIVE, NOW).action is Action.UNMARK


@pytest.mark.parametrize(
    ("tags", "values", "expected"),
    [
        ({AUTO_CANCEL_TAG: "true"}, [0.0] * 24, Action.MARK),
        ({AUTO_CANCEL_TAG: "true", MARK_TAG_KEY: "2026-11-20T10:00:00+00:00"}, [0.0] * 24, Action.STOP),
        (
            {AUTO_CANCEL_TAG: "true", MARK_TAG_KEY: "2026-11-20T10:00:00+00:00", "costguard:protect": "true"},
            [0.0] * 24,
            Action.NOTIFY,
        ),
        ({AUTO_CANCEL_TAG: "false", MARK_TAG_KEY: "2026-11-20T10:00:00+00:00"}, [0.0] * 24, Action.NOTIFY),
        ({AUTO_CANCEL_TAG: "true", MARK_TAG_KEY: "2026-11-20T10:00:00+00:00"}, [0.0] * 12, Action.NOTIFY),
    ],
    ids=["opted-in-marks", "marked-cancels", "protected", "opted-out", "half-window"],
)
def test_cancel_only_for_an_opted_in_unprotected_reservation_idle_all_window(
    tags: dict[str, str], values: list[float], expected: Action
) -> None:
    mean = hours(values)
    [finding] = sweep_findings(odcr(tags), mean, mean, window=WINDOW, price=PRICE, now=NOW, event_id="e")
    assert decide(finding, LIVE, NOW).action is expected


def test_capacity_defaults_match_the_template() -> None:
    settings = parse_settings()
    defaults = Template.load(ROOT / "template.yaml").parameter_defaults()
    assert settings.capacity_window_hours == int(defaults["CapacityWindowHours"])
    assert settings.capacity_idle_threshold_percent == float(defaults["CapacityIdleThresholdPercent"])
    assert settings.capacity_block_idle_minutes == int(defaults["CapacityBlockIdleMinutes"])
    assert settings.capacity_state_notices == tuple(defaults["CapacityStateNotices"].split(","))
    assert settings.capacity_state_notices == CAPACITY_STATES


def test_state_notices_are_read_from_a_comma_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COSTGUARD_CAPACITY_STATE_NOTICES", "Failed, delayed")
    assert parse_settings().capacity_state_notices == ("failed", "delayed")
    monkeypatch.setenv("COSTGUARD_CAPACITY_STATE_NOTICES", "")
    assert parse_settings().capacity_state_notices == ()
    monkeypatch.setenv("COSTGUARD_CAPACITY_STATE_NOTICES", "active,exploded")
    with pytest.raises(SettingsError, match="COSTGUARD_CAPACITY_STATE_NOTICES"):
        parse_settings()


@pytest.mark.parametrize(
    ("value", "cancellable"), [("true", True), ("TRUE", True), (" true", False), ("yes", False)]
)
def test_opt_in_is_exactly_what_the_iam_condition_accepts(value: str, cancellable: bool) -> None:
    """The template's StringEqualsIgnoreCase "true": a value IAM would refuse is never offered for a cancel."""
    mean = hours([0.0] * 24)
    [finding] = sweep_findings(
        odcr({AUTO_CANCEL_TAG: value}), mean, mean, window=WINDOW, price=PRICE, now=NOW, event_id="e"
    )
    assert finding.remediable is cancellable
    template = (ROOT / "template.yaml").read_text()
    assert (
        'StringEqualsIgnoreCase:\n                  aws:ResourceTag/costguard:auto-cancel: "true"' in template
    )
