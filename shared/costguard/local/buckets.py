"""The world's S3 in the embedded AWS: its buckets, each in its own region (GetBucketLocation answers it), and
their objects with the sizes and times the world gives them (ListObjectsV2 reports them; the bytes themselves are
not stored).

Every seeder of S3 objects writes through ``create_bucket`` and ``put_object`` here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from costguard.local.org import place_client
from costguard.local.seed_metrics import naive_utc
from costguard.local.world import World

GIB = 2**30


def seed_buckets(world: World) -> None:
    """Create each place's buckets in their regions, with their objects."""
    for place in world.places():
        for spec in place.buckets:
            create_bucket(place.account, spec.region, spec.name)
            for key, size_gib in spec.objects.items():
                put_object(place.account, spec.region, spec.name, key, size_gib=size_gib)


def create_bucket(account: str, region: str, bucket: str) -> None:
    """The bucket in ``account``'s embedded S3, made in ``region`` unless it is there already."""
    if bucket in _s3_backend(account).buckets:
        return
    s3: Any = place_client("s3", account, region)
    # us-east-1 takes no location constraint; every other region must be named.
    create = {} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}
    s3.create_bucket(Bucket=bucket, **create)


def put_object(
    account: str,
    region: str,
    bucket: str,
    key: str,
    *,
    size_gib: float | None = None,
    modified: datetime | None = None,
    body: bytes = b"0",
) -> None:
    """Write ``body`` at ``key`` (the bucket made in ``region`` if it is missing). moto stamps the upload time and
    the body's size: ``modified`` and ``size_gib``, when given, replace them in its backend."""
    create_bucket(account, region, bucket)
    s3: Any = place_client("s3", account, region)
    s3.put_object(Bucket=bucket, Key=key, Body=body)
    stored = _s3_backend(account).buckets[bucket].keys[key]
    if size_gib is not None:
        stored.contentsize = int(size_gib * GIB)  # the size without the bytes
    if modified is not None:
        stored.last_modified = naive_utc(modified)


def _s3_backend(account: str) -> Any:
    from moto.s3.models import s3_backends  # the embedded AWS only

    # One backend per partition: the aws partition's holds every bucket of its regions.
    return s3_backends[account]["aws"]
