"""The right-sizing audit's steps, one per Lambda task of statemachine/audit.asl.json.

Plan lists the items, one per (account, region); each item's steps read their predecessor's output from S3
(``runs/<run>/<account>/<region>/``) and write their own there, so the state machine passes only keys and
counts (Step Functions caps a state's payload at 256 KB). Discover and ReadMetrics act in the item's account
(through its member role in an organization deployment); Evaluate reads prices and offerings in the hub.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from functools import cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from costguard.audit import map_results, store
from costguard.audit.discover import (
    DISCOVER_PERMISSIONS,
    PRICED_OPTIONS_PERMISSIONS,
    discover,
    priced_options,
)
from costguard.audit.endpoints import endpoint_rows
from costguard.audit.evaluate import Catalog, evaluate
from costguard.audit.gather import PERMISSIONS as GATHER_PERMISSIONS
from costguard.audit.gather import gather
from costguard.audit.holdings import Holdings, region_sections
from costguard.audit.model import AuditFinding, Subject, Usage, family_of
from costguard.audit.reading import read_usage
from costguard.audit.report import build_report, region_result, team_totals
from costguard.audit.rules import Rules, parse_rules, read_override
from costguard.audit.steps import AuditItem, PlanInput, RegionTask, ReportInput
from costguard.aws import clients, compute_optimizer, organization, savings_plans
from costguard.aws import metrics as cloudwatch_metrics
from costguard.events.common import to_datetime
from costguard.model import ResourceKind
from costguard.notify.delivery import SECRET_PERMISSIONS, DeliveryError, load_routes, post
from costguard.observability import logger, metrics
from costguard.pricing import bundled_regions, price_book, region_prices
from costguard.settings import Settings

# plan: an organization deployment with no accounts named lists the organization's accounts; plan_run writes the
# items where the Map's ItemReader reads them.
PLAN_PERMISSIONS = organization.LIST_PERMISSIONS | store.WRITE_PERMISSIONS
# discover_region and read_region_metrics: the watched services' reads, in a member account through its role;
# discover_region also lists what GPU work left behind (audit/gather.py), with the rules' age read first.
DISCOVER_REGION_PERMISSIONS = (
    DISCOVER_PERMISSIONS
    | GATHER_PERMISSIONS
    | store.READ_OPTIONAL_PERMISSIONS
    | store.WRITE_PERMISSIONS
    | clients.ASSUME_PERMISSIONS
)
READ_REGION_METRICS_PERMISSIONS = (
    cloudwatch_metrics.READ_PERMISSIONS
    | cloudwatch_metrics.LIST_PERMISSIONS
    | store.READ_PERMISSIONS
    | store.WRITE_PERMISSIONS
    | clients.ASSUME_PERMISSIONS
)
# evaluate_region, with audit_rules reading an override that may be missing.
EVALUATE_REGION_PERMISSIONS = (
    store.READ_PERMISSIONS
    | store.READ_OPTIONAL_PERMISSIONS
    | PRICED_OPTIONS_PERMISSIONS
    | store.WRITE_PERMISSIONS
    | savings_plans.PERMISSIONS
    | compute_optimizer.PERMISSIONS
)
REPORT_PERMISSIONS = (
    store.READ_PERMISSIONS | store.WRITE_PERMISSIONS | store.LINK_PERMISSIONS | SECRET_PERMISSIONS
)


_ACCOUNT = re.compile(r"^[0-9]{12}$")
# An item's result at most this large (serialized) travels in its outcome as well as in S3: the report then reads
# no object for it. Most items of an organization (no GPU at all) are a few hundred bytes.
INLINE_RESULT_BYTES = 4096


def _prefix(run: str, region: str, account: str | None = None) -> str:
    return f"runs/{run}/{account}/{region}" if account else f"runs/{run}/{region}"


def _task_prefix(step: RegionTask) -> str:
    return _prefix(step.run, step.region, step.account)


def account_of_arn(arn: str | None) -> str | None:
    """The account field of an ARN (a state machine's, a function's), or None."""
    parts = (arn or "").split(":")
    return parts[4] if len(parts) > 5 and _ACCOUNT.match(parts[4]) else None


def _named_accounts(value: Any) -> list[str]:
    """The execution input's ``accounts``: a list of ids, or one comma-separated string."""
    if value is None or value == [] or value == "":
        return []
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, list):
        raise ValueError(f"input accounts: a list of 12-digit account ids, not {type(value).__name__}")
    accounts = [str(a).strip() for a in names if str(a).strip()]
    bad = [a for a in accounts if not _ACCOUNT.match(a)]
    if bad:
        raise ValueError(f"input accounts: not AWS account ids (12 digits): {bad[:5]}")
    return list(dict.fromkeys(accounts))


