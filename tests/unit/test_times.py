"""AWS timestamps in their several spellings all become the same aware UTC datetime."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from costguard.events.common import to_datetime

EXPECTED = datetime(2026, 11, 20, 6, 32, 0, tzinfo=UTC)
EPOCH_SECONDS = 1795156320  # EXPECTED as epoch seconds


@pytest.mark.parametrize(
    "value",
    [
        EPOCH_SECONDS * 1000,  # epoch millis, int
        str(EPOCH_SECONDS * 1000),  # epoch millis, string
        f" {EPOCH_SECONDS * 1000} ",  # with surrounding space
        EPOCH_SECONDS,  # epoch seconds, int
        str(EPOCH_SECONDS),  # epoch seconds, string
        float(EPOCH_SECONDS),  # epoch seconds, float
        "2026-11-20T06:32:00Z",  # ISO with Z
        "2026-11-20T06:32:00+00:00",  # ISO with a zero offset
        "2026-11-20T06:32:00",  # naive ISO: read as UTC
        datetime(2026, 11, 20, 6, 32),  # naive datetime: read as UTC
    ],
)
def test_every_spelling_gives_the_same_aware_utc_time(value: object) -> None:
    parsed = to_datetime(value)
    assert isinstance(parsed, datetime)
    assert parsed.tzinfo is not None
    assert parsed.utcoffset() == timedelta(0)
    assert parsed == EXPECTED


def test_an_offset_spelling_gives_the_same_instant() -> None:
    parsed = to_datetime("2026-11-20T08:32:00+02:00")
    assert parsed.tzinfo is not None
    assert parsed == EXPECTED


def test_millis_keep_their_fraction() -> None:
    parsed = to_datetime(EPOCH_SECONDS * 1000 + 250)
    assert parsed == EXPECTED.replace(microsecond=250_000)


@pytest.mark.parametrize("value", [True, False])
def test_booleans_are_rejected(value: bool) -> None:
    with pytest.raises(ValueError, match="boolean"):
        to_datetime(value)


@pytest.mark.parametrize("value", ["not a time", "", "2026-13-45T99:00:00Z"])
def test_garbage_strings_raise_value_error(value: str) -> None:
    with pytest.raises(ValueError):
        to_datetime(value)
