"""Decide, then act, then notify: the one path every detector's findings take."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from costguard.act.arming import ArmingRecords, vouch
from costguard.act.executor import Outcome, Remediator, StopBlockerReader, StopLimiter, execute
from costguard.act.ledger_book import Ledger
from costguard.act.marks import MarkRecords, vouched
from costguard.act.shadow import STOPPED_TAG_KEY, Shadow, ShadowMarks, marked_tags, read_marks, shown_tags
from costguard.model import MARK_TAG_KEY, Action, Decision, Finding, Reason
from costguard.notify.dedupe import RepeatGate, Sighting
from costguard.notify.mutes import MuteReader
from costguard.notify.notice import (
    GROUP_ABOVE,
    ROWS_SHOWN,
    AnyNotice,
    GroupNotice,
    Notice,
    by_route,
    kind_of,
    stands_alone,
)
from costguard.notify.queue import NoticeQueue
from costguard.observability import logger
from costguard.policy import SNOOZE_TAG_KEY, Policy, decide_all, marked_at, snoozed_until, stop_candidates

# Findings that say the same thing for as long as nothing changes: alerted once (per 30 days).
ALERT_ONCE = {Reason.GPU_METRICS_MISSING, Reason.EKS_CLUSTER_UNREACHABLE}
ONCE_WINDOW = timedelta(days=30)


@dataclass
class Report:
    """What one run saw and did; handlers return its summary."""

    findings: list[Finding] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    suppressed: list[Decision] = field(default_factory=list)
    digest: list[Notice] = field(default_factory=list)  # still open a day after they were told: the digest

    def extend(self, other: Report) -> None:
        self.findings += other.findings
        self.decisions += other.decisions
        self.outcomes += other.outcomes
        self.notices += other.notices
        self.suppressed += other.suppressed
        self.digest += other.digest

    def summary(self) -> dict[str, object]:
        return {
            "findings": [
                {
                    "reason": f.reason.value,
                    "resource_id": f.resource.id,
                    "resource_kind": f.resource.kind.value,
                    "resource_name": f.resource.display_name,
                    "summary": f.summary,
                    "hourly_usd": f.hourly_usd,
                    "cost_usd": f.cost_usd,
                    "evidence": f.evidence,
                }
                for f in self.findings
            ],
            "decisions": [d.summary() for d in self.decisions],
            "notified": len(self.notices),
            "digest": len(self.digest),
            "suppressed": len(self.suppressed),
        }


def _sightings(gate: RepeatGate, windows: dict[str, timedelta], now: datetime) -> dict[str, Sighting]:
    """Each key's sighting, read in one go; every key NEW when the state table cannot be read."""
    if not windows:
        return {}
    try:
        return gate.sightings(windows, now)
    except Exception:  # the state table is unreachable
        # Repeat suppression is a courtesy: a message twice beats a mark or a stop nobody was told of.
        logger.warning("repeat gate unavailable: notifying anyway", extra={"keys": len(windows)})
        return dict.fromkeys(windows, Sighting.NEW)


def with_shadow_marks(
    findings: Sequence[Finding], shadow: ShadowMarks, now: datetime, policy: Policy | None = None
) -> tuple[list[Finding], dict[str, Shadow]]:
    """A dry run's findings with their resources' shadow marks as the mark tag (act/shadow.py), and the marks: it
    decides on the mark a live run would see on the resource. Read for the findings that may mark, stop or
    unmark, and those whose resource shows a mark already (the flow read it: not read again); with ``policy``,
    only for those it decides as dry runs (ReasonModes, RemediateScope): a live decision's mark is a tag."""
    keys = [
        f.resource.key
        for f in findings
        if (f.remediable or f.cancels_mark or MARK_TAG_KEY in f.resource.tags)
        and (policy is None or policy.dry_run_for(f))
    ]
    marks = read_marks(shadow, keys, now)
    # A shadow mark belongs to the run it was made in: one older than the resource's current run (an instance
    # started again since, a new LaunchTime) is about an earlier run, and the new run is marked afresh.
    started = {f.resource.key: f.resource.started for f in findings if f.resource.started is not None}
    stale = {k: m for k, m in marks.items() if _before_run(m, started.get(k))}
    if stale:
        findings = [_without_stale(f, shadow, stale.get(f.resource.key)) for f in findings]
        marks = {k: m for k, m in marks.items() if k not in stale}
    if not marks:
        return list(findings), marks
    out = []
    for finding in findings:
        if policy is not None and finding.resource.key in marks and not policy.dry_run_for(finding):
            out.append(finding)
            continue
        tags = marked_tags(finding.resource.tags, marks.get(finding.resource.key))
        if tags is not None:
            finding = finding.model_copy(
                update={"resource": finding.resource.model_copy(update={"tags": tags})}
            )
        out.append(finding)
    return out, marks