def plan_accounts(
    step: PlanInput, settings: Settings, hub: str | None = None
) -> list[tuple[str, str | None]]:
    """The accounts to audit, with their names where known: the execution input's, else the settings', else
    (an organization deployment) every ACTIVE account of the organization, else the hub's own.

    Only the organization case calls Organizations: named accounts need no management or delegated-admin hub,
    and a single-account deployment never asks. The hub is ``settings.home_account``, else the account of the
    state machine's ARN (in the execution's context), else ``hub`` (the function's own ARN's)."""
    home = settings.home_account or account_of_arn(step.state_machine) or hub
    named = _named_accounts(step.input.get("accounts")) or list(settings.accounts)
    if not settings.organization:
        others = [a for a in named if a != home]
        if others:
            raise ValueError(
                f"accounts {others[:5]} asked for, but this is a single-account deployment "
                "(COSTGUARD_MEMBER_ROLE_NAME is empty): only the hub's own account can be audited"
            )
        if not home:
            raise ValueError("the hub's account is unknown: set COSTGUARD_HOME_ACCOUNT")
        return [(home, None)]
    if named:
        return [(a, None) for a in named]
    return [(a.id, a.name) for a in organization.directory().active()]


def plan(
    step: PlanInput, settings: Settings, home_region: str, home_account: str | None = None
) -> dict[str, Any]:
    """The run's name, its moment and its items: every (account, region) to audit. Regions: the execution
    input's, else the settings', else the home region."""
    wanted = step.input.get("regions") or list(settings.regions) or [home_region]
    regions = list(dict.fromkeys(wanted))
    now = to_datetime(step.input["now"]) if step.input.get("now") else step.started
    accounts = plan_accounts(step, settings, home_account)
    items = [
        AuditItem(account=account, region=region, account_name=name).model_dump(mode="json")
        for account, name in accounts
        for region in regions
    ]
    logger.info("audit planned", extra={"accounts": len(accounts), "regions": regions, "items": len(items)})
    return {
        "run": step.execution,
        "now": now.isoformat(),
        "regions": regions,
        "accounts": len(accounts),
        "items": items,
    }


def plan_run(
    step: PlanInput, settings: Settings, home_region: str, home_account: str | None = None
) -> dict[str, Any]:
    """``plan``, its items written to ``runs/<run>/items.json`` (the JSON array the Map's ItemReader reads): the
    state carries their key and count, never the list (17,000 items would pass Step Functions' 256 KB)."""
    planned = plan(step, settings, home_region, home_account)
    key = store.put_json(settings.audit_bucket, f"runs/{planned['run']}/items.json", planned["items"])
    return planned | {"items": {"key": key, "count": len(planned["items"])}}


def discover_region(step: RegionTask, settings: Settings) -> dict[str, Any]:
    """The item's resources, found in its account (through the member role in an organization deployment)."""
    rules = audit_rules(settings)
    with clients.acting_in(step.account):
        subjects = discover(step.region, step.now)
        holdings = gather(step.region, step.now, rules)
    store.put_json(
        settings.audit_bucket,
        f"{_task_prefix(step)}/subjects.json",
        [s.model_dump(mode="json") for s in subjects],
    )
    store.put_json(
        settings.audit_bucket, f"{_task_prefix(step)}/holdings.json", holdings.model_dump(mode="json")
    )
    return step.model_copy(update={"subjects": len(subjects)}).model_dump(mode="json")


def _subjects(settings: Settings, step: RegionTask) -> list[Subject]:
    raw = store.get_json(settings.audit_bucket, f"{_task_prefix(step)}/subjects.json")
    return [Subject.model_validate(s) for s in raw]


