"""Shared by event models: AWS timestamps in their several spellings, strict or lenient; an SNS delivery's message."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BeforeValidator

# Epoch values above this are milliseconds (year 5138 in seconds); AWS mixes both spellings.
_MILLIS_FLOOR = 100_000_000_000


def to_datetime(value: Any) -> datetime:
    """Accept epoch seconds or millis (number or numeric string) and ISO 8601; always return aware UTC.

    Anything else raises ValueError, so pydantic reports it as a validation error naming the field.
    """
    if isinstance(value, bool):
        raise ValueError("a boolean is not a time")
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text)
        except ValueError:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
            return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a time")
        seconds = value / 1000 if abs(value) >= _MILLIS_FLOOR else value
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError):
            raise ValueError(f"{value!r} is out of range for a time") from None
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    raise ValueError(f"expected a time, got {type(value).__name__}")


AwsTime = Annotated[datetime, BeforeValidator(to_datetime)]


def time_or_none(value: Any) -> datetime | None:
    """A time when it reads as one, else None: for envelope fields costguard does not act on."""
    try:
        return to_datetime(value)
    except (ValueError, TypeError):
        return None


LenientAwsTime = Annotated[datetime | None, BeforeValidator(time_or_none)]
"""A time that never rejects the message it is part of: an unreadable value becomes None.

Only for fields costguard does not need (an SNS envelope's ``Timestamp``); a field a decision depends on stays
``AwsTime`` and rejects the event when it is malformed."""


def sns_message(event: dict[str, Any]) -> str | None:
    """The message text of an SNS delivery, or None when the event is not one."""
    records = event.get("Records")
    if not isinstance(records, list) or len(records) != 1 or not isinstance(records[0], dict):
        return None
    record = records[0]
    sns = record.get("Sns")
    if record.get("EventSource") != "aws:sns" or not isinstance(sns, dict):
        return None
    message = sns.get("Message")
    return message if isinstance(message, str) else None


def json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
