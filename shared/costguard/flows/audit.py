"""The right-sizing audit's steps, one per Lambda task of statemachine/audit.asl.json.

Plan lists the items, one per (account, region); each item's steps read their predecessor's output from S3
(``runs/<run>/<account>/<region>/``) and write their own there, so the state machine passes only keys and
counts (Step Functions caps a state's payload at 256 KB). Discover and ReadMetrics act in the item's account
(through its member role in an organization deployment); Evaluate reads prices and offerings in the hub.

Each step is its own module (flows/audit_plan.py, audit_discover.py, audit_metrics.py, audit_evaluate.py,
audit_report.py), so a step's function loads only what that step uses; this module gathers them for the
command line's local run, the benchmarks and the tests.
"""

from __future__ import annotations

from costguard.audit.discover import discover
from costguard.flows.audit_discover import DISCOVER_REGION_PERMISSIONS, audit_rules, discover_region
from costguard.flows.audit_evaluate import (
    EVALUATE_REGION_PERMISSIONS,
    INLINE_RESULT_BYTES,
    accelerated,
    evaluate_region,
    judge_region,
    region_holdings,
)
from costguard.flows.audit_metrics import READ_REGION_METRICS_PERMISSIONS, read_region_metrics
from costguard.flows.audit_plan import PLAN_PERMISSIONS, account_of_arn, plan, plan_accounts, plan_run
from costguard.flows.audit_report import REPORT_PERMISSIONS, report

__all__ = [
    "DISCOVER_REGION_PERMISSIONS",
    "EVALUATE_REGION_PERMISSIONS",
    "INLINE_RESULT_BYTES",
    "PLAN_PERMISSIONS",
    "READ_REGION_METRICS_PERMISSIONS",
    "REPORT_PERMISSIONS",
    "accelerated",
    "account_of_arn",
    "audit_rules",
    "discover",
    "discover_region",
    "evaluate_region",
    "judge_region",
    "plan",
    "plan_accounts",
    "plan_run",
    "read_region_metrics",
    "region_holdings",
    "report",
]
