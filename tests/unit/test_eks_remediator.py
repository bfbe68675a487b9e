"""The EKS remediator refuses what it has no safe way to do, as the AWS remediator does (UnsupportedAction)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from costguard.act import UnsupportedAction
from costguard.act.eks import EksRemediator, MemoryScaleRecords
from costguard.act.shadow import MemoryShadowMarks
from costguard.model import Resource, ResourceKind

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)


def resource(kind: ResourceKind, resource_id: str) -> Resource:
    return Resource(kind=kind, id=resource_id, account="123456789012", region="us-east-1")


def test_it_never_acts_on_a_node_or_scales_what_is_not_a_deployment_or_statefulset() -> None:
    records = MemoryScaleRecords()
    remediator = EksRemediator({}, MemoryShadowMarks(), records)
    node = resource(ResourceKind.EKS_NODE, "ml/ip-10-0-0-1.ec2.internal")
    for act in (remediator.stop, remediator.unmark, lambda r: remediator.mark(r, NOW)):
        with pytest.raises(UnsupportedAction, match="does not act on"):
            act(node)
    with pytest.raises(UnsupportedAction, match="never scales a DaemonSet"):
        remediator.stop(resource(ResourceKind.EKS_WORKLOAD, "ml/default/DaemonSet/dcgm-exporter"))
    assert records.items == {}
