"""The audit's Report step: the (account, region) results merged into report.json and report.html, the page linked and
the Slack summary posted."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from costguard.audit import map_results, store
from costguard.audit.compare import LATEST_KEY
from costguard.audit.export import findings_csv
from costguard.audit.report import build_report
from costguard.audit.steps import ReportInput
from costguard.notify.delivery import SECRET_PERMISSIONS, DeliveryError, load_routes, post
from costguard.observability import logger, metrics
from costguard.settings import Settings

REPORT_PERMISSIONS = (
    store.READ_PERMISSIONS | store.WRITE_PERMISSIONS | store.LINK_PERMISSIONS | SECRET_PERMISSIONS
)


def report(step: ReportInput, settings: Settings) -> dict[str, Any]:
    """Merge the (account, region) results, compared with the previous report in the bucket; write report.json,
    report.html and report.csv, name them the latest, link the page and post the Slack summary."""
    # The page and the Block Kit summary (slack_sdk's models): loaded by the report's first run.
    from costguard.audit.html import render_html
    from costguard.audit.summary import summary_message

    regions = _results(step, settings)
    pointer = store.get_json_if_present(settings.audit_bucket, LATEST_KEY)
    previous, previous_key, note = previous_report(step.run, pointer, settings.audit_bucket)
    document = build_report(
        run=step.run,
        generated_at=step.now,
        window_start=step.now - timedelta(days=settings.audit_lookback_days),
        window_end=step.now,
        regions=regions,
        previous=previous,
        previous_key=previous_key,
        previous_note=note,
    )
    prefix = f"reports/{step.now:%Y/%m/%d}/{step.run}"
    json_key = store.put_json(settings.audit_bucket, f"{prefix}/report.json", document)
    html_key = store.put_html(settings.audit_bucket, f"{prefix}/report.html", render_html(document))
    csv_key = store.put_csv(settings.audit_bucket, f"{prefix}/report.csv", findings_csv(document))
    remember_latest(
        settings.audit_bucket,
        pointer,
        {"run": step.run, "key": json_key, "generated_at": document["generated_at"]},
    )
    link = store.presigned_link(settings.audit_bucket, html_key, settings.audit_link_hours)
    slack = _post_summary(settings, summary_message, document, link)
    return {
        "run": step.run,
        "report_key": json_key,
        "html_key": html_key,
        "csv_key": csv_key,
        "link": link,
        "slack": slack,
        "totals": document["totals"],
    }


def previous_report(run: str, pointer: Any, bucket: str) -> tuple[dict[str, Any] | None, str | None, str]:
    """The last report written to the bucket before this run (``pointer``, reports/latest.json, names it; this
    run's own, when the task is retried, is passed over for the one before), its key, and why there is none."""
    none = "no previous report in this bucket: the next run compares with this one"
    if not isinstance(pointer, dict):
        return None, None, none
    entry = pointer.get("latest") or {}
    if entry.get("run") == run:
        entry = pointer.get("before") or {}
    key = entry.get("key")
    if not key:
        return None, None, none
    found = store.get_json_if_present(bucket, str(key))
    if not isinstance(found, dict):
        return None, str(key), f"the previous report ({key}) could not be read"
    return found, str(key), ""


def remember_latest(bucket: str, pointer: Any, entry: dict[str, Any]) -> None:
    """Name this report the latest, and the latest before it (another run's) the one before."""
    latest = pointer.get("latest") if isinstance(pointer, dict) else None
    retried = isinstance(latest, dict) and latest.get("run") == entry["run"]
    before = pointer.get("before") if retried and isinstance(pointer, dict) else latest
    store.put_json(bucket, LATEST_KEY, {"latest": entry, "before": before})


def _results(step: ReportInput, settings: Settings) -> list[dict[str, Any]]:
    """Each item's result (read from S3 when it did not travel in its outcome), or its failure."""
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
    return regions


def _post_summary(settings: Settings, summary_message: Any, document: dict[str, Any], link: str) -> str:
    """The Slack summary to the default route: "sent", "not configured", or why it failed (the report is
    stored either way)."""
    if not settings.slack_secret_id:
        return "not configured"
    try:
        routes = load_routes(settings.slack_secret_id)
        message = summary_message(document, link)
        if routes.is_app:  # a Slack app: the default channel, through the Web API
            from costguard.notify.slack_api import api_for

            api_for(routes).post(routes.default, message)
        else:
            post(routes.default, message)
        return "sent"
    except DeliveryError as error:
        # The report is stored: the summary's failure is logged and counted, and named in the output.
        logger.error("audit summary not delivered", extra={"problem": str(error)})
        metrics.add_metric(name="AuditSummaryFailures", unit=MetricUnit.Count, value=1)
        return f"failed: {error}"
