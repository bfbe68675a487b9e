"""The one place where costguard changes a resource."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from aws_lambda_powertools import Logger
from pydantic import BaseModel, ConfigDict

from costguard.model import Action, Decision, Resource

logger = Logger(child=True)

_VERBS = {
    Action.STOP: ("stop", "stopped"),
    Action.MARK: ("mark", "marked"),
    Action.UNMARK: ("unmark", "unmarked"),
}


class Remediator(Protocol):
    """The final API calls, one per action, per resource kind."""

    def stop(self, resource: Resource) -> None: ...

    def mark(self, resource: Resource, at: datetime) -> None: ...

    def unmark(self, resource: Resource) -> None: ...


class StopLimiter(Protocol):
    """A cap on live stops over a period shared by every invocation (the per-hour cap)."""

    def acquire(self, at: datetime) -> bool: ...


class Outcome(BaseModel):
    """What happened to a decision when it was carried out."""

    model_config = ConfigDict(frozen=True)

    done: bool
    detail: str
    error: str | None = None
    capped: bool = False


def execute(decision: Decision, remediator: Remediator, limiter: StopLimiter | None = None) -> Outcome:
    """Carry a decision out; a dry run walks the same path and stops just short of the API call."""
    resource = decision.resource
    if decision.action not in _VERBS:
        return Outcome(done=False, detail="no change to the resource")
    verb, done = _VERBS[decision.action]
    # Recorded before acting, so no resource is ever changed without its decision in the log.
    logger.info("executing decision", extra={"decision": decision.summary(), "verb": verb})
    if decision.dry_run:
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
            remediator.mark(resource, decision.decided_at)
        else:
            remediator.unmark(resource)
    except Exception as error:  # reported in the alert, never swallowed silently
        logger.exception("remediation failed", extra={"decision_id": decision.id})
        return Outcome(done=False, detail=f"failed to {verb} {resource.display_name}", error=str(error)[:500])
    return Outcome(done=True, detail=f"{done} {resource.display_name}")