def read_region_metrics(step: RegionTask, settings: Settings) -> dict[str, Any]:
    """The item's usage over the window, read from CloudWatch in its account."""
    subjects = _subjects(settings, step)
    with clients.acting_in(step.account):
        usage = read_usage(step.region, subjects, step.now, settings.audit_lookback_days)
    store.put_json(
        settings.audit_bucket,
        f"{_task_prefix(step)}/usage.json",
        {key: u.model_dump(mode="json") for key, u in usage.items()},
    )
    return step.model_dump(mode="json")


def audit_rules(settings: Settings) -> Rules:
    """The packaged rules, overridden by the JSON file at ``audit_rules_key`` in the audit bucket if set."""
    if not settings.audit_rules_key:
        return parse_rules()
    source = f"s3://{settings.audit_bucket}/{settings.audit_rules_key}"
    text = store.get_text(settings.audit_bucket, settings.audit_rules_key)
    if text is None:
        raise FileNotFoundError(f"{source}: no such rules file")
    return parse_rules(read_override(text, source), source=source)


def evaluate_region(step: RegionTask, settings: Settings) -> dict[str, Any]:
    """The item's findings: its subjects and usage judged by the rules, with the hub's prices and offerings."""
    subjects = _subjects(settings, step)
    raw = store.get_json(settings.audit_bucket, f"{_task_prefix(step)}/usage.json")
    usage = {key: Usage.model_validate(u) for key, u in raw.items()}
    holdings = Holdings.model_validate(
        store.get_json(settings.audit_bucket, f"{_task_prefix(step)}/holdings.json")
    )
    result, found = judge_region(step, settings, subjects, usage, holdings, audit_rules(settings))
    key = store.put_json(settings.audit_bucket, f"{_task_prefix(step)}/result.json", result)
    metrics.add_metric(name="AuditFindings", unit=MetricUnit.Count, value=found)
    # The outcome is the child execution's output, which the Map's ResultWriter writes to S3: a small result
    # rides along, a large one is read from its key.
    outcome: dict[str, Any] = {
        "account": step.account,
        "account_name": step.account_name,
        "region": step.region,
        "status": "ok",
        "result_key": key,
        "findings": found,
    }
    if len(json.dumps(result, separators=(",", ":"), default=str)) <= INLINE_RESULT_BYTES:
        outcome["result"] = result
    return outcome


def judge_region(
    step: RegionTask,
    settings: Settings,
    subjects: list[Subject],
    usage: dict[str, Usage],
    holdings: Holdings,
    rules: Rules,
) -> tuple[dict[str, Any], int]:
    """The item's result (what the report merges) and its number of findings, from what Discover and ReadMetrics
    read: judged by the rules, with the hub's prices and offerings; its endpoint variants by cost per 1,000
    requests, and its holdings' sections."""
    options, prices = priced_options(
        step.region, price_book(settings.price_source == "live"), {s.instance_type for s in subjects}
    )
    findings, skipped = evaluate(subjects, usage, Catalog(options, prices), rules)
    monthly = sum(
        prices[s.instance_type] * s.instance_count * rules.hours_per_month
        for s in subjects
        if s.instance_type in prices
    )
    result = region_result(
        step.region,
        findings,
        skipped,
        audited=len(subjects),
        monthly_cost_usd=monthly,
        team_tag=settings.routing_tag_key,
        hours_per_month=rules.hours_per_month,
        window_start=step.now - timedelta(days=settings.audit_lookback_days),
        account=step.account,
        account_name=step.account_name,
        instances=sum(s.instance_count for s in subjects),
        teams=team_totals(subjects, prices, settings.routing_tag_key, rules.hours_per_month),
    )
    result["endpoints"] = endpoint_rows(
        subjects,
        usage,
        findings,
        skipped,
        prices,
        window_hours=settings.audit_lookback_days * 24.0,
        team_tag=settings.routing_tag_key,
    )
    result |= region_holdings(step, settings, subjects, findings, prices, rules, holdings)
    return result, len(findings)


def accelerated(instance_type: str) -> bool:
    """A GPU or accelerator type: its family is one the bundled price table holds (only such families)."""
    return family_of(instance_type) in _accelerated_families()


@cache
def _accelerated_families() -> frozenset[str]:
    return frozenset(family_of(t) for r in bundled_regions() for t in region_prices(r, "ec2"))