def _without_stale(finding: Finding, shadow: ShadowMarks, stale: Shadow | None) -> Finding:
    """The finding without a shadow mark of an earlier run (the flow may have overlaid it as its tag), the mark
    deleted so that the new run's is kept."""
    if stale is None:
        return finding
    resource = finding.resource
    try:
        shadow.unmark(resource)
    except Exception:
        logger.warning("stale shadow mark not deleted", extra={"resource": resource.key[:300]}, exc_info=True)
    if resource.tags.get(MARK_TAG_KEY) != stale.mark:
        return finding
    tags = {k: v for k, v in resource.tags.items() if k not in (MARK_TAG_KEY, STOPPED_TAG_KEY)}
    return finding.model_copy(update={"resource": resource.model_copy(update={"tags": tags})})


def _before_run(mark: Shadow, started: datetime | None) -> bool:
    at = marked_at({MARK_TAG_KEY: mark.mark}) if mark.mark else None
    return started is not None and at is not None and at < started


def with_stop_blockers(
    findings: Sequence[Finding],
    policy: Policy,
    now: datetime,
    remediator: Remediator,
    stopped: frozenset[str] = frozenset(),
) -> list[Finding]:
    """The findings, with what AWS would refuse a stop for (EC2 stop protection) read before deciding.

    Read only for the stop candidates, costliest first, until the per-run cap has as many stops as it allows:
    one read per stop about to be made (plus one per blocked candidate), never the fleet. A blocked resource
    is then decided like any resource with a stop blocker (reported, not stopped) and leaves its place under
    the cap to the next. The same reads in notify mode: a dry run decides what a live run would (and reads none
    for the resources of ``stopped``, whose stop it has decided already: decide_all).
    """
    listed = list(findings)
    if not isinstance(remediator, StopBlockerReader):
        return listed
    allowed = {False: 0, True: 0}  # per group the cap counts apart (policy.decide_all): live, dry
    for n in stop_candidates(listed, policy, now, stopped):
        group = policy.graded and policy.dry_run_for(listed[n])
        if allowed[group] >= policy.max_stops:
            if all(count >= policy.max_stops for count in allowed.values()) or not policy.graded:
                break
            continue
        resource = listed[n].resource
        try:
            blocker = remediator.stop_blocker(resource)
        except Exception:  # unreadable (denied, throttled past retries): AWS still refuses a protected stop
            logger.warning("stop blocker unreadable: deciding without it", extra={"resource": resource.key})
            blocker = None
        if blocker is None:
            allowed[group] += 1
        else:
            blocked = resource.model_copy(update={"stop_blocker": blocker})
            listed[n] = listed[n].model_copy(update={"resource": blocked})
    return listed


def with_evidence_vouched(
    findings: Sequence[Finding],
    policy: Policy,
    now: datetime,
    shadow: ShadowMarks | None,
    records: MarkRecords | None,
    arming: ArmingRecords | None,
) -> list[Finding]:
    """The findings with what costguard cannot vouch for taken off: an arming tag changed since costguard first
    saw the resource (act/arming.py), a mark tag costguard did not write or from an earlier run (act/marks.py)."""
    if arming is not None:
        findings = vouch(findings, arming, now)
    if records is None:
        return list(findings)
    own: dict[str, Shadow] = {}
    if shadow is not None and policy.may_dry_run:
        own = read_marks(shadow, [f.resource.key for f in findings if MARK_TAG_KEY in f.resource.tags], now)
    return vouched(findings, records, now, own)


def close_returns(findings: Sequence[Finding], ledger: Ledger | None) -> None:
    """The resources running again since the mark costguard's stop left on them: a mark tag dated before the
    resource's current run (its LaunchTime, which AWS writes) means it was started again after it. Their open
    ledger entries are closed at that start (one read each, these resources only). Never fails the run."""
    if ledger is None:
        return
    seen: set[str] = set()
    for finding in findings:
        resource = finding.resource
        at = marked_at(resource.tags) if MARK_TAG_KEY in resource.tags else None
        if at is None or resource.started is None or at >= resource.started or resource.key in seen:
            continue
        seen.add(resource.key)
        try:
            ledger.returned(resource.key, resource.started)
        except Exception:
            logger.warning("ledger return not kept", extra={"resource": resource.key[:300]}, exc_info=True)


