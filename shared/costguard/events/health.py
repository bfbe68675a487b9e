"""AWS Health events: EC2 On-Demand Capacity Reservation underutilization."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from costguard.events.envelope import EventBridgeModel

HEALTH_DETAIL_TYPE = "AWS Health Event"
ODCR_UNDERUTILIZATION_CODES = (
    "AWS_EC2_ODCR_UNDERUTILIZATION_NOTIFICATION",
    "AWS_EC2_ODCR_UNDERUTILIZATION_NOTIFICATION_SUMMARY",
)


class AffectedEntity(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    entity_value: str = Field(alias="entityValue", min_length=1)


class OdcrUnderutilizationDetail(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    event_type_code: Literal[
        "AWS_EC2_ODCR_UNDERUTILIZATION_NOTIFICATION", "AWS_EC2_ODCR_UNDERUTILIZATION_NOTIFICATION_SUMMARY"
    ] = Field(alias="eventTypeCode")
    affected_entities: list[AffectedEntity] = Field(default_factory=list, alias="affectedEntities")


class OdcrUnderutilization(EventBridgeModel):
    """One reservation (NOTIFICATION) or several (SUMMARY, entries "cr-id | AZ | type | platform | util%")."""

    detail_type: Literal["AWS Health Event"] = Field(alias="detail-type")
    source: Literal["aws.health"]
    detail: OdcrUnderutilizationDetail

    @property
    def entries(self) -> list[str]:
        """The affected reservations as AWS wrote them: entities first, else the event's resources."""
        found = [e.entity_value for e in self.detail.affected_entities] or list(self.resources)
        return list(dict.fromkeys(found))
