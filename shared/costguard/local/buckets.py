"""The world's buckets in the embedded S3, each in its own region (GetBucketLocation answers it), with their
objects' sizes (ListObjectsV2 reports them; the bytes themselves are not stored)."""

from __future__ import annotations

from typing import Any

from costguard.local.org import place_client
from costguard.local.world import World

GIB = 2**30


def seed_buckets(world: World) -> None:
    """Create each place's buckets in their regions."""
    for place in world.places():
        if not place.buckets:
            continue
        from moto.s3.models import s3_backends  # the embedded AWS only

        backend = s3_backends[place.account]["aws"]
        for spec in place.buckets:
            s3: Any = place_client("s3", place.account, spec.region)
            if spec.name not in backend.buckets:
                create = (
                    {}
                    if spec.region == "us-east-1"
                    else {"CreateBucketConfiguration": {"LocationConstraint": spec.region}}
                )
                s3.create_bucket(Bucket=spec.name, **create)
            for key, size_gib in spec.objects.items():
                s3.put_object(Bucket=spec.name, Key=key, Body=b"0")
                backend.buckets[spec.name].keys[key].contentsize = int(size_gib * GIB)
