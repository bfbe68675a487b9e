"""What the audit's steps share: where an item's files live in the audit bucket (``runs/<run>/<account>/<region>/``),
and the subjects Discover wrote there."""

from __future__ import annotations

from costguard.audit import store
from costguard.audit.model import Subject
from costguard.audit.steps import RegionTask


def prefix(run: str, region: str, account: str | None = None) -> str:
    return f"runs/{run}/{account}/{region}" if account else f"runs/{run}/{region}"


def task_prefix(step: RegionTask) -> str:
    return prefix(step.run, step.region, step.account)


def subjects_of(bucket: str, step: RegionTask) -> list[Subject]:
    """The item's subjects, as its Discover step wrote them."""
    return [Subject.model_validate(s) for s in store.get_json(bucket, f"{task_prefix(step)}/subjects.json")]
