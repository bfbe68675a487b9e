"""SageMaker job state-change events (the detail mirrors DescribeTrainingJob)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from costguard.events.common import AwsTime
from costguard.events.envelope import EventBridgeModel

TRAINING_JOB_DETAIL_TYPE = "SageMaker Training Job State Change"


class JobResourceConfig(BaseModel):
    model_config = ConfigDict(extra="allow")

    InstanceType: str | None = None
    InstanceCount: int = Field(default=1, ge=0)


class JobStoppingCondition(BaseModel):
    model_config = ConfigDict(extra="allow")

    MaxRuntimeInSeconds: int | None = None
    MaxWaitTimeInSeconds: int | None = None


class JobCheckpointConfig(BaseModel):
    model_config = ConfigDict(extra="allow")

    S3Uri: str | None = None
    LocalPath: str | None = None


class JobMetricDefinition(BaseModel):
    """A metric the algorithm writes to its log; SageMaker publishes its values to CloudWatch under this name."""

    model_config = ConfigDict(extra="allow")

    Name: str = Field(min_length=1, max_length=255)
    Regex: str | None = None


class JobS3DataSource(BaseModel):
    model_config = ConfigDict(extra="allow")

    S3Uri: str | None = None
    S3DataType: str | None = None  # S3Prefix, ManifestFile, AugmentedManifestFile
    S3DataDistributionType: str | None = None  # FullyReplicated (each host reads it all) or ShardedByS3Key


class JobDataSource(BaseModel):
    model_config = ConfigDict(extra="allow")

    S3DataSource: JobS3DataSource | None = None  # None: a file system (FSx, EFS) channel


class JobChannel(BaseModel):
    """One of InputDataConfig's channels."""

    model_config = ConfigDict(extra="allow")

    ChannelName: str | None = None
    DataSource: JobDataSource | None = None
    InputMode: str | None = None  # File, Pipe or FastFile; unset: the algorithm's TrainingInputMode


class JobAlgorithmSpecification(BaseModel):
    model_config = ConfigDict(extra="allow")

    TrainingImage: str | None = None
    AlgorithmName: str | None = None
    TrainingInputMode: str | None = None
    MetricDefinitions: list[JobMetricDefinition] = Field(default_factory=list, max_length=40)


class TrainingJobDetail(BaseModel):
    model_config = ConfigDict(extra="allow")

    TrainingJobName: str = Field(min_length=1, max_length=63)
    TrainingJobArn: str | None = None
    TrainingJobStatus: Literal["InProgress", "Completed", "Failed", "Stopping", "Stopped"]
    SecondaryStatus: str | None = None
    FailureReason: str | None = None
    AlgorithmSpecification: JobAlgorithmSpecification | None = None
    RoleArn: str | None = None
    InputDataConfig: list[JobChannel] = Field(default_factory=list, max_length=20)
    ResourceConfig: JobResourceConfig | None = None
    StoppingCondition: JobStoppingCondition | None = None
    EnableManagedSpotTraining: bool = False
    CheckpointConfig: JobCheckpointConfig | None = None
    CreationTime: AwsTime | None = None
    TrainingStartTime: AwsTime | None = None
    TrainingEndTime: AwsTime | None = None
    LastModifiedTime: AwsTime | None = None
    TrainingTimeInSeconds: int | None = Field(default=None, ge=0)
    BillableTimeInSeconds: int | None = Field(default=None, ge=0)
    Tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("Tags", mode="before")
    @classmethod
    def _tags_as_map(cls, value: Any) -> Any:
        # Events carry a map; DescribeTrainingJob-style lists of {Key, Value} are accepted too.
        if isinstance(value, list):
            return {item["Key"]: item["Value"] for item in value}
        return value


class TrainingJobStateChange(EventBridgeModel):
    detail_type: Literal["SageMaker Training Job State Change"] = Field(alias="detail-type")
    source: Literal["aws.sagemaker"]
    detail: TrainingJobDetail
