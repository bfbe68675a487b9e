"""The resource a button names, read afresh, and the two tags a person may set on it from Slack."""

from __future__ import annotations

from typing import Any

from costguard.aws import clients, inventory
from costguard.aws.sagemaker import account_of, tags_of
from costguard.detect.gpu import instance_resource
from costguard.model import Resource, ResourceKind
from costguard.notify.values import ResourceKey
from costguard.permissions import needs

# What a button may act on: what costguard itself may stop.
ACTABLE = frozenset({ResourceKind.EC2_INSTANCE, ResourceKind.NOTEBOOK, ResourceKind.TRAINING_JOB})

READ_PERMISSIONS = inventory.PERMISSIONS | needs(
    "sagemaker:DescribeNotebookInstance", "sagemaker:DescribeTrainingJob", "sagemaker:ListTags"
)
TAG_PERMISSIONS = needs("ec2:CreateTags", "sagemaker:AddTags")  # set_tag: the snooze and protect keys only


class NotActable(ValueError):
    """A kind of resource buttons do not act on, or one that is gone."""


def read(key: ResourceKey) -> Resource:
    """The resource as it is now (its tags above all): DescribeInstances, or DescribeNotebookInstance /
    DescribeTrainingJob and ListTags."""
    if key.kind not in ACTABLE:
        raise NotActable(f"costguard does not act on a {key.kind.replace('_', ' ')} from Slack")
    if key.kind is ResourceKind.EC2_INSTANCE:
        instance = inventory.describe_instance(key.region, key.id)
        if instance is None or instance.state in ("terminated", "shutting-down"):
            raise NotActable(f"instance {key.id} no longer exists")
        return instance_resource(instance).model_copy(update={"account": instance.account or key.account})
    sagemaker = clients.sagemaker(key.region)
    instance_type: str | None
    try:
        if key.kind is ResourceKind.NOTEBOOK:
            notebook = sagemaker.describe_notebook_instance(NotebookInstanceName=key.id)
            arn, instance_type, count = (
                notebook["NotebookInstanceArn"],
                str(notebook.get("InstanceType") or ""),
                1,
            )
        else:
            job = sagemaker.describe_training_job(TrainingJobName=key.id)
            arn = job["TrainingJobArn"]
            config: dict[str, Any] = dict(job.get("ResourceConfig") or {})
            instance_type, count = config.get("InstanceType"), int(config.get("InstanceCount") or 1)
    except sagemaker.exceptions.ClientError as error:
        if error.response["Error"]["Code"] in ("ValidationException", "ResourceNotFound"):
            raise NotActable(f"{key.kind.replace('_', ' ')} {key.id} no longer exists") from None
        raise
    return Resource(
        kind=key.kind,
        id=key.id,
        name=key.id,
        arn=arn,
        account=account_of(arn),
        region=key.region,
        instance_type=instance_type,
        instance_count=count,
        tags=tags_of(sagemaker, arn),
    )


def described(key: ResourceKey) -> Resource:
    """A resource as its button names it, with nothing read (a mute of a budget, an anomaly or a reservation:
    muting changes nothing on the resource itself)."""
    return Resource(kind=key.kind, id=key.id, name=key.id, account=key.account, region=key.region)


def set_tag(resource: Resource, key: str, value: str) -> None:
    """One tag on the resource (EC2 CreateTags, SageMaker AddTags)."""
    if resource.kind is ResourceKind.EC2_INSTANCE:
        clients.ec2(resource.region, resource.account).create_tags(
            Resources=[resource.id], Tags=[{"Key": key, "Value": value}]
        )
    elif resource.arn and resource.kind in (ResourceKind.NOTEBOOK, ResourceKind.TRAINING_JOB):
        clients.sagemaker(resource.region, resource.account).add_tags(
            ResourceArn=resource.arn, Tags=[{"Key": key, "Value": value}]
        )
    else:
        raise NotActable(f"costguard cannot tag {resource.kind} {resource.id}")
