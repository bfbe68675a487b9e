"""The savings ledger's daily run (at midnight UTC): yesterday's line for the default channel, on Mondays each team's
week for its own channel, and yesterday's figures as the ledger's metrics (``Costguard`` namespace, one
dimension, ``Mode``: acted or would; never a team, whose values no one bounds).

Reads: one GetItem for the teams and one Query per team over the last READ_DAYS (the week reported, and the would-be
stops still open that the week's report counts as still burning). Its findings go the way every finding goes
(runtime.act): the notifier's episode record tells each once, so a schedule delivered twice posts nothing twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from aws_lambda_powertools.metrics import MetricUnit, single_metric

from costguard.act.ledger_book import READ_PERMISSIONS as LEDGER_READ_PERMISSIONS
from costguard.act.ledger_book import DynamoLedger, Ledger
from costguard.detect.ledger_summary import (
    REPORT_WEEKDAY,
    daily_finding,
    day_figures,
    still_burning,
    weekly_findings,
)
from costguard.ledger import Entry
from costguard.model import Finding
from costguard.observability import logger
from costguard.pipeline import Report
from costguard.runtime import REPORT_PERMISSIONS, Runtime

READ_DAYS = 35  # five weeks: the week reported and the would-be stops still open before it
NAMESPACE = "Costguard"
PERMISSIONS = LEDGER_READ_PERMISSIONS | REPORT_PERMISSIONS


def is_report_day(at: datetime) -> bool:
    """The weekly reports go with the run of a Monday (UTC)."""
    return at.weekday() == REPORT_WEEKDAY


def report_findings(
    entries: Sequence[Entry],
    *,
    now: datetime,
    account: str,
    region: str,
    team_key: str,
    event_id: str | None,
) -> list[Finding]:
    """The day's line and, on a report day, each team's week."""
    findings = []
    daily = daily_finding(entries, now=now, account=account, region=region, event_id=event_id)
    if daily is not None:
        findings.append(daily)
    if is_report_day(now):
        findings += weekly_findings(
            entries,
            still_burning(entries),
            now=now,
            account=account,
            region=region,
            team_key=team_key,
            event_id=event_id,
        )
    return findings


def publish(entries: Sequence[Entry], now: datetime) -> None:
    """Yesterday's figures per mode as metrics (EMF): six series, each written once a day."""
    for mode, figures in day_figures(entries, now).items():
        for name, value in figures.items():
            unit = MetricUnit.Count if name != "LedgerSavedUsd" else MetricUnit.NoUnit
            with single_metric(
                name=name, unit=unit, value=value, namespace=NAMESPACE, default_dimensions={"Mode": mode}
            ):
                pass


def handle_schedule(
    runtime: Runtime,
    now: datetime,
    *,
    account: str,
    region: str,
    event_id: str | None,
    ledger: Ledger | None = None,
) -> Report:
    settings = runtime.settings
    book = ledger or runtime.ledger or DynamoLedger(settings.state_table, team_key=settings.routing_tag_key)
    entries = book.entries(now - timedelta(days=READ_DAYS), now)
    publish(entries, now)
    findings = report_findings(
        entries,
        now=now,
        account=account,
        region=region,
        team_key=settings.routing_tag_key,
        event_id=event_id,
    )
    logger.info(
        "savings ledger reported",
        extra={"entries": len(entries), "reports": [f.resource.id for f in findings]},
    )
    return runtime.act(findings, now)
