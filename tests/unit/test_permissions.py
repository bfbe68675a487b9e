"""Permission declarations: IAM action names only, never a wildcard, and per-kind remediation needs."""

from __future__ import annotations

import pytest

from costguard.act.aws import permissions_for
from costguard.model import ResourceKind
from costguard.permissions import needs


def test_needs_spells_out_iam_actions() -> None:
    assert needs("ec2:DescribeInstances", "sqs:SendMessage") == {"ec2:DescribeInstances", "sqs:SendMessage"}


@pytest.mark.parametrize(
    "bad", ["ec2:*", "sqs:SendMessage*", "DescribeInstances", "ec2:describeInstances", ""]
)
def test_needs_refuses_wildcards_and_malformed_names(bad: str) -> None:
    with pytest.raises(ValueError, match="not an IAM action"):
        needs(bad)


def test_remediation_needs_follow_the_kind_of_resource() -> None:
    assert permissions_for(ResourceKind.EC2_INSTANCE) == {
        "ec2:StopInstances",
        "ec2:CreateTags",
        "ec2:DeleteTags",
        "ec2:DescribeInstanceAttribute",  # stop protection, read just before a stop
        # notify mode's marks, kept in the state table (act/shadow.py)
        "dynamodb:BatchGetItem",
        "dynamodb:PutItem",
        "dynamodb:DeleteItem",
    }
    assert "ec2:CancelCapacityReservation" in permissions_for(ResourceKind.CAPACITY_RESERVATION)
    # Endpoints are reported, never stopped or marked: nothing to grant.
    assert permissions_for(ResourceKind.ENDPOINT) == frozenset()
    assert not any(a.startswith("ec2:Terminate") for kind in ResourceKind for a in permissions_for(kind))
