"""act/arming.py: an arming tag counts as costguard first saw it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard.act.arming import (
    ARMING_KEYS,
    LISTING_LAG,
    FirstSeen,
    MemoryArmingRecords,
    Sighting,
    change_of,
    first_sight,
    observe,
    scope_of,
    vouch,
)
from costguard.detect.bedrock import AUTO_DELETE_TAG
from costguard.detect.capacity import AUTO_CANCEL_TAG
from costguard.detect.eks import SCALE_TO_ZERO_LABEL
from costguard.detect.training_guardrails import MAX_HOURS_TAG, MAX_USD_TAG
from costguard.detect.training_hang import HANG_TAG
from costguard.detect.training_health import STOP_ON_DIVERGENCE_TAG
from costguard.model import Finding, Reason, Resource, ResourceKind

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SCOPE = scope_of("123456789012", "us-east-1", ResourceKind.TRAINING_JOB)


def job(name: str, tags: dict[str, str], started: datetime | None = None) -> Resource:
    return Resource(
        kind=ResourceKind.TRAINING_JOB,
        id=name,
        account="123456789012",
        region="us-east-1",
        tags=tags,
        started=started,
    )


def over(resource: Resource, armed_by: dict[str, str]) -> Finding:
    return Finding(
        reason=Reason.JOB_COST_CEILING,
        resource=resource,
        summary="over",
        observed_at=NOW,
        remediable=True,
        armed_by=armed_by,
    )


def test_every_tag_a_detector_arms_an_action_with_is_an_arming_key() -> None:
    used = {
        MAX_USD_TAG,
        MAX_HOURS_TAG,
        STOP_ON_DIVERGENCE_TAG,
        HANG_TAG,
        AUTO_DELETE_TAG,
        AUTO_CANCEL_TAG,
        SCALE_TO_ZERO_LABEL,
    }
    assert used == set(ARMING_KEYS)


@pytest.mark.parametrize(
    ("key", "first", "now", "arms"),
    [
        (MAX_USD_TAG, {MAX_USD_TAG: "60"}, "60", True),
        (MAX_USD_TAG, {MAX_USD_TAG: "60"}, "70", True),  # loosened: over 70 is over 60
        (MAX_USD_TAG, {MAX_USD_TAG: "60"}, "59.99", False),  # tightened
        (MAX_USD_TAG, {MAX_USD_TAG: "junk"}, "60", False),  # nothing comparable first
        (MAX_USD_TAG, {}, "0.01", False),  # added later
        (MAX_HOURS_TAG, {MAX_HOURS_TAG: "$4"}, "4", True),
        (AUTO_DELETE_TAG, {AUTO_DELETE_TAG: "true"}, "TRUE", True),
        (AUTO_DELETE_TAG, {AUTO_DELETE_TAG: "false"}, "true", False),
        (AUTO_DELETE_TAG, {}, "true", False),
    ],
)
def test_a_tag_arms_only_as_first_seen_or_a_ceiling_loosened(
    key: str, first: dict[str, str], now: str, arms: bool
) -> None:
    assert (change_of(key, now, FirstSeen(first, NOW)) is None) is arms


def test_first_sight_trusts_a_resource_created_since_the_previous_sweep_and_no_other() -> None:
    previous = NOW - timedelta(minutes=15)
    tags = {MAX_USD_TAG: "10", "team": "a"}
    new = first_sight(Sighting("k", previous + timedelta(minutes=1), tags), previous, True, NOW)
    assert new.tags == {MAX_USD_TAG: "10"} and not new.later
    lag = first_sight(Sighting("k", previous - LISTING_LAG, tags), previous, True, NOW)
    assert lag.tags == {MAX_USD_TAG: "10"}
    old = first_sight(Sighting("k", previous - timedelta(hours=3), tags), previous, True, NOW)
    assert old.tags == {} and old.later
    unknown = first_sight(Sighting("k", None, tags), previous, True, NOW)
    assert unknown.tags == {}  # no creation time: not shown to be new
    install = first_sight(Sighting("k", previous - timedelta(days=9), tags), None, False, NOW)
    assert install.tags == {MAX_USD_TAG: "10"}  # costguard's first look at the kind


def test_observe_records_each_armed_resource_once_and_reads_in_one_call() -> None:
    records = MemoryArmingRecords()
    sightings = [Sighting(f"job-{i}", NOW - timedelta(days=1), {MAX_USD_TAG: "5"}) for i in range(150)]
    sightings += [Sighting(f"plain-{i}", NOW - timedelta(days=1), {"team": "a"}) for i in range(300)]
    first = observe(records, SCOPE, sightings, NOW)
    assert len(first) == 150 and all(f.tags == {MAX_USD_TAG: "5"} for f in first.values())
    assert records.calls == {"census": 1, "read": 1, "keep": 150}
    records.calls.clear()
    observe(records, SCOPE, sightings, NOW + timedelta(minutes=15))
    assert records.calls == {"census": 1, "read": 1}  # nothing written while nothing changes


def test_a_tag_added_to_a_resource_seen_before_is_recorded_as_added_later() -> None:
    records = MemoryArmingRecords()
    observe(records, SCOPE, [Sighting("job", NOW - timedelta(days=1), {})], NOW)
    later = NOW + timedelta(minutes=15)
    found = observe(records, SCOPE, [Sighting("job", NOW - timedelta(days=1), {MAX_USD_TAG: "0.01"})], later)
    assert found["job"].tags == {} and found["job"].later
    [told] = vouch([over(job("job", {MAX_USD_TAG: "0.01"}), {MAX_USD_TAG: "0.01"})], records, later)
    assert not told.remediable
    assert "costguard:max-usd=0.01 was added after costguard first saw it" in (told.report_note or "")
    assert told.evidence["Arming tag"]


def test_vouch_records_an_unrecorded_resource_by_its_scopes_census() -> None:
    records = MemoryArmingRecords()
    records.census(SCOPE, NOW - timedelta(minutes=15))
    new = over(job("new", {MAX_USD_TAG: "1"}, started=NOW - timedelta(minutes=5)), {MAX_USD_TAG: "1"})
    old = over(job("old", {MAX_USD_TAG: "1"}, started=NOW - timedelta(hours=5)), {MAX_USD_TAG: "1"})
    kept_new, kept_old = vouch([new, old], records, NOW)
    assert kept_new.remediable and not kept_old.remediable


def test_nothing_armed_by_a_tag_acts_when_the_records_cannot_be_read() -> None:
    records = MemoryArmingRecords(fail=True)
    plain = over(job("plain", {}), {})  # armed by the deployment's own settings
    [armed, settings] = vouch([over(job("j", {MAX_USD_TAG: "1"}), {MAX_USD_TAG: "1"}), plain], records, NOW)
    assert not armed.remediable and "cannot be checked" in (armed.report_note or "")
    assert settings.remediable
    assert observe(records, SCOPE, [Sighting("j", NOW, {MAX_USD_TAG: "1"})], NOW) == {}
