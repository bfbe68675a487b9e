"""The audit's Report step: the (account, region) results merged into report.json and report.html, the page linked and
the Slack summary posted."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from costguard.audit import map_results, store
from costguard.audit.report import build_report
from costguard.audit.steps import ReportInput
from costguard.notify.delivery import SECRET_PERMISSIONS, DeliveryError, load_routes, post
from costguard.observability import logger, metrics
from costguard.settings import Settings

REPORT_PERMISSIONS = (
    store.READ_PERMISSIONS | store.WRITE_PERMISSIONS | store.LINK_PERMISSIONS | SECRET_PERMISSIONS
)


def report(step: ReportInput, settings: Settings) -> dict[str, Any]:
    """Merge the (account, region) results, write report.json and report.html, link the page and post the
    Slack summary."""
    # The page and the Block Kit summary (slack_sdk's models): loaded by the report's first run.
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
