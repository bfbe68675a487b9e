"""What Discover reads besides running resources (AWS I/O): unattached volumes and the S3 prefixes of training
jobs that finished ``storage.min_age_days`` ago or more, with what each prefix holds.

Calls: one DescribeVolumes walk (available volumes only), one SageMaker Search walk (finished jobs, whole), one
ListObjectsV2 walk per distinct prefix (a prefix inside another is counted by the outer one's walk).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from costguard.audit.holdings import Holdings, JobPrefix, Volume
from costguard.audit.rules import Rules
from costguard.aws import storage

PERMISSIONS = storage.VOLUME_PERMISSIONS | storage.FINISHED_JOB_PERMISSIONS | storage.PREFIX_PERMISSIONS


def volume_of(described: dict[str, Any]) -> Volume:
    return Volume(
        id=described["VolumeId"],
        volume_type=described.get("VolumeType") or "standard",
        size_gib=int(described.get("Size") or 0),
        created=described.get("CreateTime"),
        availability_zone=described.get("AvailabilityZone"),
        tags={t["Key"]: t["Value"] for t in described.get("Tags") or []},
    )


def job_locations(job: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, S3 URI) of what a job wrote: its checkpoints, and its output folder ``<S3OutputPath>/<job>/``."""
    found = []
    checkpoint = (job.get("CheckpointConfig") or {}).get("S3Uri")
    if checkpoint:
        found.append(("checkpoint", str(checkpoint)))
    output = (job.get("OutputDataConfig") or {}).get("S3OutputPath")
    if output:
        found.append(("artifacts", f"{str(output).rstrip('/')}/{job['TrainingJobName']}/"))
    return found


def old_job_prefixes(jobs: list[dict[str, Any]], cutoff: datetime) -> list[JobPrefix]:
    """The distinct prefixes of jobs that ended at or before ``cutoff``, each with the jobs that wrote there
    and the latest end among them. A prefix inside another is folded into the outer one."""
    by_uri: dict[str, tuple[str, list[str], datetime]] = {}
    for job in jobs:
        ended = job.get("TrainingEndTime") or job.get("LastModifiedTime")
        if ended is None or ended > cutoff:
            continue
        for kind, uri in job_locations(job):
            uri = uri if uri.endswith("/") else f"{uri}/"
            known = by_uri.get(uri)
            if known is None:
                by_uri[uri] = (kind, [job["TrainingJobName"]], ended)
            else:
                by_uri[uri] = (known[0], [*known[1], job["TrainingJobName"]], max(known[2], ended))
    prefixes: list[JobPrefix] = []
    for uri in storage.distinct_prefixes(by_uri):
        inner = {u: v for u, v in by_uri.items() if u.startswith(uri)}
        kind = by_uri[uri][0]
        names = sorted({name for _, jobs_there, _ in inner.values() for name in jobs_there})
        ended = max(v[2] for v in inner.values())
        prefixes.append(JobPrefix(uri=uri, kind=kind, jobs=tuple(names), ended=ended))
    return prefixes


def gather(region: str, now: datetime, rules: Rules) -> Holdings:
    """The region's unattached volumes and old finished jobs' prefixes, each prefix listed once."""
    volumes = tuple(volume_of(v) for v in storage.unattached_volumes(region))
    jobs = storage.finished_training_jobs(region)
    listed = []
    for prefix in old_job_prefixes(jobs, now - timedelta(days=rules.storage.min_age_days)):
        usage = storage.prefix_usage(prefix.uri, region)
        listed.append(
            prefix.model_copy(
                update={
                    "objects": usage.objects,
                    "bytes_by_class": usage.bytes_by_class,
                    "newest": usage.newest,
                    "error": usage.error,
                }
            )
        )
    return Holdings(volumes=volumes, prefixes=tuple(listed))
