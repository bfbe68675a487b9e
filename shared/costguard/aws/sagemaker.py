"""SageMaker: what runs (in-progress training jobs, InService notebooks and endpoints) and the stop adapter.

The list calls are paginated and return no instance details or tags, so a few per-resource calls remain;
each is named where it is made. Tags are read only for resources on GPU instance types.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from costguard.aws import clients, inventory
from costguard.aws.inventory import catalog
from costguard.detect.job_families import Family, job_family
from costguard.model import Endpoint, EndpointVariant, NotebookInstance, TrainingJob
from costguard.permissions import needs

TRAINING_NAMESPACE = "/aws/sagemaker/TrainingJobs"
TRAINING_GPU_METRIC = "GPUUtilization"  # per host (Host = "<job>/algo-N"), summed over the host's GPUs
ENDPOINT_NAMESPACE = "AWS/SageMaker"
INVOCATIONS_METRIC = "Invocations"  # per EndpointName + VariantName
NOTEBOOK_DIMENSION = "NotebookInstanceName"
LIST_PAGE = 100  # the list calls' maximum page

# Training jobs described with their tags (in_progress_jobs_described, in_progress_family_jobs).
TRAINING_JOB_PERMISSIONS = needs(
    "sagemaker:ListTrainingJobs", "sagemaker:DescribeTrainingJob", "sagemaker:ListTags"
)
# Everything that runs, with the accelerators of its instance type (in_progress_training_jobs,
# in_service_notebooks, in_service_endpoints).
INVENTORY_PERMISSIONS = (
    TRAINING_JOB_PERMISSIONS
    | inventory.TYPES_PERMISSIONS
    | needs(
        "sagemaker:ListNotebookInstances",
        "sagemaker:ListEndpoints",
        "sagemaker:DescribeEndpoint",
        "sagemaker:DescribeEndpointConfig",
    )
)


def account_of(arn: str) -> str:
    return arn.split(":")[4]


def tags_of(sagemaker: Any, arn: str) -> dict[str, str]:
    """One ListTags walk per resource: no list or describe call returns tags, and the protect tag, the
    mark and Slack routing all need them."""
    tags: dict[str, str] = {}
    for page in sagemaker.get_paginator("list_tags").paginate(ResourceArn=arn):
        tags.update({t["Key"]: t["Value"] for t in page.get("Tags", [])})
    return tags


def in_progress_training_jobs(region: str) -> list[TrainingJob]:
    """In-progress jobs on GPU instance types, with their accelerators and tags."""
    sagemaker = clients.sagemaker(region)
    names = [
        summary["TrainingJobName"]
        for page in sagemaker.get_paginator("list_training_jobs").paginate(
            StatusEquals="InProgress", PaginationConfig={"PageSize": LIST_PAGE}
        )
        for summary in page["TrainingJobSummaries"]
        if summary.get("TrainingJobStatus", "InProgress") == "InProgress"
    ]
    described: list[dict[str, Any]] = []
    for name in names:
        # Unavoidable per job: ListTrainingJobs gives no instance type, instance count or start time.
        one = sagemaker.describe_training_job(TrainingJobName=name)
        # A heterogeneous cluster (ResourceConfig.InstanceGroups) names no single type: not judged here.
        if one["TrainingJobStatus"] == "InProgress" and one.get("ResourceConfig", {}).get("InstanceType"):
            described.append(dict(one))
    accelerators = catalog.lookup(region, {j["ResourceConfig"]["InstanceType"] for j in described})
    jobs = []
    for job in described:
        config = job["ResourceConfig"]
        found = accelerators[config["InstanceType"]]
        if found is None:
            continue  # a CPU job
        jobs.append(
            TrainingJob(
                name=job["TrainingJobName"],
                arn=job["TrainingJobArn"],
                account=account_of(job["TrainingJobArn"]),
                region=region,
                instance_type=config["InstanceType"],
                instance_count=int(config.get("InstanceCount", 1)),
                started=job.get("TrainingStartTime"),
                tags=tags_of(sagemaker, job["TrainingJobArn"]),
                accelerators=found,
            )
        )
    return jobs


def in_progress_job_summaries(region: str) -> list[tuple[str, str]]:
    """(name, ARN) of in-progress training jobs: ceil(jobs/100) ListTrainingJobs calls. The status is
    filtered client-side too (an emulator may ignore StatusEquals)."""
    sagemaker = clients.sagemaker(region)
    return [
        (summary["TrainingJobName"], summary["TrainingJobArn"])
        for page in sagemaker.get_paginator("list_training_jobs").paginate(
            StatusEquals="InProgress", PaginationConfig={"PageSize": LIST_PAGE}
        )
        for summary in page["TrainingJobSummaries"]
        if summary.get("TrainingJobStatus", "InProgress") == "InProgress"
    ]


def described_training_job(
    region: str, name: str, tags: dict[str, str] | None = None
) -> dict[str, Any] | None:
    """DescribeTrainingJob plus its tags (ListTags, unless given), shaped like a state-change event's detail.

    Unavoidable per job: ListTrainingJobs carries no instance type or count, stopping condition, spot or
    checkpoint settings, and neither call returns tags (the ceilings, the protect tag and the mark live there).
    """
    sagemaker = clients.sagemaker(region)
    try:
        one: dict[str, Any] = dict(sagemaker.describe_training_job(TrainingJobName=name))
    except sagemaker.exceptions.ResourceNotFound:
        return None  # gone between the list and the describe
    one.pop("ResponseMetadata", None)
    one["Tags"] = tags if tags is not None else tags_of(sagemaker, one["TrainingJobArn"])
    return one


def in_progress_jobs_described(region: str) -> list[dict[str, Any]]:
    """Every in-progress job described with its tags: ceil(jobs/100) ListTrainingJobs, then one
    DescribeTrainingJob and one ListTags per job."""
    found = (described_training_job(region, name) for name, _ in in_progress_job_summaries(region))
    return [job for job in found if job is not None and job.get("TrainingJobStatus") == "InProgress"]


def in_progress_family_jobs(region: str, family: Family) -> list[dict[str, Any]]:
    """The in-progress jobs of one family, matched on the family and where it comes from: a job belongs to
    a tagged family only with the same tag, to a pipeline only with the same pipeline tag. job_family needs
    each job's tags and no list call returns tags: one ListTags per in-progress job, then one
    DescribeTrainingJob per member of the family."""
    sagemaker = clients.sagemaker(region)
    members = []
    for name, arn in in_progress_job_summaries(region):
        tags = tags_of(sagemaker, arn)
        if job_family(name, tags) == family:
            job = described_training_job(region, name, tags)
            if job is not None and job.get("TrainingJobStatus") == "InProgress":
                members.append(job)
    return members


def in_service_notebooks(region: str) -> list[NotebookInstance]:
    """InService notebook instances on GPU instance types. ListNotebookInstances carries the instance type,
    so only the tags take a call per (GPU) notebook."""
    sagemaker = clients.sagemaker(region)
    summaries = [
        summary
        for page in sagemaker.get_paginator("list_notebook_instances").paginate(
            StatusEquals="InService", PaginationConfig={"PageSize": LIST_PAGE}
        )
        for summary in page["NotebookInstances"]
        if summary.get("NotebookInstanceStatus") == "InService" and summary.get("InstanceType")
    ]
    accelerators = catalog.lookup(region, {s["InstanceType"] for s in summaries})
    return [
        NotebookInstance(
            name=s["NotebookInstanceName"],
            arn=s["NotebookInstanceArn"],
            account=account_of(s["NotebookInstanceArn"]),
            region=region,
            instance_type=s["InstanceType"],
            status=s["NotebookInstanceStatus"],
            tags=tags_of(sagemaker, s["NotebookInstanceArn"]),
            accelerators=accelerators[s["InstanceType"]],
        )
        for s in summaries
        if accelerators[s["InstanceType"]] is not None
    ]


def in_service_endpoints(region: str) -> list[Endpoint]:
    """InService endpoints with at least one instance-backed GPU variant."""
    sagemaker = clients.sagemaker(region)
    summaries = [
        summary
        for page in sagemaker.get_paginator("list_endpoints").paginate(
            StatusEquals="InService", PaginationConfig={"PageSize": LIST_PAGE}
        )
        for summary in page["Endpoints"]
    ]
    configs: dict[str, dict[str, str | None]] = {}
    asynchronous: set[str] = set()  # the configurations with an AsyncInferenceConfig
    raw: list[tuple[dict[str, Any], list[tuple[str, str | None, int]]]] = []
    for summary in summaries:
        # Unavoidable per endpoint: DescribeEndpoint for the live variants and their instance counts, and
        # DescribeEndpointConfig (once per config) for their instance types; no list call carries either.
        described_endpoint = sagemaker.describe_endpoint(EndpointName=summary["EndpointName"])
        config_name = described_endpoint["EndpointConfigName"]
        if config_name not in configs:
            config = sagemaker.describe_endpoint_config(EndpointConfigName=config_name)
            configs[config_name] = {
                v["VariantName"]: v.get("InstanceType") for v in config["ProductionVariants"]
            }
            if config.get("AsyncInferenceConfig"):
                asynchronous.add(config_name)
        variants = [
            (
                v["VariantName"],
                configs[config_name].get(v["VariantName"]),
                int(v.get("CurrentInstanceCount", v.get("DesiredInstanceCount", 0)) or 0),
            )
            for v in described_endpoint.get("ProductionVariants", [])
        ]
        raw.append((dict(described_endpoint), variants))
    accelerators = catalog.lookup(region, {t for _, vs in raw for _, t, _ in vs if t})
    endpoints = []
    for endpoint, variants in raw:
        made = tuple(
            EndpointVariant(name, itype, count, accelerators[itype] if itype else None)
            for name, itype, count in variants
        )
        candidate = Endpoint(
            name=endpoint["EndpointName"],
            arn=endpoint["EndpointArn"],
            account=account_of(endpoint["EndpointArn"]),
            region=region,
            created=endpoint.get("CreationTime"),
            variants=made,
            asynchronous=endpoint["EndpointConfigName"] in asynchronous,
        )
        if candidate.has_gpu:
            endpoints.append(replace(candidate, tags=tags_of(sagemaker, candidate.arn)))
    return endpoints


STOP_TRAINING_JOB_PERMISSIONS = needs("sagemaker:StopTrainingJob")


class TrainingJobStopper:
    """StopTrainingJob behind one seam, used by AwsRemediator.stop.

    moto has no StopTrainingJob: unit tests drive this call with botocore's Stubber against the real
    sagemaker service model, and the local stack (local/stack.py) teaches moto the operation.
    """

    def stop(self, region: str, name: str) -> None:
        clients.sagemaker(region).stop_training_job(TrainingJobName=name)
