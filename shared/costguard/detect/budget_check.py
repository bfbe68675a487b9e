"""Check a budget alert against what AWS Budgets itself reports before it may stop anything. Pure.

The SNS message is text anyone allowed to publish on the topic could have written. Only the budget's own
figures (``DescribeBudget``: ``CalculatedSpend`` against ``BudgetLimit``), read when the alert is handled,
decide how far into the budget the account is. The message only has to agree with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from costguard.detect.budgets import BudgetAlert
from costguard.detect.escalation import AlertType

# Budgets refreshes its figures a few times a day and rounds them: the message may run ahead of the budget
# by this much (relative) and still agree with it. Spend within a month only grows, so a budget above the
# message is an older alert, not a disagreement.
TOLERANCE = 0.01


@dataclass(frozen=True)
class BudgetSpend:
    """A budget's limit and what AWS Budgets has calculated against it, in USD (None: not reported)."""

    limit_usd: float | None
    actual_usd: float | None
    forecast_usd: float | None

    def amount(self, alert_type: AlertType) -> float | None:
        return self.actual_usd if alert_type is AlertType.ACTUAL else self.forecast_usd

    def percent(self, alert_type: AlertType) -> float | None:
        amount = self.amount(alert_type)
        if amount is None or not self.limit_usd:
            return None
        return round(amount / self.limit_usd * 100, 1)


@dataclass(frozen=True)
class Confirmation:
    """How far into the budget AWS Budgets says the account is, or why the alert is reported only."""

    percent: float | None  # of the budget limit, from the budget's own figures; None when not confirmed
    spend: BudgetSpend | None
    problem: str | None = None  # set: the alert is reported only, and this says why

    @property
    def confirmed(self) -> bool:
        return self.problem is None and self.percent is not None

    def describe(self, alert_type: AlertType) -> str:
        if self.problem is not None:
            return f"Not confirmed by AWS Budgets: {self.problem}; reported only, nothing is stopped."
        assert self.spend is not None
        amount = self.spend.amount(alert_type)
        return (
            f"AWS Budgets reports {alert_type.value} ${amount:,.2f} of ${self.spend.limit_usd:,.2f} "
            f"({self.percent:g}%)."
        )


def _usd(value: Any) -> float | None:
    """``{"Amount": "123.45", "Unit": "USD"}`` -> 123.45; anything else (or another unit) -> None."""
    if not isinstance(value, dict) or str(value.get("Unit", "USD")).upper() != "USD":
        return None
    try:
        return float(str(value.get("Amount")))
    except ValueError:
        return None


def spend_from_budget(budget: dict[str, Any]) -> BudgetSpend:
    """The figures of a ``DescribeBudget`` answer's ``Budget``."""
    calculated = budget.get("CalculatedSpend")
    calculated = calculated if isinstance(calculated, dict) else {}
    return BudgetSpend(
        limit_usd=_usd(budget.get("BudgetLimit")),
        actual_usd=_usd(calculated.get("ActualSpend")),
        forecast_usd=_usd(calculated.get("ForecastedSpend")),
    )


def confirm(alert: BudgetAlert, spend: BudgetSpend | None, *, unreadable: str | None = None) -> Confirmation:
    """Confirm an alert against the budget's own figures.

    Reported only (``problem`` set) when the budget cannot be read, reports no spend of the alert's type, or
    disagrees with the message: a budgeted amount that is not the budget's limit, or an amount (or, without
    one, a threshold) above what the budget reports. Otherwise the budget's own share decides the level.
    """
    if spend is None:
        return Confirmation(
            None, None, f"the budget {alert.name!r} could not be read ({unreadable or 'not found'})"
        )
    percent = spend.percent(alert.alert_type)
    kind = alert.alert_type.value
    if percent is None:
        return Confirmation(None, spend, f"the budget {alert.name!r} reports no {kind} spend against a limit")
    assert spend.limit_usd is not None
    if alert.budgeted_usd is not None and not _close(alert.budgeted_usd, spend.limit_usd):
        return Confirmation(
            None,
            spend,
            f"the message says the budget is ${alert.budgeted_usd:,.2f}, "
            f"AWS Budgets says ${spend.limit_usd:,.2f}",
        )
    amount = spend.amount(alert.alert_type)
    assert amount is not None
    for what, claimed in (("amount", alert.amount_usd), ("threshold", alert.threshold_usd)):
        if claimed is not None and claimed > amount * (1 + TOLERANCE) + 0.01:
            return Confirmation(
                None,
                spend,
                f"the message's {kind} {what} ${claimed:,.2f} is above the ${amount:,.2f} "
                f"AWS Budgets reports ({percent:g}% of ${spend.limit_usd:,.2f})",
            )
    claimed_share = (
        alert.threshold_percent if alert.amount_usd is None and alert.threshold_usd is None else None
    )
    if claimed_share is not None and claimed_share > percent * (1 + TOLERANCE) + 0.01:
        return Confirmation(
            None,
            spend,
            f"the message's threshold {alert.threshold_percent:g}% is above the {percent:g}% "
            f"AWS Budgets reports",
        )
    return Confirmation(percent, spend)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= max(abs(a), abs(b)) * TOLERANCE + 0.01
