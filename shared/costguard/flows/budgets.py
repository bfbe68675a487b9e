"""Budget breaches and cost anomalies: read the alert, list what burns money now, escalate by level."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from botocore.exceptions import ClientError

from costguard.act.aws import permissions_for
from costguard.act.executor import Outcome
from costguard.act.shadow import overlay
from costguard.aws import budgets, clients, organization
from costguard.aws.budgets import BreachLog
from costguard.detect.budget_check import Confirmation, confirm, spend_from_budget
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
    unread_regions,
    unreadable_budget_finding,
)
from costguard.detect.escalation import Escalation, level_for, parse_levels
from costguard.detect.members import PERMANENT_CODES
from costguard.events.budgets import Anomaly, AnomalyDetected, BudgetNotification, CostAnomalyNotification
from costguard.fleet import RUNNING_PERMISSIONS, running_in
from costguard.model import Action, Decision, Finding, Reason, Resource, ResourceKind
from costguard.observability import logger, metrics
from costguard.pipeline import Report
from costguard.policy import NOTIFY_ONLY, OWN_REASONS
from costguard.runtime import ACT_PERMISSIONS, Runtime

# Every handler here: the budget, the breach log, what runs, and marks and stops of what may be stopped.
PERMISSIONS = (
    budgets.DESCRIBE_PERMISSIONS
    | budgets.BREACH_LOG_PERMISSIONS
    | RUNNING_PERMISSIONS
    | organization.PLACE_PERMISSIONS
    | ACT_PERMISSIONS
    | permissions_for(ResourceKind.EC2_INSTANCE, ResourceKind.TRAINING_JOB, ResourceKind.NOTEBOOK)
)


def regions_of(runtime: Runtime, default_region: str) -> tuple[str, ...]:
    return runtime.settings.regions or (default_region,)


def running_everywhere(
    account: str, scope: Scope, regions: tuple[str, ...], runtime: Runtime, now: datetime
) -> tuple[list[Running], list[str]]:
    """What runs in every configured region: of the budget's own account, or (an organization deployment) of
    every linked account the budget covers (its LinkedAccount filter, else every ACTIVE account), each in its
    own account through the member role. An account and region that cannot be reached is logged and named
    (the second list), not fatal: the breach is still told with what could be read."""
    if not runtime.settings.organization:
        return [r for region in regions for r in running_in(region, runtime, now)], []
    accounts = scope.accounts or tuple(a.id for a in organization.directory().active()) or (account,)
    running: list[Running] = []
    unreachable: list[str] = []
    for linked in accounts:
        name = organization.directory().describe(linked).name
        for region in regions:
            try:
                with clients.acting_in(linked):
                    found = running_in(region, runtime, now)
            except ClientError as error:
                code = error.response.get("Error", {}).get("Code", "")
                if code not in PERMANENT_CODES:
                    raise
                logger.warning(
                    "budget breach: account not reachable",
                    extra={"account": linked, "region": region, "error": code},
                )
                metrics.add_metric(name="UnreachableMembers", unit=MetricUnit.Count, value=1)
                unreachable.append(f"{name + ' ' if name else ''}{linked} {region} ({code})")
                continue
            running += [
                replace(r, resource=r.resource.model_copy(update={"account_name": name})) for r in found
            ]
    return running, unreachable


def with_marks(running: list[Running], runtime: Runtime, now: datetime) -> list[Running]:
    """What runs, as a live run would read it: in notify mode, with the marks it keeps in the state table as the
    mark tag (act/shadow.py), so that the breach's stops fall due when a live run's would. With ReasonModes or
    RemediateScope, only for the resources whose escalation is a dry run (policy.reasons_of)."""
    if runtime.shadow_marks is None or not running:
        return running
    marked = overlay(
        [r.resource for r in running],
        runtime.shadow_marks,
        now,
        lambda r: r.key,
        dry=_escalation_dry(runtime) if runtime.policy.graded else None,
    )
    return [replace(r, resource=m) for r, m in zip(running, marked, strict=True)]


def _escalation_dry(runtime: Runtime) -> Callable[[Resource], bool]:
    """Whether a budget escalation's mark or stop of a resource is a dry run: budget_breach, and the reason
    costguard acts on its kind for (policy.OWN_REASONS), in remediate, and the resource in RemediateScope."""
    policy = runtime.policy

    def dry(resource: Resource) -> bool:
        reasons = (Reason.BUDGET_BREACH, OWN_REASONS.get(resource.kind, Reason.BUDGET_BREACH))
        return policy.dry_run_as(reasons, resource.tags)

    return dry


def read_budget(runtime: Runtime, account: str, name: str) -> tuple[dict[str, Any] | None, str | None]:
    """The budget's definition and figures, or why it could not be read."""
    try:
        budget = runtime.reads.budgets.describe_budget(account, name)
    except Exception as error:  # the alert still goes out, without stops
        logger.warning("budget not readable", extra={"budget": name}, exc_info=True)
        return None, f"{type(error).__name__}: {str(error)[:200]}"
    return budget, None if budget is not None else "no such budget"


