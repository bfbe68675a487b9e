"""The right-sizing audit's runs in the audit bucket, shared by its steps (flows/audit_plan.py, audit_discover.py,
audit_metrics.py, audit_evaluate.py, audit_report.py: one per Lambda task of statemachine/audit.asl.json, each its own
module so that a step's function loads only what that step uses).

Plan lists the items, one per (account, region); each item's steps read their predecessor's output from S3
(``runs/<run>/<account>/<region>/``) and write their own there, so the state machine passes only keys and
counts (Step Functions caps a state's payload at 256 KB). Discover and ReadMetrics act in the item's account
(through its member role in an organization deployment); Evaluate reads prices and offerings in the hub.
"""

from __future__ import annotations

from costguard.audit import store
from costguard.audit.model import Subject
from costguard.audit.rules import Rules, parse_rules, read_override
from costguard.audit.steps import RegionTask
from costguard.settings import Settings


def prefix(run: str, region: str, account: str | None = None) -> str:
    return f"runs/{run}/{account}/{region}" if account else f"runs/{run}/{region}"


def task_prefix(step: RegionTask) -> str:
    return prefix(step.run, step.region, step.account)


def subjects_of(bucket: str, step: RegionTask) -> list[Subject]:
    """The item's subjects, as its Discover step wrote them."""
    return [Subject.model_validate(s) for s in store.get_json(bucket, f"{task_prefix(step)}/subjects.json")]


def audit_rules(settings: Settings) -> Rules:
    """The packaged rules, overridden by the JSON file at ``audit_rules_key`` in the audit bucket if set."""
    if not settings.audit_rules_key:
        return parse_rules()
    source = f"s3://{settings.audit_bucket}/{settings.audit_rules_key}"
    text = store.get_text(settings.audit_bucket, settings.audit_rules_key)
    if text is None:
        raise FileNotFoundError(f"{source}: no such rules file")
    return parse_rules(read_override(text, source), source=source)
