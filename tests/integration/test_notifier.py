"""Slack delivery that loses nothing: retries, the dead-letter queue and the redrive."""

from __future__ import annotations

from costguard.local.replay import replay
from costguard.local.stack import MAX_RECEIVE_COUNT, LocalStack
from costguard.ops.redrive import redrive
from tests.conftest import EVENTS

FAILED = EVENTS / "sagemaker-training-job-failed.json"


def test_429_then_200_delivers_once_after_honouring_retry_after(
    stack: LocalStack, sleeps: list[float]
) -> None:
    stack.sink.retry_after_seconds = 3
    stack.sink.script.extend([429])
    [result] = replay(stack, [FAILED])
    assert [status for _, status in stack.sink.requests] == [429, 200]
    assert len(result.slack) == 1
    assert len(stack.sink.messages) == 1
    assert sleeps and 3 <= sleeps[0] < 4  # Retry-After plus jitter
    assert stack.queue_depth("DecisionsDeadLetterQueue") == 0


def test_server_errors_are_retried_by_the_client(stack: LocalStack, sleeps: list[float]) -> None:
    stack.sink.script.extend([503, 500])
    replay(stack, [FAILED])
    assert [status for _, status in stack.sink.requests] == [503, 500, 200]
    assert len(stack.sink.messages) == 1


def test_slack_down_ends_in_dead_letter_queue_then_redrive_delivers(stack: LocalStack) -> None:
    stack.sink.always = 500
    [result] = replay(stack, [FAILED])
    assert result.slack == []
    # Every receive tries the client's three attempts; after maxReceiveCount receives SQS moves it aside.
    assert len(stack.sink.requests) == 3 * MAX_RECEIVE_COUNT
    assert stack.queue_depth("DecisionsQueue") == 0
    assert stack.queue_depth("DecisionsDeadLetterQueue") == 1

    stack.sink.always = None  # Slack is back
    moved = redrive(stack.urls["DecisionsDeadLetterQueue"], stack.urls["DecisionsQueue"])
    assert moved == 1
    stack.drain()
    assert len(stack.sink.messages) == 1
    assert "Training job failed" in stack.sink.messages[0]["text"]
    assert stack.queue_depth("DecisionsDeadLetterQueue") == 0


def test_redelivered_notice_is_posted_once(stack: LocalStack) -> None:
    from costguard.aws import clients

    replay(stack, [FAILED])
    assert len(stack.sink.messages) == 1
    # The same notice queued again (a duplicate SQS delivery, or a redrive of a delivered message).
    clients.sqs().send_message(QueueUrl=stack.urls["DecisionsQueue"], MessageBody=stack.consumed[0])
    stack.drain()
    assert len(stack.sink.messages) == 1
