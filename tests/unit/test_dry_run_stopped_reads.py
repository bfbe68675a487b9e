"""A notify-mode mark whose stop a dry run has decided is read like a standing finding, not at every sweep: a live
run has stopped that instance, so nothing decided of it can change at any minute (GetMetricData is the bill)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from costguard.act.shadow import Shadow, marked_tags, shown_tags
from costguard.detect.read_schedule import Entry, Kind, is_due, is_standing, pending, tags_digest
from costguard.model import DRY_RUN_STOPPED_TAG_KEY, MARK_TAG_KEY

NOW = datetime(2026, 11, 20, 12, 30, tzinfo=UTC)
MARK = "2026-11-20T12:00:00+00:00"


def test_a_mark_waiting_out_its_grace_is_read_at_every_sweep_a_decided_stop_is_not() -> None:
    waiting = marked_tags({"team": "ml"}, Shadow(mark=MARK))
    decided = marked_tags({"team": "ml"}, Shadow(mark=MARK, stopped=NOW - timedelta(minutes=15)))
    assert waiting is not None and decided is not None
    assert pending(waiting) and not pending(decided)
    standing = Entry(Kind.STANDING, due=NOW + timedelta(minutes=20), anchor=NOW, tags=tags_digest(decided))
    assert is_due(standing, NOW, tags=waiting, launched=None)  # a grace period: every sweep
    assert not is_due(standing, NOW, tags=decided, launched=None)  # its slot, not before
    assert is_due(standing, NOW + timedelta(minutes=20), tags=decided, launched=None)
    assert is_standing(standing, tags=decided, launched=None)


def test_a_message_shows_neither_the_shadow_mark_nor_the_decided_stop() -> None:
    shadow = Shadow(mark=MARK, stopped=NOW)
    tags = marked_tags({"team": "ml"}, shadow)
    assert tags is not None and {MARK_TAG_KEY, DRY_RUN_STOPPED_TAG_KEY} <= set(tags)
    assert shown_tags(tags, shadow) == {"team": "ml"}
    assert (
        shown_tags({"team": "ml", MARK_TAG_KEY: "2026-11-20T11:00:00+00:00"}, shadow) is None
    )  # its own tag


def test_the_marker_written_on_an_instance_by_anyone_is_not_read() -> None:
    """Only notify mode's overlay adds the marker: the same tag on the instance itself (anyone may tag it) would
    otherwise move a marked instance in its grace period off the every-sweep reads, and delay its stop."""
    from costguard.aws.inventory import instance_from_api

    item = {
        "InstanceId": "i-0a1f00000000000a1",
        "InstanceType": "g5.xlarge",
        "State": {"Name": "running"},
        "Tags": [
            {"Key": MARK_TAG_KEY, "Value": MARK},
            {"Key": DRY_RUN_STOPPED_TAG_KEY, "Value": NOW.isoformat()},
        ],
    }
    instance = instance_from_api(item, "123456789012", "us-east-1", {"g5.xlarge": None})
    assert DRY_RUN_STOPPED_TAG_KEY not in instance.tags and pending(instance.tags)
