"""What every entry point does first: parse the event into one of the models it accepts, or reject it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from costguard.events.registry import model_for
from costguard.runtime import reject


class Rejected(Exception):
    """The event was malformed; it has been logged, counted and kept. ``result`` is the handler's answer."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result.get("problem"))
        self.result = result


def parse_event(event: Any, accepted: tuple[type[BaseModel], ...], *, function: str) -> BaseModel:
    """The typed event, or Rejected after the event was kept in the failed-events queue."""
    model = model_for(event) if isinstance(event, dict) else None
    if model is None or model not in accepted:
        shape = (
            (event.get("source"), event.get("detail-type"))
            if isinstance(event, dict)
            else type(event).__name__
        )
        raise Rejected(
            reject(event, ValueError(f"{function} does not handle events shaped {shape}"), function=function)
        )
    try:
        return model.model_validate(event)
    except (ValidationError, ValueError, TypeError) as error:
        raise Rejected(reject(event, error, function=function)) from None
