"""EC2 capacity events: Capacity Block delivery and expiration, and future-dated reservation state changes."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from costguard.events.common import AwsTime
from costguard.events.envelope import EventBridgeModel

# Current docs say "Capacity Block Delivered" / "Capacity Block Expiration Warning"; older revisions said
# "Capacity Block Reservation ...": both are matched by this prefix (the template rule uses it too).
CAPACITY_BLOCK_PREFIX = "Capacity Block"
RESERVATION_STATE_PREFIX = "EC2 Capacity Reservation "
# Named one by one: "EC2 Capacity Reservation Instance Interruption Warning" shares the prefix and is not ours.
RESERVATION_STATE_DETAIL_TYPES = (
    "EC2 Capacity Reservation Scheduled",
    "EC2 Capacity Reservation Active",
    "EC2 Capacity Reservation Delayed",
    "EC2 Capacity Reservation Unsupported",
    "EC2 Capacity Reservation Failed",
    "EC2 Capacity Reservation Expired",
    "EC2 Capacity Reservation Cancelled",
)


class CapacityBlockDetail(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    capacity_reservation_id: str = Field(alias="capacity-reservation-id", pattern=r"^cr-[0-9a-zA-Z]+$")
    end_date: AwsTime | None = Field(default=None, alias="end-date")


class CapacityBlockEvent(EventBridgeModel):
    """A Capacity Block was delivered (it is active and billing) or ends in 40 minutes."""

    detail_type: str = Field(
        alias="detail-type", pattern=r"^Capacity Block .*(Delivered|Expiration Warning)$"
    )
    source: Literal["aws.ec2"]
    detail: CapacityBlockDetail

    @property
    def is_expiration_warning(self) -> bool:
        return self.detail_type.endswith("Expiration Warning")

    @property
    def reservation_id(self) -> str:
        return self.detail.capacity_reservation_id

    @property
    def end(self) -> datetime | None:
        return self.detail.end_date


class ReservationStateDetail(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    capacity_reservation_id: str = Field(alias="capacity-reservation-id", pattern=r"^cr-[0-9a-zA-Z]+$")
    state: str | None = None


class ReservationStateChange(EventBridgeModel):
    """A future-dated capacity reservation changed state; the state is in the detail-type."""

    detail_type: Literal[
        "EC2 Capacity Reservation Scheduled",
        "EC2 Capacity Reservation Active",
        "EC2 Capacity Reservation Delayed",
        "EC2 Capacity Reservation Unsupported",
        "EC2 Capacity Reservation Failed",
        "EC2 Capacity Reservation Expired",
        "EC2 Capacity Reservation Cancelled",
    ] = Field(alias="detail-type")
    source: Literal["aws.ec2"]
    detail: ReservationStateDetail

    @property
    def state(self) -> str:
        """scheduled, active, delayed, unsupported, failed, expired or cancelled."""
        return self.detail_type.removeprefix(RESERVATION_STATE_PREFIX).lower()

    @property
    def reservation_id(self) -> str:
        return self.detail.capacity_reservation_id
