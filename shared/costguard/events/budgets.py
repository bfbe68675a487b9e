"""AWS Budgets notifications and Cost Anomaly Detection alerts: over SNS, and anomalies over EventBridge too."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from costguard.events.common import LenientAwsTime

ANOMALY_DETAIL_TYPE = "Anomaly Detected"
# What the entry point's idempotency keys on for an SNS delivery (the model's field names, dumped).
SNS_MESSAGE_ID_PATH = "records[0].sns.message_id"


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class SnsMessage(BaseModel):
    """The SNS envelope. What costguard acts on is strict: the message id (idempotency), the topic (account and
    region) and the message. The rest is lenient: a malformed Timestamp (stray spaces, a typo) or a Subject that
    is not text never rejects the alert it carries; it reads as None (the subject only names a budget the
    message does not, and the time is never used)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    message_id: str = Field(alias="MessageId")
    topic_arn: str = Field(alias="TopicArn", min_length=1)
    subject: Annotated[str | None, BeforeValidator(_text_or_none)] = Field(default=None, alias="Subject")
    message: str = Field(alias="Message")
    timestamp: LenientAwsTime = Field(default=None, alias="Timestamp")

    @field_validator("message_id")
    @classmethod
    def _message_id_given(cls, value: str) -> str:
        # The idempotency key of every SNS alert (SNS_MESSAGE_ID_PATH): with none, a redelivery acts twice.
        if not value.strip():
            raise ValueError("the message id is empty: a redelivery could not be told apart")
        return value


class SnsRecord(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    event_source: Literal["aws:sns"] = Field(alias="EventSource")
    sns: SnsMessage = Field(alias="Sns")


class SnsDelivery(BaseModel):
    """What Lambda receives from an SNS subscription: always exactly one record."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    records: list[SnsRecord] = Field(alias="Records", min_length=1, max_length=1)

    @property
    def sns(self) -> SnsMessage:
        return self.records[0].sns

    @property
    def id(self) -> str:
        return self.sns.message_id

    @property
    def account(self) -> str:
        parts = self.sns.topic_arn.split(":")
        return parts[4] if len(parts) > 5 else ""

    @property
    def region(self) -> str:
        parts = self.sns.topic_arn.split(":")
        return parts[3] if len(parts) > 5 else ""


def sns_message(event: dict[str, Any]) -> str | None:
    """The message text of an SNS delivery, or None when the event is not one."""
    records = event.get("Records")
    if not isinstance(records, list) or len(records) != 1 or not isinstance(records[0], dict):
        return None
    record = records[0]
    sns = record.get("Sns")
    if record.get("EventSource") != "aws:sns" or not isinstance(sns, dict):
        return None
    message = sns.get("Message")
    return message if isinstance(message, str) else None


def json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class BudgetNotification(SnsDelivery):
    """An AWS Budgets alert: plain English text, read line by line later (detect/budgets.py).

    Every SNS message on the topic that is not an anomaly lands here, readable or not, so that a change of
    wording is forwarded to Slack rather than rejected.
    """


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
