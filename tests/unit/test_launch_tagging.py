"""untagged_gpu_spend at launch, pure: GPU resources only, the account's tags only, once per launch, naming who
launched it where the tags say."""

from __future__ import annotations

from datetime import UTC, datetime

from costguard.detect.tagging import NOT_IN_EVENT, launched_by, missing_tags, untagged_launch_finding
from costguard.model import Accelerators, Reason, Resource, ResourceKind

REQUIRED = ("team", "project", "owner")
A10G = Accelerators(kind="nvidia_gpu", count=4, model="A10G")
LAUNCHED = datetime(2026, 11, 20, 6, 0, tzinfo=UTC)
SEEN = datetime(2026, 11, 20, 6, 0, 40, tzinfo=UTC)


def _instance(tags: dict[str, str]) -> Resource:
    return Resource(
        kind=ResourceKind.EC2_INSTANCE,
        id="i-0a1f00000000000a3",
        account="123456789012",
        region="us-east-1",
        name="vision-g5-starved",
        instance_type="g5.12xlarge",
        tags=tags,
    )


def _finding(tags: dict[str, str], accelerators: Accelerators | None = A10G, required=REQUIRED):  # type: ignore[no-untyped-def]
    return untagged_launch_finding(
        _instance(tags),
        required=required,
        accelerators=accelerators,
        launched_at=LAUNCHED,
        hourly_usd=5.672,
        observed_at=SEEN,
        event_id="evt-1",
    )


def test_an_empty_value_counts_as_missing() -> None:
    assert missing_tags({"team": "vision", "project": " ", "Owner": "li"}, REQUIRED) == ["project", "owner"]


def test_a_gpu_instance_without_required_tags_is_told_with_the_missing_ones_and_its_cost() -> None:
    finding = _finding({"team": "vision"})
    assert finding is not None
    assert finding.reason is Reason.UNTAGGED_GPU_SPEND
    assert finding.remediable is False
    assert finding.evidence["missing_tags"] == ["project", "owner"]
    assert finding.hourly_usd == 5.672
    assert finding.evidence["monthly_usd_at_this_rate"] == round(5.672 * 730, 2)
    assert "project, owner" in finding.summary and "EC2 instance i-0a1f00000000000a3" in finding.summary
    assert finding.evidence["launched_by"] == NOT_IN_EVENT


def test_the_launch_time_scopes_the_repeat_one_alert_per_launch() -> None:
    first = _finding({"team": "vision"})
    assert first is not None and first.repeat_scope == f"launch:{LAUNCHED.isoformat()}"
    again = untagged_launch_finding(
        _instance({"team": "vision"}),
        required=REQUIRED,
        accelerators=A10G,
        launched_at=datetime(2026, 11, 21, 9, 0, tzinfo=UTC),  # stopped and started again: a new launch
        hourly_usd=5.672,
        observed_at=SEEN,
        event_id="evt-2",
    )
    assert again is not None and again.repeat_scope != first.repeat_scope


def test_nothing_is_told_without_accelerators_without_a_requirement_or_with_every_tag() -> None:
    assert _finding({"team": "vision"}, accelerators=None) is None
    assert _finding({"team": "vision"}, required=()) is None
    assert _finding({"team": "vision", "project": "detr", "owner": "li"}) is None


def test_who_launched_it_comes_from_the_tags_that_say() -> None:
    assert launched_by({"CreatedBy": "dana"}) == ("dana (CreatedBy tag)", None)
    person, via = launched_by({"aws:autoscaling:groupName": "inference-workers"})
    assert person == NOT_IN_EVENT and via == "inference-workers (aws:autoscaling:groupName)"
    finding = _finding({"team": "vision", "aws:createdBy": "IAMUser:AIDA:li"})
    assert finding is not None and finding.evidence["launched_by"] == "IAMUser:AIDA:li (aws:createdBy tag)"


def test_an_unknown_price_is_said_not_guessed() -> None:
    finding = untagged_launch_finding(
        _instance({}),
        required=REQUIRED,
        accelerators=A10G,
        launched_at=None,
        hourly_usd=None,
        observed_at=SEEN,
        event_id=None,
    )
    assert finding is not None
    assert finding.hourly_usd is None and finding.evidence["monthly_usd_at_this_rate"] is None
    assert "charged to no team" in finding.summary
    assert finding.repeat_scope is None
