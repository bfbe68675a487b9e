"""What every entry point does first: parse the event into one of the models it accepts, or reject it.

powertools' idempotency utility (and the boto3 it loads) is imported by OncePerEvent's first call, not here: a
handler that rejects its event, or has no OncePerEvent, never loads it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ValidationError

from costguard.aws import clients
from costguard.events.common import sns_message
from costguard.events.registry import model_for, sns_content_of
from costguard.observability import logger, metrics
from costguard.permissions import needs
from costguard.settings import get_settings

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig
    from aws_lambda_powertools.utilities.typing import LambdaContext

# Every accepted model is an EventBridge envelope whose region and account become endpoints and ARNs:
# a region botocore cannot resolve must be rejected here, not fail deep inside a flow.
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-[0-9]{1,2}")
_ACCOUNT = re.compile(r"[0-9]{12}")  # ASCII digits: \d also takes other scripts' digits

REJECT_PERMISSIONS = needs("sqs:SendMessage")  # reject keeps the event in the failed-events queue

# AWS event ids are UUIDs; a longer "id" is hostile input and is cut before it is logged or kept.
_MAX_ID = 200
# SQS refuses bodies over 256 KiB; json.dumps escapes to ASCII, so characters are bytes.
_MAX_KEPT_BODY = 250_000


def event_id(event: Any) -> str:
    """The id to log for any payload shape (EventBridge id, SQS messageId, SNS MessageId)."""
    if isinstance(event, dict):
        for key in ("id", "messageId", "MessageId"):
            if isinstance(event.get(key), str):
                return _shown(event[key])
        records = event.get("Records")
        if isinstance(records, list) and records and isinstance(records[0], dict):
            sns = records[0].get("Sns")
            if isinstance(sns, dict) and isinstance(sns.get("MessageId"), str):
                return _shown(sns["MessageId"])
    return "unknown"


def _shown(value: str) -> str:
    """An id as logged: cut to a sane length, and an empty or blank one named as such."""
    return value[:_MAX_ID] if value.strip() else "empty"


def reject(event: Any, error: Exception, *, function: str) -> dict[str, Any]:
    """A malformed event: log it with its id, count it, and keep it in the failed-events queue.

    If it cannot be kept, the exception propagates so Lambda's own failure destination keeps it.
    """
    eid = event_id(event)
    problem = str(error)[:2000]
    logger.error(
        "rejected malformed event", extra={"event_id": eid, "function": function, "problem": problem}
    )
    metrics.add_metric(name="RejectedEvents", unit=MetricUnit.Count, value=1)
    kept: dict[str, Any] = {"function": function, "event_id": eid, "problem": problem, "event": event}
    body = json.dumps(kept, default=str)
    if len(body) > _MAX_KEPT_BODY:
        # Too big for SQS: keep the event's own JSON text cut to fit, so the message stays readable JSON.
        kept["event"] = json.dumps(event, default=str)[: _MAX_KEPT_BODY // 3]
        kept["event_truncated"] = True
        body = json.dumps(kept, default=str)
    clients.sqs().send_message(QueueUrl=get_settings().failed_events_queue_url, MessageBody=body)
    return {"rejected": True, "event_id": eid, "problem": problem}


def _check_envelope(parsed: BaseModel) -> BaseModel:
    # The id keys idempotency (OncePerEvent): with none, a redelivery would act twice. Powertools would skip
    # the idempotency record for an empty key and run the flow anyway, so an empty id is a malformed event.
    # (EventBridge: "id"; an SNS delivery: Records[0].Sns.MessageId, the model's ``id``.)
    eid = getattr(parsed, "id", None)
    if isinstance(eid, str) and not eid.strip():
        raise ValueError(
            "the event id is empty: a redelivery could not be told apart, so it is not processed"
        )
    region, account = getattr(parsed, "region", None), getattr(parsed, "account", None)
    if isinstance(region, str) and not _REGION.fullmatch(region):
        raise ValueError(f"region {region[:40]!r} is not an AWS region")
    if isinstance(account, str) and not _ACCOUNT.fullmatch(account):
        raise ValueError(f"account {account[:40]!r} is not an AWS account id")
    return parsed


def _shape(event: Any) -> str:
    """What an unhandled event looks like, for the rejection's problem text."""
    if not isinstance(event, dict):
        return f"events shaped {type(event).__name__}"
    if sns_message(event) is not None:
        return f"SNS notifications of {sns_content_of(event) or 'unknown content'}"
    return f"events shaped {(event.get('source'), event.get('detail-type'))}"


