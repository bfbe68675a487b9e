"""A Slack webhook secret nobody filled in is told through the ops SNS topic, which needs no Slack: one message
per cold start, logged and counted; the notice itself is retried (no value yet) or parked (blank), as before."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError
from moto import mock_aws

from costguard.aws import clients
from costguard.flows.notifier import routes_for
from costguard.local.replay import replay
from costguard.local.sink import SlackSink
from costguard.local.stack import SECRET, LocalStack
from costguard.local.world import World
from costguard.notify import ops_topic as flow
from costguard.notify.delivery import (
    DeliveryError,
    EmptySecretError,
    MalformedSecretError,
    PermanentDeliveryError,
    UnsetSecretError,
)
from costguard.observability import logger
from costguard.settings import Settings
from tests.conftest import EVENTS
from tests.integration.conftest import drain, subscribe_queue

FAILED_JOB = EVENTS / "sagemaker-training-job-failed.json"
REGION = "us-east-1"
TOPIC = "costguard-ops"
# What notify/delivery.load_routes says of each secret (its messages never echo the secret's content).
NO_VALUE = "the Slack webhook secret has no value yet"
EMPTY = "the Slack webhook secret is empty"
MALFORMED = "the Slack webhook secret must be an https:// URL or a JSON routing map"
# Secrets Manager's answer for a secret that does not exist (not "... secret value for staging label": no value).
NO_SUCH_SECRET = r"\(ResourceNotFoundException\).*can't find the specified secret\.$"


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    """A cold start: nothing told yet, no secret cached by powertools."""
    import aws_lambda_powertools.utilities.parameters.base as parameters_base

    from costguard.observability import metrics

    flow._told.clear()
    parameters_base.DEFAULT_PROVIDERS.clear()  # type: ignore[attr-defined]
    metrics.clear_metrics()
    yield
    flow._told.clear()
    parameters_base.DEFAULT_PROVIDERS.clear()  # type: ignore[attr-defined]
    metrics.clear_metrics()


def _inbox(url: str, region: str = REGION) -> list[str]:
    return drain(boto3.client("sqs", region_name=region), url)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    with mock_aws():
        topic = boto3.client("sns", region_name=REGION).create_topic(Name=TOPIC)["TopicArn"]
        monkeypatch.setenv(flow.OPS_TOPIC_VARIABLE, topic)
        secrets = boto3.client("secretsmanager", region_name=REGION)
        unset = secrets.create_secret(Name="costguard/slack-unset")["ARN"]  # as the stack creates it
        blank = secrets.create_secret(Name="costguard/slack-blank", SecretString="  \n")["ARN"]
        yield {"topic": topic, "inbox": subscribe_queue(topic), "unset": unset, "blank": blank}


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The notifier flow's error lines (powertools' handler writes to the stdout it found at import)."""
    lines: list[str] = []
    monkeypatch.setattr(logger, "error", lambda message, *_, **__: lines.append(str(message)))
    return lines


def _deliver(secret: str) -> None:
    """What the notifier does first with every batch: read the routes (flows/notifier.routes_for)."""
    routes_for(Settings(slack_secret_id=secret))


def test_a_secret_with_no_value_is_told_once_on_the_ops_topic_and_the_notice_is_retried(
    aws: dict[str, str], logged: list[str]
) -> None:
    from costguard.observability import metrics

    for _ in range(3):
        with pytest.raises(UnsetSecretError, match=NO_VALUE) as raised:
            _deliver(aws["unset"])
        # Retried as before (back to the queue, then the dead-letter queue): not a permanent refusal.
        assert isinstance(raised.value, DeliveryError)
        assert not isinstance(raised.value, PermanentDeliveryError)
    [message] = _inbox(aws["inbox"])
    assert "has no value yet" in message
    assert aws["unset"] in message  # which secret to fill
    assert "put-secret-value" in message
    assert logged == ["Slack webhook secret not filled"]
    assert metrics.metric_set["SlackSecretNotFilled"]["Value"] == [1.0]


def test_a_blank_secret_is_told_once_and_still_parks_the_notice(aws: dict[str, str]) -> None:
    for _ in range(2):
        with pytest.raises(EmptySecretError, match=EMPTY) as raised:
            _deliver(aws["blank"])
        assert isinstance(raised.value, MalformedSecretError)  # parked, as a malformed secret always was
    [message] = _inbox(aws["inbox"])
    assert "is empty" in message
    assert aws["blank"] in message


