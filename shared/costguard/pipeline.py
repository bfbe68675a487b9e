"""Decide, then act, then notify: the one path every detector's findings take."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from aws_lambda_powertools import Logger

from costguard.act.executor import Outcome, Remediator, StopLimiter, execute
from costguard.model import Action, Decision, Finding, Reason
from costguard.notify.dedupe import RepeatGate
from costguard.notify.notice import Notice
from costguard.notify.queue import NoticeQueue
from costguard.policy import Policy, decide_all

logger = Logger(child=True)

# Findings that say the same thing for as long as nothing changes: alerted once (per 30 days).
ALERT_ONCE = {Reason.GPU_METRICS_MISSING}
ONCE_WINDOW = timedelta(days=30)


@dataclass
class Report:
    """What one run saw and did; handlers return its summary."""

    findings: list[Finding] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    suppressed: list[Decision] = field(default_factory=list)

    def extend(self, other: Report) -> None:
        self.findings += other.findings
        self.decisions += other.decisions
        self.outcomes += other.outcomes
        self.notices += other.notices
        self.suppressed += other.suppressed

    def summary(self) -> dict[str, object]:
        return {
            "findings": [
                {
                    "reason": f.reason.value,
                    "resource_id": f.resource.id,
                    "resource_kind": f.resource.kind.value,
                    "summary": f.summary,
                    "hourly_usd": f.hourly_usd,
                    "cost_usd": f.cost_usd,
                    "evidence": f.evidence,
                }
                for f in self.findings
            ],
            "decisions": [d.summary() for d in self.decisions],
            "notified": len(self.notices),
            "suppressed": len(self.suppressed),
        }


def _first_in_window(gate: RepeatGate, key: str, now: datetime, window: timedelta) -> bool:
    try:
        return gate.first_in_window(key, now, window)
    except Exception:  # the state table is unreachable
        # Repeat suppression is a courtesy: a message twice beats a mark or a stop nobody was told of.
        logger.warning("repeat gate unavailable: notifying anyway", extra={"key": key})
        return True


def act_on(
    findings: Sequence[Finding],
    *,
    policy: Policy,
    now: datetime,
    remediator: Remediator,
    queue: NoticeQueue,
    gate: RepeatGate,
    repeat_window: timedelta,
    limiter: StopLimiter | None = None,
) -> Report:
    report = Report(findings=list(findings))
    for decision in decide_all(findings, policy, now):
        outcome = execute(decision, remediator, limiter)
        report.decisions.append(decision)
        report.outcomes.append(outcome)
        if decision.action is Action.NONE:
            continue  # waiting out a grace period: the mark message already said so
        notice = Notice(decision=decision, outcome=outcome, protect_tag_key=policy.protect_tag_key)
        key = f"{decision.resource.key}|{decision.reason}|{decision.action}"
        if decision.finding.repeat_scope:
            key += f"|{decision.finding.repeat_scope}"
        window = ONCE_WINDOW if decision.reason in ALERT_ONCE else repeat_window
        # A failed or capped action is always reported; a repeat of the same news is not.
        if outcome.error or outcome.capped or _first_in_window(gate, key, now, window):
            report.notices.append(notice)
        else:
            report.suppressed.append(decision)
    queue.send(report.notices)
    return report
