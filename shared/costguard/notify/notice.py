"""A Notice is what travels from a detector to the notifier over SQS: a decision and its outcome."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, computed_field

from costguard.act.executor import Outcome
from costguard.model import Decision


class Notice(BaseModel):
    model_config = ConfigDict(frozen=True)

    decision: Decision
    outcome: Outcome
    protect_tag_key: str = "costguard:protect"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def id(self) -> str:
        return self.decision.id
