"""The right-sizing audit's steps, one per Lambda task of statemachine/audit.asl.json.

Each region's step reads its predecessor's output from S3 and writes its own there, so the state machine
passes only keys and counts (Step Functions caps a state's payload at 256 KB).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from costguard.audit import store
from costguard.audit.discover import (
    DISCOVER_PERMISSIONS,
    PRICED_OPTIONS_PERMISSIONS,
    discover,
    priced_options,
)
from costguard.audit.evaluate import Catalog, evaluate
from costguard.audit.html import render_html
from costguard.audit.model import Subject, Usage
from costguard.audit.reading import read_usage
from costguard.audit.report import build_report, region_result
from costguard.audit.rules import Rules, parse_rules, read_override
from costguard.audit.steps import PlanInput, RegionTask, ReportInput
from costguard.audit.summary import summary_message
from costguard.aws import metrics as cloudwatch_metrics
from costguard.events.common import to_datetime
from costguard.notify.delivery import SECRET_PERMISSIONS, DeliveryError, load_routes, post
from costguard.observability import logger, metrics
from costguard.permissions import NONE
from costguard.pricing import price_book
from costguard.settings import Settings

PLAN_PERMISSIONS = NONE  # plan reads nothing
DISCOVER_REGION_PERMISSIONS = DISCOVER_PERMISSIONS | store.WRITE_PERMISSIONS
READ_REGION_METRICS_PERMISSIONS = (
    cloudwatch_metrics.READ_PERMISSIONS
    | cloudwatch_metrics.LIST_PERMISSIONS
    | store.READ_PERMISSIONS
    | store.WRITE_PERMISSIONS
)
# evaluate_region, with audit_rules reading an override that may be missing.
EVALUATE_REGION_PERMISSIONS = (
    store.READ_PERMISSIONS
    | store.READ_OPTIONAL_PERMISSIONS
    | PRICED_OPTIONS_PERMISSIONS
    | store.WRITE_PERMISSIONS
)
REPORT_PERMISSIONS = (
    store.READ_PERMISSIONS | store.WRITE_PERMISSIONS | store.LINK_PERMISSIONS | SECRET_PERMISSIONS
)


def _prefix(run: str, region: str) -> str:
    return f"runs/{run}/{region}"


def plan(step: PlanInput, settings: Settings, home_region: str) -> dict[str, Any]:
    """The run's name, its moment and its regions: the execution input's, else the settings', else home."""
    wanted = step.input.get("regions") or list(settings.regions) or [home_region]
    now = to_datetime(step.input["now"]) if step.input.get("now") else step.started
    return {"run": step.execution, "now": now.isoformat(), "regions": list(dict.fromkeys(wanted))}


def discover_region(step: RegionTask, settings: Settings) -> dict[str, Any]:
    subjects = discover(step.region, step.now)
    store.put_json(
        settings.audit_bucket,
        f"{_prefix(step.run, step.region)}/subjects.json",
        [s.model_dump(mode="json") for s in subjects],
    )
    return step.model_copy(update={"subjects": len(subjects)}).model_dump(mode="json")


def _subjects(settings: Settings, step: RegionTask) -> list[Subject]:
    raw = store.get_json(settings.audit_bucket, f"{_prefix(step.run, step.region)}/subjects.json")
    return [Subject.model_validate(s) for s in raw]


def read_region_metrics(step: RegionTask, settings: Settings) -> dict[str, Any]:
    usage = read_usage(step.region, _subjects(settings, step), step.now, settings.audit_lookback_days)
    store.put_json(
        settings.audit_bucket,
        f"{_prefix(step.run, step.region)}/usage.json",
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
    subjects = _subjects(settings, step)
    raw = store.get_json(settings.audit_bucket, f"{_prefix(step.run, step.region)}/usage.json")
    usage = {key: Usage.model_validate(u) for key, u in raw.items()}
    rules = audit_rules(settings)
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
    )
    key = store.put_json(settings.audit_bucket, f"{_prefix(step.run, step.region)}/result.json", result)
    metrics.add_metric(name="AuditFindings", unit=MetricUnit.Count, value=len(findings))
    return {"region": step.region, "status": "ok", "result_key": key, "findings": len(findings)}


def report(step: ReportInput, settings: Settings) -> dict[str, Any]:
    """Merge the regions, write report.json and report.html, link the page and post the Slack summary."""
    regions: list[dict[str, Any]] = []
    for outcome in step.regions:
        if outcome.status == "ok" and outcome.result_key:
            regions.append(store.get_json(settings.audit_bucket, outcome.result_key))
        else:
            logger.error(
                "audit region failed",
                extra={
                    "region": outcome.region,
                    "error": outcome.error,
                    "cause": (outcome.cause or "")[:500],
                },
            )
            metrics.add_metric(name="AuditRegionFailures", unit=MetricUnit.Count, value=1)
            regions.append(
                {"region": outcome.region, "status": "failed", "error": outcome.error, "cause": outcome.cause}
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
