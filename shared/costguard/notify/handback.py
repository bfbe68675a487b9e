"""A notice the notifier hands back to its queue is tried again in seconds, not after the queue's visibility
timeout (24 minutes): before the invocation returns its failures, each is made visible again after a back-off
that grows with how often it was received (SQS's ApproximateReceiveCount), so a Slack that recovers is used at
once and one that stays down is not hammered. The queue's maxReceiveCount still ends in its dead-letter queue.

One ChangeMessageVisibilityBatch per ten failures of a queue. If it fails, the messages keep the visibility
timeout they were received with: later, never lost."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from costguard.aws import clients
from costguard.observability import logger, metrics
from costguard.permissions import needs

# ChangeMessageVisibilityBatch is authorized by sqs:ChangeMessageVisibility.
PERMISSIONS = needs("sqs:ChangeMessageVisibility")

FIRST_RETRY_SECONDS = 5
LONGEST_RETRY_SECONDS = 900
_SQS_BATCH = 10


def retry_after(receive_count: int) -> int:
    """Seconds before a message received ``receive_count`` times is visible again: 5, 10, 20, ... up to 15
    minutes."""
    return int(min(FIRST_RETRY_SECONDS * 2 ** max(receive_count - 1, 0), LONGEST_RETRY_SECONDS))


def queue_url(source_arn: str, known: Iterable[str] = ()) -> str:
    """The URL of the queue an SQS record came from (its eventSourceARN): one of ``known`` with that name, else
    the URL the ARN spells (``https://sqs.<region>.amazonaws.com/<account>/<name>``)."""
    parts = source_arn.split(":")
    if len(parts) != 6 or parts[2] != "sqs":
        raise ValueError(f"not an SQS queue ARN: {source_arn!r}")
    region, account, name = parts[3], parts[4], parts[5]
    for url in known:
        if url and url.rstrip("/").rsplit("/", 2)[-2:] == [account, name]:
            return url
    return f"https://sqs.{region}.amazonaws.com/{account}/{name}"


def hand_back(records: Sequence[Mapping[str, Any]], failed: Iterable[str], known: Iterable[str] = ()) -> int:
    """Make the ``failed`` records (by messageId) visible again after their back-off; how many were changed."""
    wanted = set(failed)
    by_queue: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        if record.get("messageId") in wanted and record.get("receiptHandle") and record.get("eventSourceARN"):
            try:
                url = queue_url(str(record["eventSourceARN"]), known)
            except ValueError:
                continue
            by_queue.setdefault(url, []).append(record)
    changed = 0
    for url, members in by_queue.items():
        for start in range(0, len(members), _SQS_BATCH):
            changed += _change(url, members[start : start + _SQS_BATCH])
    return changed


def _change(url: str, records: Sequence[Mapping[str, Any]]) -> int:
    entries: list[Any] = [
        {
            "Id": str(i),
            "ReceiptHandle": str(r["receiptHandle"]),
            "VisibilityTimeout": retry_after(_received(r)),
        }
        for i, r in enumerate(records)
    ]
    try:
        answer = clients.sqs().change_message_visibility_batch(QueueUrl=url, Entries=entries)
    except Exception as error:  # they come back after the visibility timeout instead
        logger.warning("hand-back not hastened", extra={"queue": url, "cause": type(error).__name__})
        metrics.add_metric(name="HandBacksNotHastened", unit=MetricUnit.Count, value=len(records))
        return 0
    if answer.get("Failed"):
        codes = sorted({f.get("Code", "?") for f in answer["Failed"]})
        logger.warning("hand-back not hastened", extra={"queue": url, "codes": codes})
        metrics.add_metric(name="HandBacksNotHastened", unit=MetricUnit.Count, value=len(answer["Failed"]))
    return len(answer.get("Successful", []))


def _received(record: Mapping[str, Any]) -> int:
    try:
        return int((record.get("attributes") or {}).get("ApproximateReceiveCount", 1))
    except (TypeError, ValueError):
        return 1
