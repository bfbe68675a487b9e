"""Storage GPU work leaves behind: unattached EBS volumes, and the S3 prefixes of finished training jobs.

Read only, and only with list calls: one DescribeVolumes walk filtered to available volumes (500 a page), one
SageMaker Search walk over finished training jobs (100 a page; Search returns each job whole, so no
DescribeTrainingJob per job), and one ListObjectsV2 walk per prefix (1,000 keys a page). costguard never deletes
any of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from costguard.aws import clients
from costguard.permissions import needs

VOLUME_PAGE = 500  # DescribeVolumes' largest page
SEARCH_PAGE = 100  # Search's largest page
FINISHED = frozenset({"Completed", "Failed", "Stopped"})

# ec2:DescribeVolumes and sagemaker:Search take no resource narrowing.
VOLUME_PERMISSIONS = needs("ec2:DescribeVolumes")
FINISHED_JOB_PERMISSIONS = needs("sagemaker:Search")
# The buckets are whatever the jobs named: listed with s3:ListBucket, never read or written.
PREFIX_PERMISSIONS = needs("s3:ListBucket")


def unattached_volumes(region: str) -> list[dict[str, Any]]:
    """Every volume attached to nothing (status ``available``), as DescribeVolumes returns it."""
    ec2: Any = clients.ec2(region)
    pages = ec2.get_paginator("describe_volumes").paginate(
        Filters=[{"Name": "status", "Values": ["available"]}],
        PaginationConfig={"PageSize": VOLUME_PAGE},
    )
    return [volume for page in pages for volume in page.get("Volumes", [])]


def finished_training_jobs(region: str) -> list[dict[str, Any]]:
    """Training jobs that ended (Completed, Failed, Stopped), each whole (checkpoint and output locations, end
    time, tags): one Search walk. The filter leaves out what still runs; the status is checked again here."""
    sagemaker: Any = clients.sagemaker(region)
    pages = sagemaker.get_paginator("search").paginate(
        Resource="TrainingJob",
        SearchExpression={
            "Filters": [{"Name": "TrainingJobStatus", "Operator": "NotEquals", "Value": "InProgress"}]
        },
        PaginationConfig={"PageSize": SEARCH_PAGE},
    )
    jobs = (result.get("TrainingJob") or {} for page in pages for result in page.get("Results", []))
    return [job for job in jobs if job.get("TrainingJobStatus") in FINISHED]


@dataclass(frozen=True)
class PrefixUsage:
    """What an S3 prefix holds: bytes per storage class, object count, the newest object's time."""

    uri: str
    objects: int
    bytes_by_class: dict[str, int]
    newest: datetime | None
    error: str | None = None  # the listing was refused or failed: nothing is known of it


def prefix_usage(uri: str, region: str | None = None) -> PrefixUsage:
    """One ListObjectsV2 walk of the prefix. A refused or failed listing (a bucket in another account, gone,
    or denied) is returned with its error, not raised: one prefix never fails the audit."""
    # Loaded here, by the audit's discovery of a job's prefix (its EC2 and SageMaker reads came first): the
    # training detectors it sits among are not the other audit steps' to load.
    from costguard.detect.training_health import split_s3_uri

    named = split_s3_uri(uri)
    if named is None:
        return PrefixUsage(uri, 0, {}, None, error="not an s3:// URI")
    bucket, prefix = named
    s3 = clients.client("s3", region)
    by_class: dict[str, int] = {}
    count = 0
    newest: datetime | None = None
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                count += 1
                storage_class = item.get("StorageClass") or "STANDARD"
                by_class[storage_class] = by_class.get(storage_class, 0) + int(item.get("Size", 0))
                modified = item.get("LastModified")
                if modified is not None and (newest is None or modified > newest):
                    newest = modified
    except s3.exceptions.ClientError as error:
        code = error.response.get("Error", {}).get("Code", "ClientError")
        return PrefixUsage(uri, 0, {}, None, error=str(code))
    return PrefixUsage(uri, count, by_class, newest)


def distinct_prefixes(uris: Iterable[str]) -> list[str]:
    """The prefixes to list, each once: a prefix inside another listed one is counted by that one's walk."""
    normal = sorted({u if u.endswith("/") else f"{u}/" for u in uris if u.startswith("s3://")})
    kept: list[str] = []
    for uri in normal:
        if not any(uri.startswith(outer) for outer in kept):
            kept.append(uri)
    return kept
