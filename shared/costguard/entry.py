"""What every entry point does first: parse the event into one of the models it accepts, or reject it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ValidationError

from costguard.events.registry import model_for
from costguard.runtime import reject
from costguard.settings import get_settings


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


class OncePerEvent:
    """Run a flow at most once per event id: AWS may deliver one event several times.

    The record lives in the state table (powertools idempotency); the persistence layer is built on the
    first call, never at import, so moto can stand in for DynamoDB.
    """

    def __init__(
        self, flow: Callable[[Any], dict[str, Any]], *, expires_after_seconds: int = 24 * 3600
    ) -> None:
        self.flow = flow
        self.config = IdempotencyConfig(event_key_jmespath="id", expires_after_seconds=expires_after_seconds)
        self._once: Callable[..., dict[str, Any]] | None = None

    def register(self, context: LambdaContext) -> None:
        """Tell the idempotency layer how long this invocation has left (once per invocation)."""
        self.config.register_lambda_context(context)

    def __call__(self, event: BaseModel, context: LambdaContext | None = None) -> dict[str, Any]:
        if self._once is None:
            flow = self.flow

            def process(event: Any) -> dict[str, Any]:
                return flow(event)

            process.__name__ = process.__qualname__ = f"once_{flow.__name__}"  # the key names the flow
            persistence = DynamoDBPersistenceLayer(table_name=get_settings().state_table)
            self._once = idempotent_function(
                data_keyword_argument="event", persistence_store=persistence, config=self.config
            )(process)
        if context is not None:
            self.register(context)
        assert self._once is not None
        return self._once(event=event)
