"""The payloads the audit state machine passes between its Lambda tasks (small: the data lives in S3)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from costguard.entry import reject


class _Step(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


ACCOUNT_PATTERN = r"^[0-9]{12}$"
REGION_PATTERN = r"^[a-z]{2}(-[a-z]+)+-\d+$"


class PlanInput(_Step):
    """The execution's input and context: every field may be left out."""

    execution: str = Field(min_length=1, max_length=80)
    started: datetime
    input: dict[str, Any] = Field(default_factory=dict)
    state_machine: str | None = Field(default=None, description="$$.StateMachine.Id: the hub's account")


class AuditItem(_Step):
    """One (account, region) the audit covers: an item of the Map, as Plan lists it."""

    account: str = Field(pattern=ACCOUNT_PATTERN)
    region: str = Field(pattern=REGION_PATTERN)
    account_name: str | None = Field(default=None, max_length=200)


class RegionTask(_Step):
    """One (account, region) item of the Map: what Discover, ReadMetrics and Evaluate take and hand on.
    ``account`` None: an item of an execution started before the audit iterated accounts (the hub's own)."""

    run: str = Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.:-]+$")
    now: datetime
    region: str = Field(pattern=REGION_PATTERN)
    account: str | None = Field(default=None, pattern=ACCOUNT_PATTERN)
    account_name: str | None = Field(default=None, max_length=200)
    subjects: int = 0


class RegionOutcome(_Step):
    """What an (account, region) branch ends with: its result's key, or the error a Catch recorded."""

    region: str
    account: str | None = None
    account_name: str | None = None
    status: Literal["ok", "failed"] = "failed"
    result_key: str | None = None
    # A small result (an account-region with little or nothing in it: most of an organization's) travels in the
    # outcome itself, so the report need not read one object per item.
    result: dict[str, Any] | None = None
    error: str | None = None
    cause: str | None = None


class MapResults(_Step):
    """Where the Distributed Map's ResultWriter left its children's outcomes: the manifest's bucket and key."""

    bucket: str = Field(validation_alias="Bucket", min_length=3)
    key: str = Field(validation_alias="Key", min_length=1)


class ReportInput(_Step):
    """The run, its moment and its items' outcomes: in S3 behind the Map's manifest (``results``), or inline
    (``regions``, an execution started before the Map wrote its outcomes to S3)."""

    run: str = Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.:-]+$")
    now: datetime
    regions: list[RegionOutcome] = Field(default_factory=list)
    results: MapResults | None = None


M = TypeVar("M", bound=_Step)


class MalformedStepInput(ValueError):
    """A task's input did not validate: it was logged, counted and kept, and the task fails on it."""


def step_input(event: Any, model: type[M], *, function: str) -> M:
    """The task's typed input; a malformed one is kept (failed-events queue) and fails the task, so the state
    machine's Catch names it in the report."""
    try:
        return model.model_validate(event)
    except ValidationError as error:
        reject(event, error, function=function)
        raise MalformedStepInput(f"{function}: malformed input: {error}") from None
