"""AWS Budgets notifications and Cost Anomaly Detection alerts: over SNS, and anomalies over EventBridge too."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from costguard.events.common import json_object
from costguard.events.envelope import EventBridgeModel
from costguard.events.sns import ACCOUNT_ID, SnsDelivery

ANOMALY_DETAIL_TYPE = "Anomaly Detected"
# The account line of a Budgets message: "AWS Account 123456789012".
_BUDGET_ACCOUNT = re.compile(r"\bAWS Account\s*:?\s*([0-9]{12})\b", re.IGNORECASE)


class BudgetNotification(SnsDelivery):
    """An AWS Budgets alert: plain English text, read line by line later (detect/budgets.py).

    Every SNS message on the topic that is not an anomaly lands here, readable or not, so that a change of
    wording is forwarded to Slack rather than rejected.
    """

    def message_account(self) -> str | None:
        found = _BUDGET_ACCOUNT.search(self.sns.message)
        return found.group(1) if found else None


# -- Cost Anomaly Detection ---------------------------------------------------------------------


class AnomalyScore(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    max_score: float | None = Field(default=None, alias="maxScore")
    current_score: float | None = Field(default=None, alias="currentScore")


class AnomalyImpact(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    max_impact: float | None = Field(default=None, alias="maxImpact")
    total_impact: float | None = Field(default=None, alias="totalImpact")
    total_actual_spend: float | None = Field(default=None, alias="totalActualSpend")
    total_expected_spend: float | None = Field(default=None, alias="totalExpectedSpend")
    total_impact_percentage: float | None = Field(default=None, alias="totalImpactPercentage")


class RootCause(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    service: str | None = None
    region: str | None = None
    linked_account: str | None = Field(default=None, alias="linkedAccount")
    linked_account_name: str | None = Field(default=None, alias="linkedAccountName")
    usage_type: str | None = Field(default=None, alias="usageType")


class Anomaly(BaseModel):
    """The anomaly itself, the same over SNS (``dimensionalValue``) and EventBridge (``dimensionValue``)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    anomaly_id: str = Field(alias="anomalyId", min_length=1)
    account_id: str | None = Field(default=None, alias="accountId")
    start_date: str | None = Field(default=None, alias="anomalyStartDate")
    end_date: str | None = Field(default=None, alias="anomalyEndDate")
    dimension_value: str | None = Field(default=None, alias="dimensionValue")
    monitor_arn: str | None = Field(default=None, alias="monitorArn")
    monitor_name: str | None = Field(default=None, alias="monitorName")
    score: AnomalyScore = Field(default_factory=AnomalyScore, alias="anomalyScore")
    impact: AnomalyImpact = Field(default_factory=AnomalyImpact)
    root_causes: list[RootCause] = Field(default_factory=list, alias="rootCauses")
    details_link: str | None = Field(default=None, alias="anomalyDetailsLink")

    @model_validator(mode="before")
    @classmethod
    def _sns_spelling(cls, data: Any) -> Any:
        # The SNS message spells it dimensionalValue; EventBridge, dimensionValue.
        if isinstance(data, dict) and "dimensionValue" not in data and "dimensionalValue" in data:
            return {**data, "dimensionValue": data["dimensionalValue"]}
        return data


class CostAnomalyNotification(SnsDelivery):
    """A Cost Anomaly Detection alert over SNS (immediate subscriptions): the message is the anomaly as JSON."""

    @property
    def anomaly(self) -> Anomaly:
        return Anomaly.model_validate(json_object(self.sns.message) or {})

    def message_account(self) -> str | None:
        named = self.anomaly.account_id
        return named if named is not None and ACCOUNT_ID.fullmatch(named) else None

    @model_validator(mode="after")
    def _anomaly_parses(self) -> CostAnomalyNotification:
        self.anomaly  # noqa: B018 - a malformed anomaly fails validation here, naming the field
        return self


class AnomalyDetected(EventBridgeModel):
    """A Cost Anomaly Detection alert over EventBridge."""

    detail_type: Literal["Anomaly Detected"] = Field(alias="detail-type")
    source: Literal["aws.ce"]
    detail: Anomaly


def budget_definition(
    name: str,
    *,
    limit_usd: float,
    actual_usd: float,
    forecast_usd: float | None = None,
    scope_tags: Mapping[str, str] | None = None,
    linked_accounts: Sequence[str] = (),
) -> dict[str, Any]:
    """A DescribeBudget ``Budget`` as AWS answers it for a monthly cost budget, its tag scope and linked
    accounts cost filters (as the console writes them: ``user:<key>$<value>``, ``LinkedAccount``)."""
    found: dict[str, Any] = {
        "BudgetName": name,
        "BudgetType": "COST",
        "TimeUnit": "MONTHLY",
        "BudgetLimit": {"Amount": f"{limit_usd:.2f}", "Unit": "USD"},
        "CalculatedSpend": {
            "ActualSpend": {"Amount": f"{actual_usd:.2f}", "Unit": "USD"},
            "ForecastedSpend": {
                "Amount": f"{actual_usd if forecast_usd is None else forecast_usd:.2f}",
                "Unit": "USD",
            },
        },
    }
    filters: dict[str, list[str]] = {}
    if scope_tags:
        filters["TagKeyValue"] = [f"user:{k}${v}" for k, v in scope_tags.items()]
    if linked_accounts:
        filters["LinkedAccount"] = list(linked_accounts)
    if filters:
        found["CostFilters"] = filters
    return found