PARSE_PERMISSIONS = REJECT_PERMISSIONS  # parse_event
# OncePerEvent: powertools idempotency reads, writes, completes and (when the flow fails) deletes its record.
ONCE_PERMISSIONS = needs("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")


class Rejected(Exception):
    """The event was malformed; it has been logged, counted and kept. ``result`` is the handler's answer."""

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(result.get("problem"))
        self.result = result


def parse_event(event: Any, accepted: tuple[type[BaseModel], ...], *, function: str) -> BaseModel:
    """The typed event, or Rejected after the event was kept in the failed-events queue."""
    model = model_for(event) if isinstance(event, dict) else None
    if model is None or model not in accepted:
        raise Rejected(
            reject(event, ValueError(f"{function} does not handle {_shape(event)}"), function=function)
        )
    try:
        parsed = _check_envelope(model.model_validate(event))
    except (ValidationError, ValueError, TypeError) as error:
        raise Rejected(reject(event, error, function=function)) from None
    # A forwarded event acts in its own account: the watched services' calls of this invocation go through that
    # account's member role (the hub's own account, or a single-account deployment, assumes nothing).
    account = getattr(parsed, "account", None)
    clients.enter_account(account if isinstance(account, str) else None)
    return parsed


# A DynamoDB item stops at 400 KB. A result echoing a huge event field is kept in short form: otherwise the
# record of a flow that has already acted could not be saved, and every retry would fail as "in progress".
_MAX_STORED_RESULT = 300_000


def _storable(result: dict[str, Any]) -> dict[str, Any]:
    if len(json.dumps(result, default=str)) <= _MAX_STORED_RESULT:
        return result
    counted = {k: len(v) if isinstance(v, list | dict | str) else v for k, v in result.items()}
    return {**counted, "result_truncated": True}


class OncePerEvent:
    """Run a flow at most once per event id: AWS may deliver one event several times.

    The record lives in the state table (powertools idempotency); the persistence layer is built on the
    first call, never at import, so moto can stand in for DynamoDB.
    """

    def __init__(
        self,
        flow: Callable[[Any], dict[str, Any]],
        *,
        expires_after_seconds: int = 24 * 3600,
        key: str = "id",
    ) -> None:
        """``key`` is the JMESPath of the event id in the dumped model (SNS deliveries keep it deeper)."""
        self.flow = flow
        self.key = key
        self.expires_after_seconds = expires_after_seconds
        self._config: IdempotencyConfig | None = None
        self._once: Callable[..., dict[str, Any]] | None = None

    @property
    def config(self) -> IdempotencyConfig:
        """The idempotency settings, built (and the utility loaded) at the first use."""
        if self._config is None:
            from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig

            self._config = IdempotencyConfig(
                event_key_jmespath=self.key, expires_after_seconds=self.expires_after_seconds
            )
        return self._config

    def register(self, context: LambdaContext) -> None:
        """Tell the idempotency layer how long this invocation has left (once per invocation)."""
        self.config.register_lambda_context(context)

    def __call__(self, event: BaseModel, context: LambdaContext | None = None) -> dict[str, Any]:
        if self._once is None:
            self._once = self._build()
        if context is not None:
            self.register(context)
        return self._once(event=event)

    def _build(self) -> Callable[..., dict[str, Any]]:
        from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, idempotent_function

        flow = self.flow

        def process(event: Any) -> dict[str, Any]:
            return _storable(flow(event))

        process.__name__ = process.__qualname__ = f"once_{flow.__name__}"  # the key names the flow
        persistence = DynamoDBPersistenceLayer(table_name=get_settings().state_table)
        return idempotent_function(  # type: ignore[no-any-return]
            data_keyword_argument="event", persistence_store=persistence, config=self.config
        )(process)
