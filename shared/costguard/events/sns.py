"""The SNS delivery a Lambda subscription receives, and reading its message: shared by every alert that comes by
SNS (AWS Budgets, Cost Anomaly Detection, CloudWatch alarm actions)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from costguard.events.common import LenientAwsTime

# What the entry point's idempotency keys on for an SNS delivery (the model's field names, dumped).
SNS_MESSAGE_ID_PATH = "records[0].sns.message_id"
ACCOUNT_ID = re.compile(r"[0-9]{12}")  # ASCII digits: \d also takes other scripts' digits


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class SnsMessage(BaseModel):
    """The SNS envelope. What costguard acts on is strict: the message id (idempotency), the topic (account and
    region) and the message. The rest is lenient: a malformed Timestamp (stray spaces, a typo) or a Subject that
    is not text never rejects the alert it carries; it reads as None (the subject only names a budget the
    message does not, and the time is never used)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    message_id: str = Field(alias="MessageId")
    topic_arn: str = Field(alias="TopicArn", min_length=1)
    subject: Annotated[str | None, BeforeValidator(_text_or_none)] = Field(default=None, alias="Subject")
    message: str = Field(alias="Message")
    timestamp: LenientAwsTime = Field(default=None, alias="Timestamp")

    @field_validator("message_id")
    @classmethod
    def _message_id_given(cls, value: str) -> str:
        # The idempotency key of every SNS alert (SNS_MESSAGE_ID_PATH): with none, a redelivery acts twice.
        if not value.strip():
            raise ValueError("the message id is empty: a redelivery could not be told apart")
        return value


class SnsRecord(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    event_source: Literal["aws:sns"] = Field(alias="EventSource")
    sns: SnsMessage = Field(alias="Sns")


class SnsDelivery(BaseModel):
    """What Lambda receives from an SNS subscription: always exactly one record."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    records: list[SnsRecord] = Field(alias="Records", min_length=1, max_length=1)

    @property
    def sns(self) -> SnsMessage:
        return self.records[0].sns

    @property
    def id(self) -> str:
        return self.sns.message_id

    @property
    def topic_account(self) -> str:
        """The account field of the topic's ARN, as received."""
        parts = self.sns.topic_arn.split(":")
        return parts[4] if len(parts) > 5 else ""

    @property
    def account(self) -> str:
        """The topic's account. Where the topic ARN's account field is no account id (an alert captured and
        redacted by hand, `` 1234567890``), the account the message itself names, when it names one."""
        topic = self.topic_account
        if ACCOUNT_ID.fullmatch(topic):
            return topic
        named = self.message_account()
        return named if named is not None else topic

    def message_account(self) -> str | None:
        """The account id the message body names (None: it names none). Each kind of alert reads its own."""
        return None

    @property
    def region(self) -> str:
        parts = self.sns.topic_arn.split(":")
        return parts[3] if len(parts) > 5 else ""


# -- the bare notification ------------------------------------------------------------------------------------

# What SNS posts to an HTTPS endpoint, or sends as an SQS message's body, spells two fields otherwise than the
# Lambda delivery does.
_HTTP_TO_LAMBDA = {"SigningCertURL": "SigningCertUrl", "UnsubscribeURL": "UnsubscribeUrl"}


def is_bare_notification(event: Any) -> bool:
    """An SNS notification as an HTTPS or SQS subscriber receives it: ``Type`` Notification, a message id, a topic
    and a message, and no Lambda ``Records`` around it."""
    return (
        isinstance(event, dict)
        and "Records" not in event
        and event.get("Type") == "Notification"
        and all(isinstance(event.get(key), str) for key in ("MessageId", "TopicArn", "Message"))
    )


def lambda_delivery(notification: dict[str, Any]) -> dict[str, Any]:
    """A bare SNS notification wrapped as Lambda delivers it: one record, ``EventSource`` aws:sns,
    ``EventSubscriptionArn`` the subscription the notification names (its unsubscribe URL's), else the topic's."""
    sns = {_HTTP_TO_LAMBDA.get(key, key): value for key, value in notification.items()}
    sns.setdefault("Subject", None)
    sns.setdefault("MessageAttributes", {})
    unsubscribe = sns.get("UnsubscribeUrl")
    query = parse_qs(urlsplit(unsubscribe).query) if isinstance(unsubscribe, str) else {}
    subscription = (query.get("SubscriptionArn") or [""])[0]
    return {
        "Records": [
            {
                "EventSource": "aws:sns",
                "EventVersion": "1.0",
                "EventSubscriptionArn": subscription or str(sns["TopicArn"]),
                "Sns": sns,
            }
        ]
    }
