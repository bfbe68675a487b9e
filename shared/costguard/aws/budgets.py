"""AWS Budgets reads and the state-table record of breaches still in force."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from costguard.aws import clients
from costguard.aws.dynamo import table_id
from costguard.detect.budgets import BudgetAlert, Scope
from costguard.detect.escalation import AlertType, Escalation
from costguard.model import Finding
from costguard.observability import logger
from costguard.permissions import needs

BREACH_INDEX = "budget-breaches"  # a string set of the budgets with a breach in force

# DescribeBudget is authorized by budgets:ViewBudget.
DESCRIBE_PERMISSIONS = needs("budgets:ViewBudget")
# BreachLog (remember writes, in_force and stop_all_scopes read); stop_all_scopes_for reads it.
BREACH_LOG_PERMISSIONS = needs("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem")


def describe_budget(account: str, name: str) -> dict[str, Any] | None:
    """The budget's definition (its cost filters name its scope); None when it does not exist any more.

    The Budgets API is global and served from us-east-1.
    """
    budgets = clients.client("budgets", "us-east-1")
    try:
        found: dict[str, Any] = budgets.describe_budget(AccountId=account, BudgetName=name)["Budget"]
    except budgets.exceptions.NotFoundException:
        return None
    return found


def end_of_month(now: datetime) -> datetime:
    """When a monthly budget's period, and with it a breach, ends."""
    year, month = (now.year + 1, 1) if now.month == 12 else (now.year, now.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)


class BreachLog:
    """Breaches whose escalation stops resources, kept until the budget period ends, so the scheduled
    follow-up can stop what was marked once its grace period is over."""

    def __init__(self, table: str) -> None:
        self.table = table

    def remember(
        self,
        alert: BudgetAlert,
        account: str,
        region: str,
        now: datetime,
        *,
        escalation: Escalation,
        scope: Scope,
    ) -> None:
        dynamodb = clients.client("dynamodb")
        key = table_id("budget-breach#", f"{account}#{alert.name}")  # the index holds the id as written
        expires = str(int(end_of_month(now).timestamp()))
        record = self.record_of(alert, account, region, now, escalation=escalation, scope=scope)
        dynamodb.put_item(
            TableName=self.table,
            Item={"id": {"S": key}, "breach": {"S": json.dumps(record)}, "expiration": {"N": expires}},
        )
        # ADD to a string set is atomic: two budgets breached at once are both kept.
        dynamodb.update_item(
            TableName=self.table,
            Key={"id": {"S": BREACH_INDEX}},
            UpdateExpression="ADD budgets :key SET expiration = :exp",
            ExpressionAttributeValues={":key": {"SS": [key]}, ":exp": {"N": expires}},
        )

    @staticmethod
    def record_of(
        alert: BudgetAlert, account: str, region: str, now: datetime, *, escalation: Escalation, scope: Scope
    ) -> dict[str, Any]:
        """What is kept of a breach (the state table's item, the in-memory log's entry)."""
        return {
            "alert": asdict(alert),
            "account": account,
            "region": region,
            "at": now.isoformat(),
            "escalation": escalation.value,
            "scope": [list(pair) for pair in scope.tags],
            "accounts": list(scope.accounts),
        }

    def in_force(self, now: datetime) -> list[tuple[BudgetAlert, str, str]]:
        """(alert, account, region) of every breach whose period has not ended."""
        return [(self._alert(record), record["account"], record["region"]) for record in self._records(now)]

    def stop_all_scopes(self, now: datetime) -> list[Scope]:
        """The scopes of breaches in force whose level stops every resource, busy or not."""
        return [
            Scope(
                tuple((str(k), str(v)) for k, v in record.get("scope", [])),
                accounts=tuple(str(a) for a in record.get("accounts", [])),
            )
            for record in self._records(now)
            if record.get("escalation") == Escalation.STOP_ALL.value
        ]

    @staticmethod
    def _alert(record: dict[str, Any]) -> BudgetAlert:
        fields = record["alert"] | {"alert_type": AlertType(record["alert"]["alert_type"])}
        return BudgetAlert(**fields)

    def _records(self, now: datetime) -> list[dict[str, Any]]:
        dynamodb = clients.client("dynamodb")
        index = dynamodb.get_item(TableName=self.table, Key={"id": {"S": BREACH_INDEX}}).get("Item") or {}
        found = []
        for key in sorted(index.get("budgets", {}).get("SS", [])):
            item = dynamodb.get_item(TableName=self.table, Key={"id": {"S": key}}).get("Item")
            # TTL deletion lags by up to days: the expiration is checked here too.
            if not item or int(item["expiration"]["N"]) <= now.timestamp():
                continue
            found.append(json.loads(item["breach"]["S"]))
        return found


def stop_all_scopes_for(findings: Sequence[Finding], table: str, now: datetime) -> list[Scope]:
    """The scopes of ``stop_all`` breaches in force that ``detect.budgets.keep_budget_marks`` judges the sweeps'
    cancels against. The state table is read only when there is a cancel to judge; none when it is not readable
    (the sweep goes on; the cancel stands)."""
    if not table or not any(f.cancels_mark for f in findings):
        return []
    try:
        return BreachLog(table).stop_all_scopes(now)
    except Exception:  # the sweep goes on; the cancel stands
        logger.warning("budget breaches not readable", exc_info=True)
        return []
