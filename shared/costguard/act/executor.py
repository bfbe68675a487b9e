"""The one place where costguard changes a resource."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from costguard.ledger import WOULD
from costguard.model import Action, Decision, Reason, Resource
from costguard.observability import logger

if TYPE_CHECKING:
    from costguard.act.ledger_book import Ledger
    from costguard.act.marks import MarkRecords
    from costguard.act.shadow import ShadowMarks

_VERBS = {
    Action.STOP: ("stop", "stopped"),
    Action.MARK: ("mark", "marked"),
    Action.UNMARK: ("unmark", "unmarked"),
}

# Refusals AWS gives again on every try until someone changes the resource or costguard's permissions: known
# blockers, reported once per episode (pipeline.act_on) rather than at every sweep.
REFUSALS = {
    "OperationNotPermitted": "AWS does not allow it (OperationNotPermitted; for an EC2 stop: its stop "
    "protection, DisableApiStop, is on)",
    "UnsupportedOperation": "AWS does not support it for this resource (UnsupportedOperation)",
    "UnauthorizedOperation": "costguard's role is denied it (UnauthorizedOperation: an IAM policy, permissions "
    "boundary or SCP)",
    "AccessDenied": "costguard's role is denied it (AccessDenied: an IAM policy, permissions boundary or SCP)",
    "AccessDeniedException": "costguard's role is denied it (AccessDeniedException: an IAM policy, permissions "
    "boundary or SCP)",
}


class Remediator(Protocol):
    """The final API calls, one per action, per resource kind."""

    def stop(self, resource: Resource) -> None: ...

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        """Tag the resource with costguard's mark made at ``at``; ``reason`` (a reason code) says why, for a mark
        made for something other than idleness (model.mark_text), and is None for an idle one."""
        ...

    def unmark(self, resource: Resource) -> None: ...


@runtime_checkable
class StopBlockerReader(Protocol):
    """A remediator that can read, before a stop is decided, what AWS would refuse it for."""

    def stop_blocker(self, resource: Resource) -> str | None: ...


class StopLimiter(Protocol):
    """A cap on live stops over a period shared by every invocation (the per-hour cap)."""

    def acquire(self, at: datetime) -> bool: ...

    def release(self, at: datetime) -> None:
        """Give back a stop acquired at ``at`` that AWS refused: it stopped nothing."""
        ...


class Outcome(BaseModel):
    """What happened to a decision when it was carried out."""

    model_config = ConfigDict(frozen=True)

    done: bool
    detail: str
    error: str | None = None
    capped: bool = False
    refused: str | None = Field(
        default=None,
        description="The error code of a refusal AWS repeats on every try (REFUSALS): a known blocker",
    )


def execute(
    decision: Decision,
    remediator: Remediator,
    limiter: StopLimiter | None = None,
    shadow: ShadowMarks | None = None,
    records: MarkRecords | None = None,
    ledger: Ledger | None = None,
) -> Outcome:
    """Carry a decision out; a dry run walks the same path and stops just short of the API call, where it keeps
    the mark (or the stop, or the unmark) in ``shadow`` instead, when given (act/shadow.py). A live mark made is
    recorded in ``records``, and the record deleted when the mark ends (an unmark, a stop): act/marks.py. A stop
    made (or, a dry run, kept as a shadow stop) is written in ``ledger`` (act/ledger_book.py), and a dry run's
    unmark (the resource at work again) closes its would-be stop there."""
    resource = decision.resource
    if decision.action not in _VERBS:
        return Outcome(done=False, detail="no change to the resource")
    verb, done = _VERBS[decision.action]
    # Recorded before acting, so no resource is ever changed without its decision in the log.
    logger.info("executing decision", extra={"decision": decision.summary(), "verb": verb})
    if decision.dry_run:
        if shadow is not None:
            _keep_shadow(decision, shadow)
            if ledger is not None:
                _keep_ledger(decision, ledger)
        return Outcome(done=False, detail=f"dry run: would {verb} {resource.display_name}")
    if decision.action is Action.STOP and limiter is not None:
        try:
            allowed = limiter.acquire(decision.decided_at)
        except Exception as error:  # the cap cannot be counted (state table unreachable): no stop without it
            logger.exception("stop cap unavailable", extra={"decision_id": decision.id})
            return Outcome(
                done=False,
                detail=f"stop cap unavailable: {resource.display_name} not stopped",
                error=str(error)[:500],
            )
        if not allowed:
            logger.warning("hourly stop cap reached", extra={"decision_id": decision.id})
            return Outcome(
                done=False,
                detail=f"hourly stop cap reached: {resource.display_name} not stopped",
                capped=True,
            )
    try:
        if decision.action is Action.STOP:
            remediator.stop(resource)
        elif decision.action is Action.MARK:
            remediator.mark(resource, decision.decided_at, _mark_reason(decision))
        else:
            remediator.unmark(resource)
    except Exception as error:  # reported in the alert, never swallowed silently
        code = refusal_code(error)
        if code is None:
            logger.exception("remediation failed", extra={"decision_id": decision.id})
            return Outcome(
                done=False, detail=f"failed to {verb} {resource.display_name}", error=str(error)[:500]
            )
        # A refusal is an answer, not a fault: no traceback, and a refused stop stopped nothing, so it gives
        # its place under the hourly cap back (a resource refused at every sweep must not use up the cap).
        logger.warning("remediation refused", extra={"decision_id": decision.id, "code": code})
        if decision.action is Action.STOP and limiter is not None:
            _give_back(limiter, decision)
        return Outcome(
            done=False,
            detail=f"failed to {verb} {resource.display_name}: {REFUSALS[code]}",
            error=str(error)[:500],
            refused=code,
        )
    if records is not None:
        _keep_record(decision, records)
    if ledger is not None and decision.action is Action.STOP:
        _keep_ledger(decision, ledger)
    return Outcome(done=True, detail=f"{done} {resource.display_name}")


def _keep_record(decision: Decision, records: MarkRecords) -> None:
    """The record of a live mark, after the tag: not kept (the table unreachable), the next run finds a tag it
    cannot vouch for and marks afresh, with a new grace period: the safe side. Logged."""
    try:
        if decision.action is Action.MARK:
            records.mark(decision.resource, decision.decided_at, _mark_reason(decision))
        else:  # the mark ended: unmarked, or the resource stopped (a run after a restart is another run)
            records.unmark(decision.resource)
    except Exception:
        logger.warning(
            "mark record not kept",
            extra={"decision_id": decision.id, "action": decision.action.value},
            exc_info=True,
        )


def _keep_shadow(decision: Decision, shadow: ShadowMarks) -> None:
    """A dry run's final call: the state table, not the resource. Not kept (the table unreachable), the next run
    marks anew, as a dry run did before it kept marks: logged, and the notice goes out all the same."""
    resource = decision.resource
    try:
        if decision.action is Action.MARK:
            shadow.mark(resource, decision.decided_at, _mark_reason(decision))
        elif decision.action is Action.STOP:
            shadow.stop(resource, decision.decided_at)
        else:
            shadow.unmark(resource)
    except Exception:
        logger.warning(
            "shadow mark not kept",
            extra={"decision_id": decision.id, "action": decision.action.value},
            exc_info=True,
        )


def _keep_ledger(decision: Decision, ledger: Ledger) -> None:
    """A stop in the ledger (or a dry run's unmark closing its would-be stop): never fails the action. Logged."""
    try:
        if decision.action is Action.STOP:
            ledger.record(decision)
        elif decision.action is Action.UNMARK and decision.dry_run:
            ledger.returned(decision.resource.key, decision.decided_at, WOULD)
    except Exception:
        logger.warning(
            "ledger not kept",
            extra={"decision_id": decision.id, "action": decision.action.value},
            exc_info=True,
        )


def _mark_reason(decision: Decision) -> str | None:
    # A mark for something other than idleness says so (model.mark_text): see AwsRemediator.mark.
    return None if decision.reason is Reason.JOB_STALLED else decision.reason.value


def refusal_code(error: Exception) -> str | None:
    """The code of a refusal AWS will repeat (REFUSALS), or None for any other error."""
    # Loaded here: an AWS call's refusal comes after its client loaded botocore (notices import this module).
    from botocore.exceptions import ClientError

    if isinstance(error, ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
        return code if code in REFUSALS else None
    return None


def _give_back(limiter: StopLimiter, decision: Decision) -> None:
    try:
        limiter.release(decision.decided_at)
    except Exception:  # the cap then counts one stop too many this hour: safe side
        logger.warning("stop cap not given back", extra={"decision_id": decision.id})
