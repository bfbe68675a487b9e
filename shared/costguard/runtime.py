"""What a handler needs to act, built once per process from the settings."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from costguard.act.aws import AwsRemediator
from costguard.act.executor import Remediator, StopLimiter
from costguard.act.limits import PERMISSIONS as STOP_CAP_PERMISSIONS
from costguard.act.limits import DynamoStopLimiter
from costguard.aws import clients
from costguard.model import Finding
from costguard.notify.dedupe import PERMISSIONS as REPEAT_GATE_PERMISSIONS
from costguard.notify.dedupe import DynamoRepeatGate, RepeatGate
from costguard.notify.mutes import PERMISSIONS as MUTE_PERMISSIONS
from costguard.notify.mutes import DynamoMutes, MuteReader
from costguard.notify.queue import PERMISSIONS as QUEUE_PERMISSIONS
from costguard.notify.queue import NoticeQueue, SqsNoticeQueue
from costguard.observability import logger, metrics
from costguard.permissions import needs
from costguard.pipeline import Report, act_on
from costguard.policy import Policy
from costguard.pricing import PriceBook, price_book
from costguard.pricing.live import PERMISSIONS as LIVE_PRICE_PERMISSIONS
from costguard.settings import Settings, get_settings

# Runtime.act: notices queued, repeats gated, stops counted against the hourly cap. What the remediator calls
# depends on the kinds of resource a flow may remediate (act.aws.permissions_for).
ACT_PERMISSIONS = QUEUE_PERMISSIONS | REPEAT_GATE_PERMISSIONS | STOP_CAP_PERMISSIONS | MUTE_PERMISSIONS
PRICES_PERMISSIONS = LIVE_PRICE_PERMISSIONS  # Runtime.prices, when the price source is live
REJECT_PERMISSIONS = needs("sqs:SendMessage")  # reject keeps the event in the failed-events queue


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    remediator: Remediator
    queue: NoticeQueue
    gate: RepeatGate
    prices: PriceBook
    limiter: StopLimiter | None = None
    mutes: MuteReader | None = None

    @property
    def policy(self) -> Policy:
        s = self.settings
        return Policy(
            dry_run=s.dry_run,
            protect_tag_key=s.protect_tag_key,
            grace=timedelta(minutes=s.grace_minutes),
            max_stops=s.max_stops_per_run,
        )

    @property
    def repeat_window(self) -> timedelta:
        return timedelta(minutes=self.settings.dedupe_window_minutes)

    def act(self, findings: list[Finding], now: datetime) -> Report:
        """The decide-then-act path with this process's policy, executor and notifier."""
        return act_on(
            findings,
            policy=self.policy,
            now=now,
            remediator=self.remediator,
            queue=self.queue,
            gate=self.gate,
            repeat_window=self.repeat_window,
            limiter=self.limiter,
            routing_tag_key=self.settings.routing_tag_key,
            group_above=self.settings.slack_group_above,
            mutes=self.mutes,
            source=os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME"),
        )


@lru_cache(maxsize=1)
def runtime() -> Runtime:
    settings = get_settings()
    return Runtime(
        settings=settings,
        remediator=AwsRemediator(),
        queue=SqsNoticeQueue(settings.decisions_queue_url),
        gate=DynamoRepeatGate(settings.state_table),
        prices=price_book(live=settings.price_source == "live"),
        limiter=DynamoStopLimiter(settings.state_table, settings.max_stops_per_hour),
        mutes=DynamoMutes(settings.state_table),
    )


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
