"""EventBridge scheduled events (the sweeps and the reconcile)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from costguard.events.envelope import EventBridgeModel

SCHEDULED_DETAIL_TYPE = "Scheduled Event"


class ScheduledEvent(EventBridgeModel):
    detail_type: Literal["Scheduled Event"] = Field(alias="detail-type")
    source: Literal["aws.events", "aws.scheduler"]
    detail: dict[str, Any] = Field(default_factory=dict)

    @property
    def rule_name(self) -> str | None:
        """The rule (or schedule) that fired, from its ARN in ``resources``."""
        for arn in self.resources:
            if ":rule/" in arn or ":schedule/" in arn:
                return arn.rsplit("/", 1)[-1]
        return None