def close_seen_running(ledger: Ledger | None, seen: Mapping[str, datetime]) -> None:
    """The resources a sweep sees running, by key, with when their run began (or the sweep's time): the open
    entries of those costguard stopped are closed there (Ledger.returns: one BatchGetItem per 100). A notebook
    started again, an EKS workload scaled back up. Never fails the run."""
    if ledger is None or not seen:
        return
    try:
        ledger.returns(seen)
    except Exception:
        logger.warning("ledger returns not kept", extra={"resources": len(seen)}, exc_info=True)


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
    routing_tag_key: str = "team",
    source: str | None = None,
    group_above: int = GROUP_ABOVE,
    mutes: MuteReader | None = None,
    shadow: ShadowMarks | None = None,
    records: MarkRecords | None = None,
    arming: ArmingRecords | None = None,
    ledger: Ledger | None = None,
) -> Report:
    """Decide, act, and queue what is news: the first sighting of an episode (and any failure), one message
    per channel when a run has many; what stays open past a day goes in that channel's daily digest.

    A dry run with ``shadow`` decides on the marks it kept there, and keeps its marks, stops and unmarks there
    (act/shadow.py): what it says it would do is what a live run does.
    With ``records`` (act/marks.py), a mark tag counts only when costguard's record of writing it matches: any
    other is decided as no mark, and the live marks made here are recorded there. With ``arming``
    (act/arming.py), a finding armed by an owner's tag acts only when the tag is as costguard first saw it. With
    ``ledger``, the stops made are written, and returns closed (close_returns)."""
    marks: dict[str, Shadow] = {}
    close_returns(findings, ledger)
    findings = with_evidence_vouched(findings, policy, now, shadow, records, arming)
    if shadow is not None and policy.may_dry_run:
        findings, marks = with_shadow_marks(findings, shadow, now, policy if policy.graded else None)
    stopped = frozenset(key for key, mark in marks.items() if mark.stopped is not None)
    findings = with_stop_blockers(findings, policy, now, remediator, stopped)
    report = Report(findings=findings)
    gated: list[tuple[Notice, str | None]] = []  # in decision order; None: always told
    windows: dict[str, timedelta] = {}
    for decision in decide_all(findings, policy, now, stopped):
        outcome = execute(decision, remediator, limiter, shadow, records, ledger)
        report.decisions.append(decision)
        report.outcomes.append(outcome)
        if decision.action is Action.NONE:
            continue  # waiting out a grace period: the mark message already said so
        notice = Notice(
            decision=_as_told(decision, marks), outcome=outcome, protect_tag_key=policy.protect_tag_key
        )
        key = _repeat_key(decision, outcome, now)
        if key is None:
            report.suppressed.append(decision)  # kept running by a person: told when they clicked
            continue
        # A failed (but not refused) action is always reported; a repeat of the same news is not.
        always = outcome.error is not None and not outcome.refused and not outcome.capped
        if decision.finding.folded and not always and not outcome.capped:
            report.suppressed.append(decision)  # said in the message it belongs to
            continue
        gated.append((notice, None if always else key))
        if not always:
            windows[key] = ONCE_WINDOW if decision.reason in ALERT_ONCE else repeat_window
    # One read of the run's sightings; a write only for news or an episode end that must move.
    seen = _sightings(gate, windows, now)
    due: list[Notice] = []
    for notice, gate_key in gated:
        # A key twice in one run (the same resource, reason and action) is told once: its later ones repeat.
        sighting = Sighting.NEW if gate_key is None else seen.pop(gate_key, Sighting.REPEAT)
        if sighting is Sighting.NEW:
            report.notices.append(notice)
        elif sighting is Sighting.DIGEST:
            due.append(notice)
        else:
            report.suppressed.append(notice.decision)
    if mutes is not None and (report.notices or due):
        report.notices, due = _unmuted(report, due, mutes, now)
    report.digest = due
    outgoing = by_route(report.notices, routing_tag_key=routing_tag_key, source=source, above=group_above)
    if due:
        outgoing += by_route(due, routing_tag_key=routing_tag_key, digest=True, source=source)
    _log_groups(outgoing, report.notices, due, routing_tag_key)
    queue.send(outgoing)
    return report


