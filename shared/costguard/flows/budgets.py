"""Budget breaches and cost anomalies: read the alert, list what burns money now, escalate by level."""

from __future__ import annotations

from datetime import datetime

from aws_lambda_powertools.metrics import MetricUnit

from costguard.act.aws import permissions_for
from costguard.aws import budgets
from costguard.aws.budgets import BreachLog, describe_budget
from costguard.detect.budgets import (
    Breach,
    BudgetAlert,
    BudgetMessageError,
    Running,
    Scope,
    anomaly_finding,
    anomaly_scope,
    breach_stops,
    breach_summary,
    parse_budget_message,
    scope_from_budget,
    unreadable_budget_finding,
)
from costguard.detect.escalation import Escalation, Level, level_for, parse_levels
from costguard.events.budgets import Anomaly, AnomalyDetected, BudgetNotification, CostAnomalyNotification
from costguard.flows.fleet import RUNNING_PERMISSIONS, running_in
from costguard.model import Finding, ResourceKind
from costguard.observability import logger, metrics
from costguard.pipeline import Report
from costguard.runtime import ACT_PERMISSIONS, Runtime

# Every handler here: the budget, the breach log, what runs, and marks and stops of what may be stopped.
PERMISSIONS = (
    budgets.DESCRIBE_PERMISSIONS
    | budgets.BREACH_LOG_PERMISSIONS
    | RUNNING_PERMISSIONS
    | ACT_PERMISSIONS
    | permissions_for(ResourceKind.EC2_INSTANCE, ResourceKind.TRAINING_JOB, ResourceKind.NOTEBOOK)
)


def regions_of(runtime: Runtime, default_region: str) -> tuple[str, ...]:
    return runtime.settings.regions or (default_region,)


def scope_of(alert: BudgetAlert, account: str) -> Scope | None:
    """The budget's tag filter; None when the budget cannot be read (then nothing is stopped)."""
    try:
        budget = describe_budget(account, alert.name)
    except Exception:  # the alert still goes out, without stops
        logger.warning("budget not readable", extra={"budget": alert.name}, exc_info=True)
        return None
    return scope_from_budget(budget) if budget is not None else None


def breach_findings(
    alert: BudgetAlert,
    *,
    account: str,
    regions: tuple[str, ...],
    runtime: Runtime,
    now: datetime,
    event_id: str | None,
    with_summary: bool,
) -> tuple[list[Finding], Level | None, Scope]:
    levels = parse_levels(runtime.settings.budget_escalation)
    level = level_for(levels, alert.alert_type, alert.percent)
    scope = scope_of(alert, account)
    if scope is None and level is not None and level.escalation is not Escalation.NOTIFY:
        level = None  # an unknown scope never widens to the whole account: report only
    running: list[Running] = []
    for region in regions:
        running += running_in(region, runtime, now)
    in_scope = tuple(r for r in running if (scope or Scope()).covers(r.resource))
    breach = Breach(alert, level, scope or Scope(), account, regions[0], now, event_id, in_scope)
    policy = runtime.policy
    findings = [breach_summary(breach, policy.protect_tag_key)] if with_summary else []
    findings += breach_stops(
        breach, protect_tag_key=policy.protect_tag_key, grace=policy.grace, max_stops=policy.max_stops
    )
    return findings, level, scope or Scope()


def handle_budget_notification(
    event: BudgetNotification, runtime: Runtime, now: datetime, breaches: BreachLog | None = None
) -> Report:
    sns = event.sns
    try:
        alert = parse_budget_message(sns.message, sns.subject)
    except BudgetMessageError as error:
        # Unexpected wording: logged with the message id, counted, and still delivered as received.
        logger.error("unreadable budget notification", extra={"event_id": event.id, "problem": str(error)})
        metrics.add_metric(name="UnreadableBudgetNotifications", unit=MetricUnit.Count, value=1)
        finding = unreadable_budget_finding(
            sns.message,
            sns.subject,
            str(error),
            account=event.account,
            region=event.region,
            now=now,
            event_id=event.id,
        )
        return runtime.act([finding], now)
    account = alert.account or event.account
    regions = regions_of(runtime, event.region)
    findings, level, scope = breach_findings(
        alert,
        account=account,
        regions=regions,
        runtime=runtime,
        now=now,
        event_id=event.id,
        with_summary=True,
    )
    if level is not None and level.escalation is not Escalation.NOTIFY:
        (breaches or BreachLog(runtime.settings.state_table)).remember(
            alert,
            account,
            regions[0],
            now,
            escalation=level.escalation,
            scope=scope,
        )
    return runtime.act(findings, now)


def follow_up(runtime: Runtime, now: datetime, breaches: BreachLog | None = None) -> Report:
    """The scheduled run: for each breach still in force, stop what its level marked once the grace
    period is over (and mark what started since). No summary: the breach was reported when it came."""
    combined = Report()
    log = breaches or BreachLog(runtime.settings.state_table)
    for alert, account, region in log.in_force(now):
        findings, _, _ = breach_findings(
            alert,
            account=account,
            regions=regions_of(runtime, region),
            runtime=runtime,
            now=now,
            event_id=f"follow-up/{alert.key}/{now.isoformat()}",
            with_summary=False,
        )
        combined.extend(runtime.act(findings, now))
    return combined


def handle_anomaly(
    anomaly: Anomaly, *, account: str, region: str, runtime: Runtime, now: datetime, event_id: str
) -> Report:
    running: list[Running] = []
    for where, kinds in sorted(anomaly_scope(anomaly, account, region).items()):
        running += running_in(where, runtime, now, kinds)
    finding = anomaly_finding(
        anomaly,
        running,
        account=account,
        region=region,
        now=now,
        event_id=event_id,
        protect_tag_key=runtime.policy.protect_tag_key,
    )
    return runtime.act([finding], now)


def handle_anomaly_event(
    event: AnomalyDetected | CostAnomalyNotification, runtime: Runtime, now: datetime
) -> Report:
    if isinstance(event, AnomalyDetected):
        return handle_anomaly(
            event.detail,
            account=event.account,
            region=event.region,
            runtime=runtime,
            now=now,
            event_id=event.id,
        )
    return handle_anomaly(
        event.anomaly, account=event.account, region=event.region, runtime=runtime, now=now, event_id=event.id
    )
