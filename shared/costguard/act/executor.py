"""The one place where costguard changes a resource."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from aws_lambda_powertools import Logger
from pydantic import BaseModel, ConfigDict

from costguard.model import Action, Decision, Resource

logger = Logger(child=True)


class Remediator(Protocol):
    """The final API calls, one per action, per resource kind."""

    def stop(self, resource: Resource) -> None: ...

    def mark(self, resource: Resource, at: datetime) -> None: ...


class Outcome(BaseModel):
    """What happened to a decision when it was carried out."""

    model_config = ConfigDict(frozen=True)

    done: bool
    detail: str
    error: str | None = None


def execute(decision: Decision, remediator: Remediator) -> Outcome:
    """Carry a decision out; a dry run walks the same path and stops just short of the API call."""
    resource = decision.resource
    if decision.action in (Action.NONE, Action.NOTIFY):
        return Outcome(done=False, detail="no change to the resource")
    verb = "stop" if decision.action is Action.STOP else "mark"
    # Recorded before acting, so no resource is ever changed without its decision in the log.
    logger.info("executing decision", extra={"decision": decision.summary(), "verb": verb})
    if decision.dry_run:
        return Outcome(done=False, detail=f"dry run: would {verb} {resource.display_name}")
    try:
        if decision.action is Action.STOP:
            remediator.stop(resource)
        else:
            remediator.mark(resource, decision.decided_at)
    except Exception as error:  # reported in the alert, never swallowed silently
        logger.exception("remediation failed", extra={"decision_id": decision.id})
        return Outcome(done=False, detail=f"failed to {verb} {resource.display_name}", error=str(error)[:500])
    return Outcome(done=True, detail=f"{'stopped' if verb == 'stop' else 'marked'} {resource.display_name}")
