"""Whether an account and region holds anything a sweep watches: an organization's hourly census (flows/org.py).

Each probe reads as little as it can (one call in an account and region that holds nothing, which is most of an
organization's) and is called in the account being looked at (``clients.acting_in``). A probe that finds nothing
means the sweep would find nothing either: it reads the same lists, with the same filters.
"""

from __future__ import annotations

from costguard.aws import clients, inventory
from costguard.permissions import needs

GPU_PERMISSIONS = inventory.PERMISSIONS
TRAINING_PERMISSIONS = needs("sagemaker:ListTrainingJobs")
SAGEMAKER_PERMISSIONS = TRAINING_PERMISSIONS | needs(
    "sagemaker:ListNotebookInstances", "sagemaker:ListEndpoints"
)


def gpu_instances(region: str) -> bool:
    """A running instance with accelerators: the GPU sweep's own read (ceil(instances/1000) DescribeInstances
    calls, plus DescribeInstanceTypes for a type not seen before by this process)."""
    return bool(inventory.describe_gpu_instances(region))


def training_jobs(region: str) -> bool:
    """An in-progress training job: one ListTrainingJobs call of one result."""
    answer = clients.sagemaker(region).list_training_jobs(StatusEquals="InProgress", MaxResults=1)
    return any(
        s.get("TrainingJobStatus", "InProgress") == "InProgress" for s in answer["TrainingJobSummaries"]
    )


def sagemaker_resources(region: str) -> bool:
    """An in-progress training job, an in-service notebook instance or endpoint: one to three list calls of one
    result each, stopping at the first found."""
    if training_jobs(region):
        return True
    sagemaker = clients.sagemaker(region)
    notebooks = sagemaker.list_notebook_instances(StatusEquals="InService", MaxResults=1)["NotebookInstances"]
    if any(n.get("NotebookInstanceStatus") == "InService" for n in notebooks):
        return True
    endpoints = sagemaker.list_endpoints(StatusEquals="InService", MaxResults=1)["Endpoints"]
    return any(e.get("EndpointStatus") == "InService" for e in endpoints)
