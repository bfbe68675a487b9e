"""SageMaker HyperPod events: cluster state changes, cluster events and node health events.

Shapes from AWS's examples (events/SOURCES.md). Fields costguard does not read are kept (extra="allow").
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from costguard.events.common import AwsTime
from costguard.events.envelope import EventBridgeModel

CLUSTER_STATE_DETAIL_TYPE = "SageMaker HyperPod Cluster State Change"
CLUSTER_EVENT_DETAIL_TYPE = "SageMaker HyperPod Cluster Event"
NODE_HEALTH_DETAIL_TYPE = "SageMaker HyperPod Cluster Node Health Event"


class InstanceGroup(BaseModel):
    model_config = ConfigDict(extra="allow")

    InstanceGroupName: str = Field(min_length=1, max_length=63)
    InstanceType: str | None = None
    CurrentCount: int = Field(default=0, ge=0)
    TargetCount: int = Field(default=0, ge=0)
    Status: str | None = None


class ClusterStateDetail(BaseModel):
    model_config = ConfigDict(extra="allow")

    ClusterName: str = Field(min_length=1, max_length=63)
    ClusterArn: str | None = None
    ClusterStatus: str  # Creating | Deleting | Failed | InService | RollingBack | SystemUpdating | Updating
    CreationTime: AwsTime | None = None
    FailureMessage: str | None = None
    InstanceGroups: list[InstanceGroup] = Field(default_factory=list, max_length=100)
    Tags: dict[str, str] = Field(default_factory=dict)


class ClusterStateChange(EventBridgeModel):
    detail_type: Literal["SageMaker HyperPod Cluster State Change"] = Field(alias="detail-type")
    source: Literal["aws.sagemaker"]
    detail: ClusterStateDetail


class ClusterEventRecord(BaseModel):
    model_config = ConfigDict(extra="allow")

    EventId: str
    ClusterName: str = Field(min_length=1, max_length=63)
    ClusterArn: str | None = None
    InstanceGroupName: str | None = None
    InstanceId: str | None = None
    ResourceType: Literal["Cluster", "InstanceGroup", "Instance"]
    EventTime: AwsTime | None = None
    EventLevel: str | None = None  # Info | Warn | Error
    Description: str | None = None
    EventDetails: dict[str, object] = Field(default_factory=dict)

    @property
    def failure_message(self) -> str | None:
        """EventMetadata.<ResourceType>.FailureMessage, when the event carries one."""
        metadata = self.EventDetails.get("EventMetadata")
        scoped = metadata.get(self.ResourceType) if isinstance(metadata, dict) else None
        message = scoped.get("FailureMessage") if isinstance(scoped, dict) else None
        return message if isinstance(message, str) and message else None


class ClusterEventDetail(BaseModel):
    model_config = ConfigDict(extra="allow")

    EventDetails: ClusterEventRecord


class ClusterEvent(EventBridgeModel):
    detail_type: Literal["SageMaker HyperPod Cluster Event"] = Field(alias="detail-type")
    source: Literal["aws.sagemaker"]
    detail: ClusterEventDetail


class HealthSummary(BaseModel):
    model_config = ConfigDict(extra="allow")

    HealthStatus: str  # Healthy | Unhealthy | ...
    HealthStatusReason: str | None = None
    RepairAction: str | None = None  # None | Reboot | Replace
    Recommendation: str | None = None


class NodeHealthDetail(BaseModel):
    model_config = ConfigDict(extra="allow")

    ClusterName: str = Field(min_length=1, max_length=63)
    ClusterArn: str | None = None
    InstanceId: str = Field(min_length=1)
    Tags: dict[str, str] = Field(default_factory=dict)
    HealthSummary: HealthSummary


class NodeHealthEvent(EventBridgeModel):
    detail_type: Literal["SageMaker HyperPod Cluster Node Health Event"] = Field(alias="detail-type")
    source: Literal["aws.sagemaker"]
    detail: NodeHealthDetail
