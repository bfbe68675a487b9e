"""EC2 instance state-change events."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from costguard.events.envelope import EventBridgeModel

INSTANCE_STATE_DETAIL_TYPE = "EC2 Instance State-change Notification"


class InstanceStateDetail(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    instance_id: str = Field(alias="instance-id", pattern=r"^i-[0-9a-f]{8,17}$")
    state: Literal["pending", "running", "stopping", "stopped", "shutting-down", "terminated"]


class InstanceStateChange(EventBridgeModel):
    detail_type: Literal["EC2 Instance State-change Notification"] = Field(alias="detail-type")
    source: Literal["aws.ec2"]
    detail: InstanceStateDetail


SPOT_INTERRUPTION_DETAIL_TYPE = "EC2 Spot Instance Interruption Warning"


class SpotInterruptionDetail(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    instance_id: str = Field(alias="instance-id", pattern=r"^i-[0-9a-f]{8,17}$")
    instance_action: Literal["terminate", "stop", "hibernate"] = Field(alias="instance-action")


class SpotInterruptionWarning(EventBridgeModel):
    """Sent two minutes before EC2 reclaims a spot instance."""

    detail_type: Literal["EC2 Spot Instance Interruption Warning"] = Field(alias="detail-type")
    source: Literal["aws.ec2"]
    detail: SpotInterruptionDetail
