"""Move notices from the dead-letter queue back to the decisions queue (Slack is back)."""

from __future__ import annotations

from costguard.aws import clients


def redrive(dlq_url: str, target_url: str, *, limit: int = 10_000) -> int:
    """Receive, re-send and delete in batches of ten; returns how many messages moved.

    Works on AWS and on the embedded AWS alike (moto lacks StartMessageMoveTask). A message is
    deleted from the dead-letter queue only after the target queue has accepted it.
    """
    sqs = clients.sqs()
    moved = 0
    while moved < limit:
        messages = sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=30).get(
            "Messages", []
        )
        if not messages:
            break
        sent = sqs.send_message_batch(
            QueueUrl=target_url,
            Entries=[{"Id": str(i), "MessageBody": m["Body"]} for i, m in enumerate(messages)],
        )
        accepted = {int(entry["Id"]) for entry in sent.get("Successful", [])}
        if accepted:
            sqs.delete_message_batch(
                QueueUrl=dlq_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": messages[i]["ReceiptHandle"]} for i in sorted(accepted)
                ],
            )
        moved += len(accepted)
        if len(accepted) < len(messages):
            break  # the target refused some: stop rather than spin; they stay in the dead-letter queue
    return moved