def region_holdings(
    step: RegionTask,
    settings: Settings,
    subjects: list[Subject],
    findings: list[AuditFinding],
    prices: dict[str, float],
    rules: Rules,
    holdings: Holdings,
) -> dict[str, Any]:
    """The item's commitments, orphaned storage, untagged GPU spend and Compute Optimizer comparison: what
    Discover gathered (``holdings``), Savings Plans coverage and Compute Optimizer's recommendations read here,
    the sections built by audit/holdings.py."""
    member = step.account if settings.organization else None
    start = (step.now - timedelta(days=settings.audit_lookback_days)).date()
    coverage = savings_plans.covered_shares(step.region, start, step.now.date(), member)
    arns = [
        compute_optimizer.instance_arn(s.region, s.account, s.id)
        for s in subjects
        if s.kind is ResourceKind.EC2_INSTANCE
    ]
    recommendations = compute_optimizer.instance_recommendations(step.region, arns, member)
    return region_sections(
        holdings,
        subjects,
        findings,
        prices,
        region=step.region,
        account=step.account,
        now=step.now,
        window_hours=settings.audit_lookback_days * 24.0,
        rules=rules,
        coverage=coverage,
        recommendations=recommendations,
        required_tags=settings.required_tags,
        team_tag=settings.routing_tag_key,
        accelerated=accelerated,
    )


def report(step: ReportInput, settings: Settings) -> dict[str, Any]:
    """Merge the (account, region) results, write report.json and report.html, link the page and post the
    Slack summary."""
    # The page and the Block Kit summary (slack_sdk's models) are the report step's alone: loaded here, not by
    # the other audit steps that import this module.
    from costguard.audit.html import render_html
    from costguard.audit.summary import summary_message

    regions: list[dict[str, Any]] = []
    outcomes = map_results.outcomes(step.results) if step.results else iter(step.regions)
    for outcome in outcomes:
        if outcome.status == "ok" and (outcome.result is not None or outcome.result_key):
            result = (
                dict(outcome.result)
                if outcome.result is not None
                else store.get_json(settings.audit_bucket, str(outcome.result_key))
            )
            # The outcome names the item (a result written before accounts were iterated does not).
            result.setdefault("account", outcome.account)
            result["account_name"] = result.get("account_name") or outcome.account_name
            regions.append(result)
        else:
            logger.error(
                "audit item failed",
                extra={
                    "account": outcome.account,
                    "region": outcome.region,
                    "error": outcome.error,
                    "cause": (outcome.cause or "")[:500],
                },
            )
            metrics.add_metric(name="AuditRegionFailures", unit=MetricUnit.Count, value=1)
            regions.append(
                {
                    "account": outcome.account,
                    "account_name": outcome.account_name,
                    "region": outcome.region,
                    "status": "failed",
                    "error": outcome.error,
                    "cause": outcome.cause,
                }
            )
    document = build_report(
        run=step.run,
        generated_at=step.now,
        window_start=step.now - timedelta(days=settings.audit_lookback_days),
        window_end=step.now,
        regions=regions,
    )
    prefix = f"reports/{step.now:%Y/%m/%d}/{step.run}"
    json_key = store.put_json(settings.audit_bucket, f"{prefix}/report.json", document)
    html_key = store.put_html(settings.audit_bucket, f"{prefix}/report.html", render_html(document))
    link = store.presigned_link(settings.audit_bucket, html_key, settings.audit_link_hours)
    slack = "not configured"
    if settings.slack_secret_id:
        try:
            routes = load_routes(settings.slack_secret_id)
            message = summary_message(document, link)
            if routes.is_app:  # a Slack app: the default channel, through the Web API
                from costguard.notify.slack_api import api_for

                api_for(routes).post(routes.default, message)
            else:
                post(routes.default, message)
            slack = "sent"
        except DeliveryError as error:
            # The report is stored: the summary's failure is logged and counted, and named in the output.
            logger.error("audit summary not delivered", extra={"problem": str(error)})
            metrics.add_metric(name="AuditSummaryFailures", unit=MetricUnit.Count, value=1)
            slack = f"failed: {error}"
    return {
        "run": step.run,
        "report_key": json_key,
        "html_key": html_key,
        "link": link,
        "slack": slack,
        "totals": document["totals"],
    }