def test_once_per_cold_start_then_again_after_the_next(aws: dict[str, str]) -> None:
    with pytest.raises(UnsetSecretError, match=NO_VALUE):
        _deliver(aws["unset"])
    with pytest.raises(UnsetSecretError, match=NO_VALUE):
        _deliver(aws["unset"])
    assert len(_inbox(aws["inbox"])) == 1
    flow._told.clear()  # a new cold start
    with pytest.raises(UnsetSecretError, match=NO_VALUE):
        _deliver(aws["unset"])
    assert len(_inbox(aws["inbox"])) == 1


def test_a_malformed_or_missing_secret_is_not_told_on_the_ops_topic(aws: dict[str, str]) -> None:
    secrets = boto3.client("secretsmanager", region_name=REGION)
    text = secrets.create_secret(Name="costguard/slack-text", SecretString="not a url")["ARN"]
    with pytest.raises(MalformedSecretError, match=MALFORMED) as raised:
        _deliver(text)
    assert not isinstance(raised.value, EmptySecretError)
    # A wrong ARN: as before (Secrets Manager's ResourceNotFoundException, through powertools' parameters), not
    # an unfilled secret.
    with pytest.raises(GetParameterError, match=NO_SUCH_SECRET) as missing:
        _deliver(f"arn:aws:secretsmanager:{REGION}:123456789012:secret:nope-AbCdEf")
    assert not isinstance(missing.value, UnsetSecretError)
    assert _inbox(aws["inbox"]) == []


def test_without_an_ops_topic_it_is_logged_and_counted_only(
    aws: dict[str, str], monkeypatch: pytest.MonkeyPatch, logged: list[str]
) -> None:
    from costguard.observability import metrics

    monkeypatch.delenv(flow.OPS_TOPIC_VARIABLE)
    with pytest.raises(UnsetSecretError, match=NO_VALUE):
        _deliver(aws["unset"])
    assert _inbox(aws["inbox"]) == []
    assert logged == ["Slack webhook secret not filled"]
    assert metrics.metric_set["SlackSecretNotFilled"]["Value"] == [1.0]


def test_an_ops_topic_that_refuses_does_not_change_the_notices_fate(
    aws: dict[str, str], monkeypatch: pytest.MonkeyPatch, logged: list[str]
) -> None:
    monkeypatch.setenv(flow.OPS_TOPIC_VARIABLE, f"arn:aws:sns:{REGION}:123456789012:gone")
    with pytest.raises(UnsetSecretError, match=NO_VALUE):
        _deliver(aws["unset"])
    assert _inbox(aws["inbox"]) == []
    assert logged == ["Slack webhook secret not filled", "ops topic refused the message"]


# -- through the notifier's handler on the local stack ------------------------------------------------------


def test_the_notifier_parks_a_blank_secrets_notice_and_tells_the_ops_topic_once(
    world: World, sink: SlackSink, sleeps: list[float], capsys: pytest.CaptureFixture[str]
) -> None:
    topic_arn = f"arn:aws:sns:{world.region}:{world.account}:{TOPIC}"
    with LocalStack(world, sink=sink, overrides={flow.OPS_TOPIC_VARIABLE: topic_arn}) as stack:
        clients.client("sns").create_topic(Name=TOPIC)
        inbox = subscribe_queue(topic_arn, world.region)
        clients.client("secretsmanager").put_secret_value(SecretId=SECRET, SecretString=" ")
        for _ in range(2):
            [result] = replay(stack, [FAILED_JOB])
            assert result.ok, result.error
        assert sink.requests == []  # nothing reached Slack
        parked = _parked(stack)
        assert len(parked) >= 1 and all("empty" in p["problem"] for p in parked)
        assert stack.queue_depth("DecisionsDeadLetterQueue") == 0
        [message] = _inbox(inbox, world.region)
        assert "is empty" in message
    logs = capsys.readouterr().err
    assert logs.count('"Slack webhook secret not filled"') == 1


def _parked(stack: LocalStack) -> list[dict[str, Any]]:
    bodies = [json.loads(body) for body in drain(clients.sqs(), stack.urls["FailedEventsQueue"])]
    return [body for body in bodies if body.get("parked")]
