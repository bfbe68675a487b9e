"""AWS Batch job state-change events (the detail mirrors DescribeJobs' JobDetail)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from costguard.events.common import AwsTime
from costguard.events.envelope import EventBridgeModel

BATCH_JOB_DETAIL_TYPE = "Batch Job State Change"

BatchStatus = Literal["SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING", "SUCCEEDED", "FAILED"]


class AttemptContainer(BaseModel):
    model_config = ConfigDict(extra="allow")

    containerInstanceArn: str | None = None
    taskArn: str | None = None
    exitCode: int | None = None
    reason: str | None = None
    logStreamName: str | None = None


class Attempt(BaseModel):
    """One run of the job; Batch lists every attempt that reached a host."""

    model_config = ConfigDict(extra="allow")

    container: AttemptContainer | None = None
    startedAt: AwsTime | None = None
    stoppedAt: AwsTime | None = None
    statusReason: str | None = None


class RetryStrategy(BaseModel):
    model_config = ConfigDict(extra="allow")

    attempts: int | None = Field(default=None, ge=1, le=10)


class JobContainer(BaseModel):
    model_config = ConfigDict(extra="allow")

    image: str | None = None
    # ContainerDetail.instanceType: the host's type where Batch reports it (EC2 compute, multi-node jobs);
    # Fargate jobs have none, and then the attempts' cost is unknown.
    instanceType: str | None = None
    containerInstanceArn: str | None = None
    exitCode: int | None = None
    reason: str | None = None


class BatchJobDetail(BaseModel):
    model_config = ConfigDict(extra="allow")

    jobName: str = Field(min_length=1, max_length=128)
    jobId: str = Field(min_length=1)
    jobArn: str | None = None
    jobQueue: str = Field(min_length=1)
    status: BatchStatus
    statusReason: str | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    retryStrategy: RetryStrategy | None = None
    jobDefinition: str | None = None
    container: JobContainer | None = None
    createdAt: AwsTime | None = None
    startedAt: AwsTime | None = None
    stoppedAt: AwsTime | None = None
    tags: dict[str, str] = Field(default_factory=dict)

    @property
    def queue_name(self) -> str:
        """``arn:aws:batch:<region>:<account>:job-queue/<name>`` or a bare name."""
        return self.jobQueue.rsplit("job-queue/", 1)[-1]


class BatchJobStateChange(EventBridgeModel):
    detail_type: Literal["Batch Job State Change"] = Field(alias="detail-type")
    source: Literal["aws.batch"]
    detail: BatchJobDetail
