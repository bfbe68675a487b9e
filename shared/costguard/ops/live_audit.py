"""`costguard audit --live`: the right-sizing audit run read-only against an account, from this machine.

The state machine's steps (flows/audit_*.py) for each region in turn, in this process, with the credentials of the
default boto3 session (as `costguard backtest --live` reads): Discover and ReadMetrics read the account as the
deployed tasks do, Evaluate judges with the same rules and prices, and the report is built and rendered as the
Report step builds it. Nothing is written to AWS: the steps' hand-offs stay in memory, the report goes to local
files, and no Slack summary is posted. ``LIVE_AUDIT_POLICY`` is every action the run calls: reads only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from costguard.audit.discover import DISCOVER_PERMISSIONS, PRICED_OPTIONS_PERMISSIONS, discover
from costguard.audit.gather import PERMISSIONS as GATHER_PERMISSIONS
from costguard.audit.gather import gather
from costguard.audit.model import Subject
from costguard.audit.reading import read_usage
from costguard.audit.report import build_report
from costguard.audit.rules import Rules
from costguard.audit.steps import RegionTask
from costguard.aws import clients, compute_optimizer, savings_plans
from costguard.aws import metrics as cloudwatch_metrics
from costguard.flows.audit_evaluate import judge_region
from costguard.local.aws_errors import ends_the_run, explain
from costguard.model import ResourceKind
from costguard.permissions import needs, read_only_policy
from costguard.settings import Settings

IDENTITY_PERMISSIONS = needs("sts:GetCallerIdentity")  # the account the report names
LIVE_AUDIT_PERMISSIONS = (
    IDENTITY_PERMISSIONS
    | DISCOVER_PERMISSIONS
    | GATHER_PERMISSIONS
    | cloudwatch_metrics.READ_PERMISSIONS
    | cloudwatch_metrics.LIST_PERMISSIONS
    | PRICED_OPTIONS_PERMISSIONS
    | savings_plans.PERMISSIONS
    | compute_optimizer.PERMISSIONS
)
# What `costguard audit --live --print-policy` prints: attach it to the role or user the audit runs as.
LIVE_AUDIT_POLICY = read_only_policy("CostguardLiveAuditReadOnly", LIVE_AUDIT_PERMISSIONS)

Progress = Callable[[str], None]


@dataclass
class LiveAudit:
    """The report as the Report step writes it (report.json), and its page (report.html); ``silent``: the
    instances and notebooks that published no GPU datapoint over the window (the CloudWatch agent missing), as
    ``(kind, name, instance type)``."""

    report: dict[str, Any]
    html: str
    silent: list[tuple[str, str, str]] = field(default_factory=list)


def caller_account(region: str) -> str:
    """The account the credentials belong to (STS GetCallerIdentity, which no policy can deny)."""
    sts: Any = clients.client("sts", region)
    account: str = sts.get_caller_identity()["Account"]
    return account


def run_live_audit(
    regions: Sequence[str],
    now: datetime,
    rules: Rules,
    settings: Settings,
    progress: Progress = lambda _: None,
) -> LiveAudit:
    """Audit each region of the credentials' account at ``now``; a region whose reads fail is reported failed,
    as the state machine reports a failed item. Credentials that are missing or refused end the run (raised)."""
    from costguard.audit.html import render_html

    account = caller_account(regions[0])
    run = f"live-{now:%Y%m%dT%H%M%SZ}"
    results = []
    silent: list[tuple[str, str, str]] = []
    for n, region in enumerate(regions, 1):
        where = f"{region} ({n} of {len(regions)})" if len(regions) > 1 else region
        step = RegionTask(run=run, now=now, region=region, account=account)

        def told(text: str, where: str = where) -> None:
            progress(f"{where}: {text}")

        try:
            result, quiet = audit_region(step, settings, rules, told)
            results.append(result)
            silent += [(s.kind.value, s.name or s.id, s.instance_type) for s in quiet]
        except Exception as error:
            if ends_the_run(error):
                raise
            cause = explain(error) or str(error)[:2000]
            progress(f"{where}: failed: {cause}")
            results.append(
                {
                    "account": account,
                    "account_name": None,
                    "region": region,
                    "status": "failed",
                    "error": type(error).__name__,
                    "cause": cause,
                }
            )
    report = build_report(
        run=run,
        generated_at=now,
        window_start=now - timedelta(days=settings.audit_lookback_days),
        window_end=now,
        regions=results,
    )
    return LiveAudit(report, render_html(report), silent)


def audit_region(
    step: RegionTask, settings: Settings, rules: Rules, progress: Progress
) -> tuple[dict[str, Any], list[Subject]]:
    """One region: Discover's, ReadMetrics' and Evaluate's work, their hand-offs kept in memory; with the
    instances and notebooks that published no GPU datapoint at all."""
    progress("listing GPU and accelerator resources")
    subjects = discover(step.region, step.now)
    holdings = gather(step.region, step.now, rules)
    days = settings.audit_lookback_days
    progress(f"{len(subjects)} resources; reading {days} days of their metrics")
    usage = read_usage(step.region, subjects, step.now, days)
    progress("judging them (prices, offerings, Savings Plans coverage, Compute Optimizer)")
    result, found = judge_region(step, settings, subjects, usage, holdings, rules)
    progress(f"{found} findings")
    agent_kinds = (ResourceKind.EC2_INSTANCE, ResourceKind.NOTEBOOK)
    silent = [
        s
        for s in subjects
        if s.kind in agent_kinds and (s.key not in usage or usage[s.key].hours_observed == 0)
    ]
    return result, silent
