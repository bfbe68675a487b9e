"""The final calls for Kubernetes workloads: a mark kept in the state table, a scale to zero through the
``scale`` subresource, the previous replica count recorded. Never a delete.

Why the mark is not an annotation on the workload: writing one needs ``patch`` on the Deployment or StatefulSet
itself, which also lets a role change its image, command or service account. Kept in the state table (the store
notify mode already uses, act/shadow.py), the mark needs no Kubernetes write at all, and the only write costguard
asks of a cluster is ``patch`` on ``deployments/scale`` and ``statefulsets/scale``, granted only where remediation
is on.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Protocol

from costguard.act import UnsupportedAction
from costguard.act.shadow import ShadowMarks
from costguard.aws import clients
from costguard.aws.dynamo import table_id
from costguard.model import Resource, ResourceKind
from costguard.observability import logger
from costguard.permissions import needs

# The record of a scale to zero (the previous replicas), beside the marks in the state table.
PERMISSIONS = needs("dynamodb:PutItem")
SCALED_PREFIX = "eks-scaled#"
SCALED_KEPT_DAYS = 90
# Tries at clearing the mark once the workload is scaled (the client's own retries are inside each).
UNMARK_ATTEMPTS = 3


class Scaler(Protocol):
    """A cluster's ``scale`` subresources (aws/eks.KubeApi)."""

    def replicas(self, kind: str, namespace: str, name: str) -> int: ...

    def scale(self, kind: str, namespace: str, name: str, replicas: int) -> None: ...


class ScaleRecords(Protocol):
    def record(self, resource: Resource, previous: int, at: datetime) -> None: ...


class DynamoScaleRecords:
    def __init__(self, table: str) -> None:
        self.table = table

    def record(self, resource: Resource, previous: int, at: datetime) -> None:
        expires = int(at.timestamp()) + SCALED_KEPT_DAYS * 86400
        clients.client("dynamodb").put_item(
            TableName=self.table,
            Item={
                "id": {"S": table_id(SCALED_PREFIX, resource.key)},
                "previous_replicas": {"N": str(previous)},
                "scaled_at": {"S": at.isoformat()},
                "expiration": {"N": str(expires)},
            },
        )


class MemoryScaleRecords:
    def __init__(self) -> None:
        self.items: dict[str, tuple[int, datetime]] = {}

    def record(self, resource: Resource, previous: int, at: datetime) -> None:
        self.items[resource.key] = (previous, at)


def workload_of(resource: Resource) -> tuple[str, str, str, str]:
    """(cluster, namespace, kind, name) of an EKS workload resource (detect/eks.workload_resource's id)."""
    cluster, namespace, kind, name = resource.id.split("/", 3)
    return cluster, namespace, kind, name


class EksRemediator:
    """Marks in the state table; stops are scales to zero of the workload, its previous replicas recorded."""

    def __init__(self, scalers: Mapping[str, Scaler], marks: ShadowMarks, records: ScaleRecords) -> None:
        self.scalers = scalers
        self.marks = marks
        self.records = records

    def _check(self, resource: Resource) -> None:
        if resource.kind is not ResourceKind.EKS_WORKLOAD:
            raise UnsupportedAction(f"costguard does not act on {resource.kind} {resource.id}")

    def mark(self, resource: Resource, at: datetime, reason: str | None = None) -> None:
        self._check(resource)
        if resource.mark_void:  # a mark of an earlier run (or not costguard's) stands in the store: replaced
            self.marks.unmark(resource)
        self.marks.mark(resource, at, reason)

    def unmark(self, resource: Resource) -> None:
        self._check(resource)
        self.marks.unmark(resource)

    def stop(self, resource: Resource) -> None:
        """Scale the workload to zero; the replicas it had are recorded first, so they are never lost."""
        self._check(resource)
        cluster, namespace, kind, name = workload_of(resource)
        if kind not in ("Deployment", "StatefulSet"):
            raise UnsupportedAction(f"costguard never scales a {kind}")
        scaler = self.scalers[cluster]
        previous = scaler.replicas(kind, namespace, name)
        from costguard import clock

        at = clock.now()
        self.records.record(resource, previous, at)
        scaler.scale(kind, namespace, name, 0)
        logger.info("scaled to zero", extra={"resource": resource.key, "previous_replicas": previous})
        # A new episode if it is scaled back up and idles again: a fresh mark and a fresh grace period. The scale
        # is done: a mark that cannot be cleared now does not make it a failure (it is tried again; left behind,
        # it is older than the pods of a scale back up, and void then: act/marks.py).
        self._end_mark(resource)

    def _end_mark(self, resource: Resource) -> None:
        for attempt in range(1, UNMARK_ATTEMPTS + 1):
            try:
                self.marks.unmark(resource)
                return
            except Exception:
                logger.warning(
                    "mark not cleared after the scale to zero",
                    extra={"resource": resource.key[:300], "attempt": attempt, "of": UNMARK_ATTEMPTS},
                    exc_info=attempt == UNMARK_ATTEMPTS,
                )
