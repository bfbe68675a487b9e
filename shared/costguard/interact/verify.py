"""Is this request from Slack? Its v0 signature checked against the app's signing secret, at costguard's clock.

The signature is computed here as slack_sdk's SignatureVerifier computes it (tests/unit/test_interact_verify.py
holds the two to the same answers): importing slack_sdk loads its Web API and webhook clients, asyncio among
them, tens of milliseconds of a cold start that the interactions endpoint, which never calls Slack and must
answer Slack within three seconds, does not need. It is the one place costguard computes what slack_sdk offers.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs

from pydantic import BaseModel, ConfigDict, Field

# Slack's own rule: a request signed more than five minutes away from now is refused (a replay, or a clock
# far off).
MAX_AGE_SECONDS = 5 * 60
MAX_BODY = 64 * 1024  # a block_actions payload is a few KiB; anything far larger is not Slack's


class _Http(BaseModel):
    model_config = ConfigDict(extra="ignore")

    method: str


class _RequestContext(BaseModel):
    model_config = ConfigDict(extra="ignore")

    requestId: str = Field(min_length=1)
    timeEpoch: int
    http: _Http


class FunctionUrlRequest(BaseModel):
    """A Lambda Function URL event (payload version 2.0): what the interactions endpoint receives."""

    model_config = ConfigDict(extra="ignore")

    version: str = Field(pattern=r"^2\.0$")
    headers: dict[str, str] = Field(default_factory=dict)
    body: str = ""
    isBase64Encoded: bool = False
    requestContext: _RequestContext

    @property
    def id(self) -> str:
        return self.requestContext.requestId


class Unauthorized(Exception):
    """Not a request Slack signed for costguard (answered 401). ``why`` is safe to log: no secret, no body."""

    status = 401

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class BadSignature(Unauthorized):
    """The signature is missing, malformed or does not match the body."""


class StaleRequest(Unauthorized):
    """The signature's timestamp is more than five minutes from costguard's clock."""


class MalformedRequest(Unauthorized):
    """Signed correctly, but not an interaction payload costguard can read."""

    status = 400


@dataclass(frozen=True)
class SlackRequest:
    """A verified interaction request."""

    payload: dict[str, Any]
    body: str  # the raw form body as Slack signed it: the actions worker verifies it again
    signature: str
    timestamp: int
    retry_num: int | None  # X-Slack-Retry-Num: Slack is delivering the same request again

    @property
    def fingerprint(self) -> str:
        """What a replay of this very request shares with it: its signature and timestamp."""
        return hashlib.sha256(f"{self.signature}:{self.timestamp}".encode()).hexdigest()


def headers_of(event: dict[str, Any]) -> dict[str, str]:
    """A Function URL event's headers, by lower-case name (HTTP header names are case-insensitive)."""
    raw = event.get("headers") or {}
    return {str(k).lower(): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}


def body_of(event: dict[str, Any]) -> bytes:
    """The raw body as Slack signed it (a Function URL may hand it over base64-encoded)."""
    body = event.get("body") or ""
    if not isinstance(body, str):
        raise MalformedRequest("the body is not text")
    if event.get("isBase64Encoded"):
        try:
            return base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise BadSignature("the body is not valid base64") from None
    return body.encode()


def verify(event: dict[str, Any], signing_secret: str, now: datetime) -> SlackRequest:
    """The verified request, or BadSignature / StaleRequest (401) / MalformedRequest (400)."""
    headers = headers_of(event)
    signature = headers.get("x-slack-signature")
    stamp = headers.get("x-slack-request-timestamp")
    if not signature or not stamp:
        raise BadSignature("no X-Slack-Signature or X-Slack-Request-Timestamp header")
    body = body_of(event)
    payload = verify_body(body, stamp, signature, signing_secret, now)
    return SlackRequest(
        payload=payload,
        body=body.decode(),
        signature=signature,
        timestamp=int(stamp),
        retry_num=_retry_num(headers.get("x-slack-retry-num")),
    )


def verify_body(body: bytes, stamp: str, signature: str, signing_secret: str, at: datetime) -> dict[str, Any]:
    """The interaction payload of a body Slack signed with this secret, checked as of ``at`` (when the request
    reached costguard): the endpoint checks at its clock, the actions worker again at the moment SQS took the
    message from the endpoint. Raises BadSignature, StaleRequest or MalformedRequest."""
    if not stamp.isascii() or not stamp.isdigit() or len(stamp) > 12:
        raise BadSignature("the request timestamp is not a number")
    if len(body) > MAX_BODY:
        raise BadSignature("the body is too large to be Slack's")
    timestamp = int(stamp)
    if abs(at.timestamp() - timestamp) > MAX_AGE_SECONDS:
        raise StaleRequest(f"the request timestamp is {int(at.timestamp() - timestamp)} seconds from then")
    # Compared as bytes: a forged header of any characters is a mismatch, never an error.
    given = signature.encode("utf-8", "surrogatepass")
    if not hmac.compare_digest(_signature(stamp, body, signing_secret).encode(), given):
        raise BadSignature("the signature does not match the body")
    try:
        body.decode("ascii")  # Slack's form body is URL-encoded ASCII; the queue carries it as text
    except UnicodeDecodeError:
        raise MalformedRequest("the body is not URL-encoded text") from None
    return payload_of(body)


def payload_of(body: bytes) -> dict[str, Any]:
    """The form field ``payload``: the interaction, JSON."""
    try:
        form = parse_qs(body.decode(), strict_parsing=True)
        payload = json.loads(form["payload"][0])
    except (UnicodeDecodeError, ValueError, KeyError, IndexError):
        raise MalformedRequest("no JSON payload form field") from None
    if not isinstance(payload, dict):
        raise MalformedRequest("the payload is not a JSON object")
    return payload


def _retry_num(value: str | None) -> int | None:
    return int(value) if value and value.isascii() and value.isdigit() and len(value) < 6 else None


def sign(body: str, timestamp: int, signing_secret: str) -> str:
    """The v0 signature Slack would send (the sample events and the tests sign with it)."""
    return _signature(str(timestamp), body, signing_secret)


def _signature(stamp: str, body: str | bytes, signing_secret: str) -> str:
    """Slack's v0 signature: ``v0=`` and the hex HMAC-SHA256, keyed with the signing secret, of
    ``v0:<timestamp>:<body>`` (the body's bytes as received: one that is not UTF-8 only fails to match). A blank
    secret is refused with slack_sdk's own ValueError."""
    if not signing_secret.strip():
        raise ValueError("signing_secret must not be empty.")
    raw = body if isinstance(body, bytes) else body.encode()
    digest = hmac.new(
        signing_secret.encode(), b"v0:" + stamp.encode() + b":" + raw, hashlib.sha256
    ).hexdigest()
    return f"v0={digest}"
