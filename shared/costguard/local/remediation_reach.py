"""What the deployed Mode, ReasonModes and RemediateScope let costguard act on, a sentence each (`costguard
doctor`). Pure: the parsers are the policy's own, so a value they refuse is one the functions refuse at start-up."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from costguard.model import Reason
from costguard.policy import Policy, TagClause, TagScope, parse_reason_modes, parse_scope

# The reasons whose decisions act in remediate, and what each does (docs/reasons.md, "What costguard does"); every
# other reason only ever reports. Some act only where the resource's owner opted in, as said.
ACTS: dict[Reason, str] = {
    Reason.GPU_IDLE: "stops idle GPU instances",
    Reason.NOTEBOOK_IDLE: "stops idle GPU notebooks",
    Reason.JOB_STALLED: "stops stalled training jobs",
    Reason.JOB_COST_CEILING: "stops training jobs over their cost ceiling",
    Reason.JOB_FAILURE_LOOP: "stops the idle jobs of a declared family that keeps failing",
    Reason.TRAINING_DIVERGED: "stops diverged jobs tagged costguard:stop-on-divergence=true",
    Reason.JOB_HUNG: "stops hung jobs tagged costguard:stop-on-hang=true",
    Reason.CAPACITY_RESERVATION_IDLE: "cancels idle reservations tagged costguard:auto-cancel=true",
    Reason.BEDROCK_THROUGHPUT_IDLE: "deletes idle throughputs tagged costguard:auto-delete=true",
    Reason.POD_GPU_IDLE: "scales idle workloads labelled costguard.io/scale-to-zero=true to zero",
    Reason.BUDGET_BREACH: "stops what a breached budget's escalation names, where its own reason is in remediate too",
}

REASON_MODES_FIX = (
    "Set ReasonModes to comma-separated <reason code>=<notify|remediate> entries (the codes are in "
    'docs/reasons.md), e.g. ReasonModes="gpu_idle=remediate,job_stalled=remediate" in samconfig.toml\'s '
    'parameter_overrides, or ReasonModes="" for every reason to follow Mode, and deploy again (`sam deploy`).'
)
SCOPE_FIX = (
    "Set RemediateScope to comma-separated <tag key>=<value>[|<value>...] or <tag key>!=<value>[|...] clauses, "
    'e.g. RemediateScope="team!=research" or "team=vision|nlp" in samconfig.toml\'s parameter_overrides, or '
    'RemediateScope="" for every resource, and deploy again (`sam deploy`).'
)


def acting_reasons(mode: str, reason_modes: str) -> list[Reason]:
    """The reasons that act (ACTS) in remediate under this Mode and ReasonModes. Raises PolicyError."""
    policy = Policy(dry_run=mode != "remediate", modes=parse_reason_modes(reason_modes))
    return [reason for reason in ACTS if policy.remediates(reason)]


def reasons_sentence(mode: str, reason_modes: str) -> str:
    """Which reasons would stop resources, and which only report. Raises PolicyError."""
    acting = acting_reasons(mode, reason_modes)
    named = f"ReasonModes={reason_modes}" if reason_modes.strip() else "no ReasonModes"
    if not acting:
        return f"Mode={mode} with {named}: no reason stops anything, every finding is only reported"
    does = "; ".join(f"{reason.value} {ACTS[reason]}" for reason in acting)
    reported = [reason.value for reason in ACTS if reason not in acting]
    rest = f"; reported only: {', '.join(reported)}" if reported else ""
    return f"Mode={mode} with {named}: in remediate, after the grace period, {does}{rest}"


def scope_sentence(remediate_scope: str, tags_read: Sequence[Mapping[str, str]]) -> str:
    """Which teams (tag values) are out of scope, by the rule and among the resources read. Raises PolicyError."""
    scope = parse_scope(remediate_scope)
    if scope is None:
        return "empty: every resource is in scope, no team is left out"
    rule = ", and ".join(_clause_words(clause) for clause in scope.clauses)
    outside = Counter(_outside(scope, tags) for tags in tags_read if not scope.covers(tags))
    if outside:
        labels = ", ".join(f"{label} ({n})" for label, n in sorted(outside.items()))
        found = f"; of the {len(tags_read)} GPU resources read, {sum(outside.values())} are: {labels}"
    else:
        found = f"; none of the {len(tags_read)} GPU resources read is"
    return f"{scope.text}: {rule}, reported only and never stopped{found}"


def _clause_words(clause: TagClause) -> str:
    values = " or ".join(f"{clause.key}={value}" for value in sorted(clause.values))
    if clause.negated:
        return f"resources tagged {values} are out of scope"
    return f"resources not tagged {values} (or without a {clause.key} tag) are out of scope"


def _outside(scope: TagScope, tags: Mapping[str, str]) -> str:
    clause = next(c for c in scope.clauses if not c.holds(tags))
    value = tags.get(clause.key)
    return f"no {clause.key} tag" if value is None else f"{clause.key}={value}"
