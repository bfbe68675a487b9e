"""Move notices back to the decisions queue: from the dead-letter queue once Slack is back, and parked notices
from the failed-events queue once what Slack refused is fixed."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from costguard.aws import clients
from costguard.notify.notice import Notice
from costguard.notify.parked import is_parked_record

_MAX_STALE_ROUNDS = 5


@dataclass
class Redriven:
    moved: int = 0
    # Messages left where they were, by message id: not a notice the notifier could ever post as it is
    # (an unreadable body, a parked record), so moving them would only loop them back.
    left: dict[str, str] = field(default_factory=dict)


def redrive(dlq_url: str, target_url: str, *, limit: int = 10_000) -> int:
    """Receive, re-send and delete in batches of ten; returns how many messages moved.

    Works on AWS and on the embedded AWS alike (moto lacks StartMessageMoveTask). A message is
    deleted from the dead-letter queue only after the target queue has accepted it. What the notifier could
    never read stays in the dead-letter queue (see ``redrive_report``): it would only fail five times more.
    """
    return redrive_report(dlq_url, target_url, limit=limit).moved


def redrive_report(
    dlq_url: str, target_url: str, *, limit: int = 10_000, region: str | None = None
) -> Redriven:
    """``redrive``, saying which messages it left in the dead-letter queue and why."""
    return _move(dlq_url, target_url, _dead_lettered_notice, limit, region)


def redrive_parked(
    failed_events_url: str, target_url: str, *, limit: int = 10_000, region: str | None = None
) -> Redriven:
    """Queue parked notices (notify/parked.py) again, once what Slack refused is fixed (the webhook secret,
    say). Only parked records move, as the notice they hold; rejected events and Lambda failures stay."""
    return _move(failed_events_url, target_url, _parked_notice, limit, region)


def _dead_lettered_notice(body: str) -> tuple[str | None, str]:
    try:
        data = json.loads(body)
    except ValueError:
        return None, "not JSON: the notifier cannot read it"
    if is_parked_record(data):
        return None, "a parked notice: use redrive_parked once its cause is fixed"
    try:
        Notice.model_validate(data)
    except ValueError:
        return None, "not a notice: the notifier cannot read it"
    return body, ""


def queue_region(url: str) -> str | None:
    """The region in an SQS queue URL (``https://sqs.eu-west-1.amazonaws.com/...``); None for another form."""
    host = url.split("://", 1)[-1].split("/", 1)[0].split(".")
    return host[1] if len(host) > 3 and host[0] == "sqs" else None


def _parked_notice(body: str) -> tuple[str | None, str]:
    try:
        data: Any = json.loads(body)
    except ValueError:
        return None, "not a parked notice"
    if not is_parked_record(data):
        return None, "not a parked notice"
    return json.dumps(data["notice"]), ""


def _move(
    source_url: str,
    target_url: str,
    convert: Callable[[str], tuple[str | None, str]],
    limit: int,
    region: str | None = None,
) -> Redriven:
    sqs = clients.sqs(region or queue_region(source_url))
    result = Redriven()
    seen: set[str] = set()
    stale_rounds = 0
    while result.moved < limit:
        messages = sqs.receive_message(QueueUrl=source_url, MaxNumberOfMessages=10, VisibilityTimeout=30).get(
            "Messages", []
        )
        if not messages:
            break
        fresh = [m for m in messages if m["MessageId"] not in seen]
        if not fresh:
            stale_rounds += 1  # only what was left before, back in view after its visibility timeout
            if stale_rounds >= _MAX_STALE_ROUNDS:
                break
            continue
        stale_rounds = 0
        seen.update(m["MessageId"] for m in fresh)
        movable: list[tuple[Any, str]] = []
        for message in fresh:
            body, why = convert(message["Body"])
            if body is None:
                result.left[message["MessageId"]] = why
            else:
                movable.append((message, body))
        if not movable:
            continue
        sent = sqs.send_message_batch(
            QueueUrl=target_url,
            Entries=[{"Id": str(i), "MessageBody": body} for i, (_, body) in enumerate(movable)],
        )
        accepted = {int(entry["Id"]) for entry in sent.get("Successful", [])}
        if accepted:
            sqs.delete_message_batch(
                QueueUrl=source_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": movable[i][0]["ReceiptHandle"]} for i in sorted(accepted)
                ],
            )
        result.moved += len(accepted)
        if len(accepted) < len(movable):
            break  # the target refused some: stop rather than spin; they stay where they were
    return result
