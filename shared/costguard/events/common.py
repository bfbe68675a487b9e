"""Types shared by event models: AWS timestamps in their several spellings."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BeforeValidator

# Epoch values above this are milliseconds (year 5138 in seconds); AWS mixes both spellings.
_MILLIS_FLOOR = 100_000_000_000


def to_datetime(value: Any) -> Any:
    """Accept epoch seconds or millis (number or numeric string) and ISO 8601; always return aware UTC."""
    if isinstance(value, bool):
        raise ValueError("a boolean is not a time")
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text)
        except ValueError:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        seconds = value / 1000 if abs(value) >= _MILLIS_FLOOR else value
        return datetime.fromtimestamp(seconds, tz=UTC)
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return value


AwsTime = Annotated[datetime, BeforeValidator(to_datetime)]