def check_alert(alert: BudgetAlert, account: str, runtime: Runtime) -> tuple[Confirmation, Scope]:
    """Read the budget the alert names, once: its figures confirm the alert, its tag filter is the scope."""
    if alert.account and alert.account != account:
        problem = f"the message names account {alert.account}, the alert topic belongs to {account}"
        return Confirmation(None, None, problem), Scope(known=False)
    budget, unreadable = read_budget(runtime, account, alert.name)
    if budget is None:
        return confirm(alert, None, unreadable=unreadable), Scope(known=False)
    return confirm(alert, spend_from_budget(budget)), scope_from_budget(budget)


def breach_of(
    alert: BudgetAlert,
    *,
    account: str,
    regions: tuple[str, ...],
    runtime: Runtime,
    now: datetime,
    event_id: str | None,
) -> tuple[Breach, Scope]:
    """The breach as AWS Budgets bears it out now: the level comes from the budget's own figures, and a
    budget that cannot be read or disagrees with the message leaves the alert reported only."""
    confirmation, scope = check_alert(alert, account, runtime)
    level = None
    if confirmation.confirmed:
        level = level_for(
            parse_levels(runtime.settings.budget_escalation), alert.alert_type, confirmation.percent
        )
    else:
        logger.warning(
            "budget alert not confirmed",
            extra={"event_id": event_id, "budget": alert.name, "problem": confirmation.problem},
        )
        metrics.add_metric(name="UnconfirmedBudgetAlerts", unit=MetricUnit.Count, value=1)
    running, unreachable = running_everywhere(account, scope, regions, runtime, now)
    in_scope = tuple(with_marks([r for r in running if scope.covers(r.resource)], runtime, now))
    breach = Breach(
        alert,
        level,
        scope,
        account,
        regions[0],
        now,
        event_id,
        in_scope,
        check=confirmation.describe(alert.alert_type),
        confirmed=confirmation.confirmed,
        unreachable=tuple(unreachable),
    )
    return breach, scope


def stops_of(breach: Breach, runtime: Runtime, *, folded: bool) -> list[Finding]:
    policy = runtime.policy
    return breach_stops(
        breach,
        protect_tag_key=policy.protect_tag_key,
        grace=policy.grace,
        max_stops=policy.max_stops,
        folded=folded,
        dry=_escalation_dry(runtime) if policy.graded else None,
    )


def acted_line(decision: Decision, outcome: Outcome) -> str:
    """One resource's line in the breach's message: what was done (or, dry, would be done) to it."""
    resource = decision.resource
    name = f"{resource.display_name} ({resource.instance_type or resource.kind.value})"
    if outcome.error:
        return f"{name}: {outcome.detail}: {outcome.error}"
    if outcome.capped:
        return f"{name}: not stopped: {outcome.detail} (MaxStopsPerHour)"
    dry = " (dry run)" if decision.dry_run else ""
    if decision.held is not None:
        dry = f" ({NOTIFY_ONLY}{decision.held})"  # why it is only a dry run: a reason's mode, or the scope
    if decision.action is Action.MARK:
        due = f", stop due at {decision.stop_after:%Y-%m-%d %H:%M} UTC" if decision.stop_after else ""
        return f"{name}: {'would be marked' if decision.dry_run else 'marked'} for stop{due}{dry}"
    if decision.action is Action.STOP:
        return f"{name}: {'would be stopped' if decision.dry_run else 'stopped'}{dry}"
    return f"{name}: {decision.note}"


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
    account = event.account  # the topic's: a message naming another account is not confirmed
    regions = regions_of(runtime, event.region)
    breach, scope = breach_of(
        alert, account=account, regions=regions, runtime=runtime, now=now, event_id=event.id
    )
    if breach.level is not None and breach.confirmed and breach.escalation is not Escalation.NOTIFY:
        (breaches or BreachLog(runtime.settings.state_table)).remember(
            alert,
            account,
            regions[0],
            now,
            escalation=breach.escalation,
            scope=scope,
        )
    # One message for the breach: the marks and stops are acted on first, quietly (a failure or a capped
    # stop is still its own message), then told in the summary with what became of each.
    stopped = runtime.act(stops_of(breach, runtime, folded=True), now)
    acted = [acted_line(d, o) for d, o in zip(stopped.decisions, stopped.outcomes, strict=True)]
    report = runtime.act([breach_summary(breach, runtime.policy.protect_tag_key, acted)], now)
    report.extend(stopped)
    return report


def follow_up(runtime: Runtime, now: datetime, breaches: BreachLog | None = None) -> Report:
    """The scheduled run: for each breach still in force, stop what its level marked once the grace
    period is over (and mark what started since). No summary: the breach was reported when it came, and
    each stop made now is its own news."""
    combined = Report()
    log = breaches or BreachLog(runtime.settings.state_table)
    for alert, account, region in log.in_force(now):
        breach, _ = breach_of(
            alert,
            account=account,
            regions=regions_of(runtime, region),
            runtime=runtime,
            now=now,
            event_id=f"follow-up/{alert.key}/{now.isoformat()}",
        )
        combined.extend(runtime.act(stops_of(breach, runtime, folded=False), now))
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
        unread=unread_regions(anomaly, account),
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