def _log_told(notices: Sequence[Notice]) -> None:
    """A line per finding told (news, not a repeat): what the dashboard counts by reason (template.yaml)."""
    for notice in notices:
        decision = notice.decision
        logger.info(
            "finding told",
            extra={
                "reason": decision.reason.value,
                "action": decision.action.value,
                "resource_kind": decision.resource.kind.value,
                "dry_run": decision.dry_run,
            },
        )


def _as_told(decision: Decision, marks: dict[str, Shadow]) -> Decision:
    """The decision as its message shows it: a dry run's resource without the shadow mark among its tags, which
    the resource does not carry."""
    tags = shown_tags(decision.resource.tags, marks.get(decision.resource.key)) if decision.dry_run else None
    if tags is None:
        return decision
    shown = decision.resource.model_copy(update={"tags": tags})
    return decision.model_copy(update={"finding": decision.finding.model_copy(update={"resource": shown})})


def _repeat_key(decision: Decision, outcome: Outcome, now: datetime) -> str | None:
    """The repeat gate's key of a decision's notice: the same resource, reason and action (and what else makes
    it other news); None for a notification someone asked not to get (a snooze not yet over)."""
    if decision.dry_run and decision.action is Action.STOP:
        # A dry run's stop is news once for the resource, whatever finding it is decided for: a live run stops it
        # once, and the one a dry run leaves running is decided on again at every run (act/shadow.py).
        key = f"{decision.resource.key}|{decision.action}"
    else:
        key = f"{decision.resource.key}|{decision.reason}|{decision.action}"
        if decision.finding.repeat_scope:
            key += f"|{decision.finding.repeat_scope}"
    if snooze := decision.resource.tags.get(SNOOZE_TAG_KEY):
        if snoozed_until(decision.resource.tags, now) is not None and decision.action is Action.NOTIFY:
            return None
        key += f"|after-snooze:{snooze[:64]}"  # the snooze is over: what follows is news again
    if outcome.refused:
        # A refusal AWS repeats on every try (stop protection, an IAM deny) is a known blocker: the same
        # refusal of the same resource is news once per episode, not at every sweep.
        key += f"|refused:{outcome.refused}"
    elif outcome.capped:
        key += "|capped"  # held back by the cap: said once, and again if it is still held a day later
    return key


def _unmuted(
    report: Report, due: list[Notice], mutes: MuteReader, now: datetime
) -> tuple[list[Notice], list[Notice]]:
    """What is about to be told, less what someone muted from Slack (a failed action is told all the same)."""
    pairs = [(n.decision.resource.key, n.decision.reason.value) for n in [*report.notices, *due]]
    try:
        silenced = mutes.muted(pairs, now)
    except Exception:  # the state table is unreachable: a muted message beats a lost one
        logger.warning("mutes unavailable: telling anyway")
        return report.notices, due
    if not silenced:
        return report.notices, due

    def keep(notice: Notice) -> bool:
        failed = notice.outcome.error is not None and not notice.outcome.refused
        if failed or (notice.decision.resource.key, notice.decision.reason.value) not in silenced:
            return True
        report.suppressed.append(notice.decision)
        return False

    return [n for n in report.notices if keep(n)], [n for n in due if keep(n)]


def _log_groups(
    outgoing: Sequence[AnyNotice], news: Sequence[Notice], due: Sequence[Notice], routing_tag_key: str
) -> None:
    """Every row of a group, one log line each under the group's id: the full list its message links to; and a
    line per finding told (_log_told)."""
    _log_told(news)
    for sent in outgoing:
        if not isinstance(sent, GroupNotice) or sent.count <= ROWS_SHOWN:
            continue
        route = sent.route_tags.get(routing_tag_key, "")
        kind = kind_of(sent)
        for notice in due if sent.digest else news:
            if notice.decision.resource.tags.get(routing_tag_key, "") != route or stands_alone(notice):
                continue
            if kind is not None and notice.decision.resource.kind is not kind:
                continue  # another kind's group (a group is of one kind)
            decision = notice.decision
            logger.info(
                "grouped notice",
                extra={
                    "group": sent.log_id,
                    "digest": sent.digest,
                    "resource": decision.resource.key,
                    "reason": decision.reason.value,
                    "action": decision.action.value,
                    "dry_run": decision.dry_run,
                    "hourly_usd": decision.hourly_usd,
                    "note": decision.note[:300],
                },
            )
