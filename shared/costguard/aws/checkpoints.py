"""A training job's checkpoint location in S3: when its newest object was written, from one ListObjectsV2.

S3 lists keys in UTF-8 binary order, never by time, and no call returns the newest object under a prefix. One
page of up to 1,000 keys is read and the latest ``LastModified`` on it taken: a checkpoint directory that is
rewritten in place (``checkpoint.pt``, or one shard set per save) fits in it, and the answer is exact. Past one
page the newest object may sit beyond it: a page whose newest object is recent still proves the location fresh,
and one whose newest is old proves nothing, so the detector then raises no alert (``truncated``) rather than
walking every key of a large prefix every sweep. Point ``costguard:checkpoint`` at the prefix the job rewrites
to keep it within one page.
"""

from __future__ import annotations

from costguard.aws.buckets import first_page
from costguard.detect.training_health import CheckpointSeen


def newest_object(region: str, bucket: str, prefix: str) -> CheckpointSeen:
    """One ListObjectsV2 call under ``prefix``. Errors (no such bucket, access denied) propagate: the sweep logs
    them for that job and goes on."""
    answer = first_page(region, bucket, prefix)
    contents = answer.get("Contents", [])
    return CheckpointSeen(
        newest=max((item["LastModified"] for item in contents), default=None),
        objects=len(contents),
        truncated=bool(answer.get("IsTruncated")),
    )
