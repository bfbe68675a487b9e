"""The AWS calls behind each action, chosen by resource kind."""

from __future__ import annotations

from datetime import datetime

from costguard import clock
from costguard.act import UnsupportedAction, shadow
from costguard.aws import bedrock, capacity, clients, inventory, sagemaker
from costguard.aws.bedrock import ProvisionedThroughputs
from costguard.aws.capacity import CapacityReservations
from costguard.aws.sagemaker import TrainingJobStopper
from costguard.model import MARK_TAG_KEY, Resource, ResourceKind, mark_text
from costguard.permissions import NONE, Permissions, needs

# Why a stop of an EC2 instance would be refused, read before deciding (stop_blocker).
STOP_PROTECTION_BLOCKER = "stop protection is on (DisableApiStop)"

# What stop, mark and unmark call for each kind of resource (and, for an instance, the read of its stop
# protection before a stop is decided): a flow needs the kinds it may remediate.
_PERMISSIONS_BY_KIND: dict[ResourceKind, Permissions] = {
    ResourceKind.EC2_INSTANCE: needs("ec2:StopInstances", "ec2:CreateTags", "ec2:DeleteTags")
    | inventory.STOP_PROTECTION_PERMISSIONS,
    ResourceKind.TRAINING_JOB: sagemaker.STOP_TRAINING_JOB_PERMISSIONS
    | needs("sagemaker:AddTags", "sagemaker:DeleteTags"),
    ResourceKind.NOTEBOOK: needs(
        "sagemaker:StopNotebookInstance", "sagemaker:AddTags", "sagemaker:DeleteTags"
    ),
    ResourceKind.CAPACITY_RESERVATION: capacity.REMEDIATE_PERMISSIONS,
    ResourceKind.PROVISIONED_THROUGHPUT: bedrock.REMEDIATE_PERMISSIONS,
}


def permissions_for(*kinds: ResourceKind) -> Permissions:
    """What AwsRemediator needs to stop, mark and unmark these kinds (nothing for a kind it never acts on), and
    what notify mode's marks of them need (act/shadow.py: kept in the state table, read back before judging)."""
    found = NONE.union(*(_PERMISSIONS_BY_KIND.get(kind, NONE) for kind in kinds))
    return found | shadow.PERMISSIONS if found else found


class AwsRemediator:
    """Stops and marks through the service that owns the resource. Never terminates, and deletes nothing but a
    Bedrock Provisioned Throughput whose owner opted in (its "stop": it has no other way to stop billing)."""

    def __init__(
        self,
        training_jobs: TrainingJobStopper | None = None,
        reservations: CapacityReservations | None = None,
        throughputs: ProvisionedThroughputs | None = None,
    ) -> None:
        self.training_jobs = training_jobs or TrainingJobStopper()
        self.reservations = reservations or CapacityReservations()
        self.throughputs = throughputs or ProvisionedThroughputs()

    def stop_blocker(self, resource: Resource) -> str | None:
        """What AWS would refuse a stop of this resource for, read before the stop is decided: an EC2 instance's
        stop protection (one DescribeInstanceAttribute). None when nothing stands in the way, as far as a read
        can tell; errors propagate (the pipeline then decides without it, and EC2 still enforces it)."""
        if resource.kind is not ResourceKind.EC2_INSTANCE:
            return None
        return (
            STOP_PROTECTION_BLOCKER
            if inventory.stop_protected(resource.region, resource.id, resource.account)
            else None
        )

    def stop(self, resource: Resource) -> None:
        if resource.kind is ResourceKind.EC2_INSTANCE:
            clients.ec2(resource.region, resource.account).stop_instances(InstanceIds=[resource.id])
        elif resource.kind is ResourceKind.TRAINING_JOB:
            self.training_jobs.stop(resource.region, resource.id)
        elif resource.kind is ResourceKind.NOTEBOOK:
            clients.sagemaker(resource.region, resource.account).stop_notebook_instance(
                NotebookInstanceName=resource.id
            )
        elif resource.kind is ResourceKind.CAPACITY_RESERVATION:
            # Stopping a reservation is cancelling it; the adapter refuses a Capacity Block.
            self.reservations.cancel(resource.region, resource.id)
        elif resource.kind is ResourceKind.PROVISIONED_THROUGHPUT and resource.arn:
            # Stopping a throughput is deleting it; the adapter reads it again and refuses a committed one.
            self.throughputs.delete(resource.region, resource.account, resource.arn, clock.now())
        else:
            raise UnsupportedAction(f"costguard does not stop {resource.kind}")

    def unmark(self, resource: Resource) -> None:
        if resource.kind is ResourceKind.EC2_INSTANCE:
            clients.ec2(resource.region, resource.account).delete_tags(
                Resources=[resource.id], Tags=[{"Key": MARK_TAG_KEY}]
            )
        elif resource.arn and resource.kind in (ResourceKind.TRAINING_JOB, ResourceKind.NOTEBOOK):
            clients.sagemaker(resource.region, resource.account).delete_tags(
                ResourceArn=resource.arn, TagKeys=[MARK_TAG_KEY]
            )
        elif resource.kind is ResourceKind.CAPACITY_RESERVATION:
            self.reservations.untag(resource.region, resource.id, MARK_TAG_KEY)
        elif resource.kind is ResourceKind.PROVISIONED_THROUGHPUT and resource.arn:
            self.throughputs.untag(resource.region, resource.account, resource.arn, MARK_TAG_KEY)
        else:
            raise UnsupportedAction(f"costguard cannot unmark {resource.kind} {resource.id}")

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        """Tag the resource with costguard's mark; a training job's says why when ``reason`` is given
        (model.mark_text), so that the SageMaker idle sweep leaves a mark working again does not answer."""
        value = mark_text(at, reason if resource.kind is ResourceKind.TRAINING_JOB else None)
        if resource.kind is ResourceKind.EC2_INSTANCE:
            clients.ec2(resource.region, resource.account).create_tags(
                Resources=[resource.id], Tags=[{"Key": MARK_TAG_KEY, "Value": value}]
            )
        elif resource.arn and resource.kind in (ResourceKind.TRAINING_JOB, ResourceKind.NOTEBOOK):
            clients.sagemaker(resource.region, resource.account).add_tags(
                ResourceArn=resource.arn, Tags=[{"Key": MARK_TAG_KEY, "Value": value}]
            )
        elif resource.kind is ResourceKind.CAPACITY_RESERVATION:
            self.reservations.tag(resource.region, resource.id, MARK_TAG_KEY, value)
        elif resource.kind is ResourceKind.PROVISIONED_THROUGHPUT and resource.arn:
            self.throughputs.tag(resource.region, resource.account, resource.arn, MARK_TAG_KEY, value)
        else:
            raise UnsupportedAction(f"costguard cannot mark {resource.kind} {resource.id}")
