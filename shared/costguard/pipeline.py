"""Decide, then act, then notify: the one path every detector's findings take."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from aws_lambda_powertools import Logger

from costguard.act.executor import Outcome, Remediator, StopBlockerReader, StopLimiter, execute
from costguard.model import Action, Decision, Finding, Reason
from costguard.notify.dedupe import RepeatGate
from costguard.notify.notice import Notice
from costguard.notify.queue import NoticeQueue
from costguard.policy import Policy, decide_all, stop_candidates

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


def with_stop_blockers(
    findings: Sequence[Finding], policy: Policy, now: datetime, remediator: Remediator
) -> list[Finding]:
    """The findings, with what AWS would refuse a stop for (EC2 stop protection) read before deciding.

    Read only for the stop candidates, costliest first, until the per-run cap has as many stops as it allows:
    one read per stop about to be made (plus one per blocked candidate), never the fleet. A blocked resource
    is then decided like any resource with a stop blocker (reported, not stopped) and leaves its place under
    the cap to the next. The same reads in notify mode: a dry run decides what a live run would.
    """
    listed = list(findings)
    if not isinstance(remediator, StopBlockerReader):
        return listed
    allowed = 0
    for n in stop_candidates(listed, policy, now):
        if allowed >= policy.max_stops:
            break
        resource = listed[n].resource
        try:
            blocker = remediator.stop_blocker(resource)
        except Exception:  # unreadable (denied, throttled past retries): AWS still refuses a protected stop
            logger.warning("stop blocker unreadable: deciding without it", extra={"resource": resource.key})
            blocker = None
        if blocker is None:
            allowed += 1
        else:
            blocked = resource.model_copy(update={"stop_blocker": blocker})
            listed[n] = listed[n].model_copy(update={"resource": blocked})
    return listed


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
    findings = with_stop_blockers(findings, policy, now, remediator)
    report = Report(findings=findings)
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
        if outcome.refused:
            # A refusal AWS repeats on every try (stop protection, an IAM deny) is a known blocker: the same
            # refusal of the same resource is news once per window, not at every sweep.
            key += f"|refused:{outcome.refused}"
        # A failed (but not refused) or capped action is always reported; a repeat of the same news is not.
        always = (outcome.error is not None and not outcome.refused) or outcome.capped
        if decision.finding.folded and not always:
            report.suppressed.append(decision)  # said in the message it belongs to
            continue
        if always or _first_in_window(gate, key, now, window):
            report.notices.append(notice)
        else:
            report.suppressed.append(decision)
    queue.send(report.notices)
    return report
