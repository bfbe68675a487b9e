"""A budget alert is confirmed by the budget's own figures, or reported only with the reason."""

from __future__ import annotations

import pytest

from costguard.detect.budget_check import BudgetSpend, confirm, spend_from_budget
from costguard.detect.budgets import BudgetAlert, parse_budget_message
from costguard.detect.escalation import AlertType
from tests.conftest import load_event

LIMIT = 5000.0


def alert_of(name: str) -> BudgetAlert:
    sns = load_event(name)["Records"][0]["Sns"]
    return parse_budget_message(sns["Message"], sns["Subject"])


def spend(actual: float | None, forecast: float | None = None, limit: float | None = LIMIT) -> BudgetSpend:
    return BudgetSpend(limit_usd=limit, actual_usd=actual, forecast_usd=forecast)


def test_figures_are_read_from_describe_budget() -> None:
    budget = {
        "BudgetLimit": {"Amount": "5000.00", "Unit": "USD"},
        "CalculatedSpend": {
            "ActualSpend": {"Amount": "5120.4", "Unit": "USD"},
            "ForecastedSpend": {"Amount": "6240", "Unit": "USD"},
        },
    }
    assert spend_from_budget(budget) == BudgetSpend(5000.0, 5120.4, 6240.0)
    # A usage budget (another unit) or a budget without calculated spend has no dollar figures.
    assert spend_from_budget({"BudgetLimit": {"Amount": "100", "Unit": "GBP"}}) == BudgetSpend(
        None, None, None
    )


def test_a_message_the_budget_bears_out_takes_the_budget_share() -> None:
    confirmation = confirm(alert_of("budget-actual-100-ml-research.json"), spend(5120.40))
    assert confirmation.confirmed
    assert confirmation.percent == 102.4
    assert "AWS Budgets reports ACTUAL $5,120.40 of $5,000.00 (102.4%)" in confirmation.describe(
        AlertType.ACTUAL
    )


def test_the_budget_decides_even_when_it_is_ahead_of_an_older_message() -> None:
    confirmation = confirm(alert_of("budget-actual-80-ml-research.json"), spend(5120.40))
    assert (confirmation.confirmed, confirmation.percent) == (True, 102.4)


def test_forecast_alerts_are_checked_against_the_forecast() -> None:
    alert = alert_of("budget-forecasted-ml-research.json")
    assert confirm(alert, spend(actual=100.0, forecast=6240.0)).percent == 124.8
    assert not confirm(alert, spend(actual=6240.0, forecast=5100.0)).confirmed


def test_a_forged_amount_is_reported_only_and_says_why() -> None:
    forged = BudgetAlert(
        name="ml-research-gpu",
        alert_type=AlertType.ACTUAL,
        budgeted_usd=5000.0,
        threshold_usd=5000.0,
        amount_usd=100_000.0,
    )
    confirmation = confirm(forged, spend(3100.0))
    assert not confirmation.confirmed and confirmation.percent is None
    text = confirmation.describe(AlertType.ACTUAL)
    assert "$100,000.00 is above the $3,100.00 AWS Budgets reports" in text
    assert "nothing is stopped" in text


def test_a_stale_alert_whose_threshold_the_budget_is_under_is_reported_only() -> None:
    # Last month's 150% alert replayed now: the budget stands at 62%.
    confirmation = confirm(alert_of("budget-actual-150-ml-research.json"), spend(3100.0))
    assert not confirmation.confirmed
    assert "$7,652.10" in (confirmation.problem or "")


@pytest.mark.parametrize(
    ("budget", "unreadable", "problem"),
    [
        (None, "AccessDeniedException: no", "could not be read (AccessDeniedException: no)"),
        (None, None, "could not be read (not found)"),
        (spend(None), None, "reports no ACTUAL spend"),
        (spend(5120.4, limit=None), None, "reports no ACTUAL spend"),
        (
            spend(9000.0, limit=9000.0),
            None,
            "the message says the budget is $5,000.00, AWS Budgets says $9,000.00",
        ),
    ],
)
def test_what_cannot_be_confirmed_is_reported_only(
    budget: BudgetSpend | None, unreadable: str | None, problem: str
) -> None:
    confirmation = confirm(alert_of("budget-actual-100-ml-research.json"), budget, unreadable=unreadable)
    assert not confirmation.confirmed
    assert problem in (confirmation.problem or "")


def test_rounding_within_the_tolerance_agrees() -> None:
    alert = BudgetAlert(name="b", alert_type=AlertType.ACTUAL, budgeted_usd=5000.0, amount_usd=5120.40)
    assert confirm(alert, spend(5100.0)).confirmed  # the message 0.4% ahead of the budget's last refresh
    assert not confirm(alert, spend(5000.0)).confirmed  # 2.4% ahead: not the same figure
