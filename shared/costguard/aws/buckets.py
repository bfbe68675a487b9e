"""Where a training job's input buckets live, and what an input prefix weighs: read once per process each.

``bucket_region``: one GetBucketLocation per distinct bucket for the life of the process (a bucket never moves
region; its name is global), asked of the us-east-1 endpoint, which answers for a bucket of any region.
``LocationConstraint`` is empty for us-east-1 and ``EU`` for the oldest eu-west-1 buckets. A bucket that cannot
be asked (another account's, without a bucket policy allowing it; gone) is remembered as unknown, and never
judged.

``input_size``: one ListObjectsV2 page (1,000 keys) under a channel's prefix, asked only of channels already
known to cross regions, in the bucket's own region, once per prefix per process. More than one page is reported
as a minimum rather than walked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from costguard.aws import clients
from costguard.observability import logger
from costguard.permissions import needs

if TYPE_CHECKING:
    # Built by input_size only (the training-jobs flow's cross-region check): the training ceilings' sweep, which
    # imports this module for its listing, need not load the placement detector at its cold start.
    from costguard.detect.placement import InputSize

PAGE = 1000  # ListObjectsV2's largest page
LOCATION_ENDPOINT = "us-east-1"
REGION_PERMISSIONS = needs("s3:GetBucketLocation")  # bucket_region
# first_page (a channel's size here, a checkpoint location's newest object in checkpoints.py): s3:ListBucket
# authorizes ListObjectsV2.
LIST_PERMISSIONS = needs("s3:ListBucket")
# What stands for "cannot be told", as opposed to a failure worth raising (throttling, a network error).
_UNKNOWABLE = frozenset({"AccessDenied", "NoSuchBucket", "AllAccessDisabled", "InvalidBucketName"})

_regions: dict[str, str | None] = {}
_sizes: dict[tuple[str, str], InputSize | None] = {}


def location_region(constraint: str | None) -> str:
    """GetBucketLocation's ``LocationConstraint`` as a region name."""
    if not constraint:
        return "us-east-1"
    return "eu-west-1" if constraint == "EU" else constraint


def bucket_region(bucket: str) -> str | None:
    """The bucket's region; None when it cannot be read (remembered too: asked once)."""
    if bucket in _regions:
        return _regions[bucket]
    try:
        answer = clients.client("s3", LOCATION_ENDPOINT).get_bucket_location(Bucket=bucket)
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        if code not in _UNKNOWABLE:
            raise
        logger.info("bucket region not readable", extra={"bucket": bucket, "error": code})
        _regions[bucket] = None
        return None
    _regions[bucket] = location_region(answer.get("LocationConstraint"))
    return _regions[bucket]


def bucket_regions(buckets: list[str]) -> dict[str, str | None]:
    return {b: bucket_region(b) for b in buckets}


def first_page(region: str, bucket: str, prefix: str) -> dict[str, Any]:
    """One ListObjectsV2 call: the first page (up to PAGE keys) under ``prefix``, in the bucket's region. Errors
    propagate."""
    answer: dict[str, Any] = clients.client("s3", region).list_objects_v2(
        Bucket=bucket, Prefix=prefix, MaxKeys=PAGE
    )
    return answer


def input_size(bucket: str, prefix: str, region: str) -> InputSize | None:
    """What the first page of objects under ``prefix`` weighs; None when the listing is refused."""
    key = (bucket, prefix)
    if key in _sizes:
        return _sizes[key]
    try:
        answer = first_page(region, bucket, prefix)
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        if code not in _UNKNOWABLE:
            raise
        logger.info("input size not readable", extra={"bucket": bucket, "prefix": prefix, "error": code})
        _sizes[key] = None
        return None
    from costguard.detect.placement import InputSize

    contents = answer.get("Contents", [])
    _sizes[key] = InputSize(
        bytes=sum(int(item.get("Size", 0)) for item in contents),
        objects=len(contents),
        complete=not answer.get("IsTruncated"),
    )
    return _sizes[key]


def reset() -> None:
    """Forget every bucket's region and size (a test, or a local stack over another embedded AWS)."""
    _regions.clear()
    _sizes.clear()
