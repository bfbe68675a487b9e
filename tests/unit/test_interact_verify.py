"""Slack request verification: v0 signature, five-minute window at costguard's clock, Function URL bodies."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest

from costguard.interact.verify import (
    MAX_BODY,
    BadSignature,
    MalformedRequest,
    StaleRequest,
    payload_of,
    sign,
    verify,
    verify_body,
)
from costguard.local.interactions import LOCAL_SIGNING_SECRET, block_actions, form_body, signed_request

NOW = datetime(2026, 11, 20, 12, 5, tzinfo=UTC)
SECRET = LOCAL_SIGNING_SECRET
PAYLOAD = block_actions("costguard:stop", "gpu_idle|123456789012/us-east-1/ec2_instance/i-0a1f00000000000a1")


def test_a_signed_request_gives_its_payload() -> None:
    request = verify(signed_request(PAYLOAD, signed_at=NOW), SECRET, NOW)
    assert request.payload == PAYLOAD
    assert request.timestamp == int(NOW.timestamp()) and request.retry_num is None


def test_a_base64_body_and_any_header_case_are_read() -> None:
    event = signed_request(PAYLOAD, signed_at=NOW, base64_body=True, retry_num=1)
    event["headers"] = {k.title(): v for k, v in event["headers"].items()}
    request = verify(event, SECRET, NOW + timedelta(minutes=4))
    assert request.payload == PAYLOAD and request.retry_num == 1


def test_the_signature_covers_the_body_and_the_secret() -> None:
    with pytest.raises(BadSignature):
        verify(signed_request(PAYLOAD, signed_at=NOW, secret="anothersecret0123456789abcdefgh"), SECRET, NOW)
    event = signed_request(PAYLOAD, signed_at=NOW)
    event["body"] = event["body"].replace("a1", "a2")
    with pytest.raises(BadSignature, match="does not match"):
        verify(event, SECRET, NOW)


def test_the_signature_covers_the_timestamp() -> None:
    event = signed_request(PAYLOAD, signed_at=NOW)
    event["headers"]["x-slack-request-timestamp"] = str(int(NOW.timestamp()) + 1)
    with pytest.raises(BadSignature):
        verify(event, SECRET, NOW)


@pytest.mark.parametrize("header", ["x-slack-signature", "x-slack-request-timestamp"])
def test_a_missing_header_is_a_bad_signature(header: str) -> None:
    event = signed_request(PAYLOAD, signed_at=NOW)
    del event["headers"][header]
    with pytest.raises(BadSignature):
        verify(event, SECRET, NOW)


@pytest.mark.parametrize("offset", [timedelta(minutes=-6), timedelta(minutes=6)])
def test_a_request_signed_more_than_five_minutes_away_is_stale(offset: timedelta) -> None:
    with pytest.raises(StaleRequest) as refused:
        verify(signed_request(PAYLOAD, signed_at=NOW + offset), SECRET, NOW)
    assert refused.value.status == 401
    assert SECRET not in str(refused.value)


def test_just_inside_the_window_is_accepted() -> None:
    assert verify(signed_request(PAYLOAD, signed_at=NOW - timedelta(minutes=5)), SECRET, NOW)


def test_a_signed_body_without_a_payload_is_malformed() -> None:
    body = "token=x&team_id=T1"
    stamp = int(NOW.timestamp())
    event = signed_request(PAYLOAD, signed_at=NOW)
    event["body"] = body
    event["headers"]["x-slack-signature"] = sign(body, stamp, SECRET)
    with pytest.raises(MalformedRequest):
        verify(event, SECRET, NOW)
    with pytest.raises(MalformedRequest):
        payload_of(b"payload=%5B1%5D")


def test_a_body_that_is_not_base64_is_refused() -> None:
    event = signed_request(PAYLOAD, signed_at=NOW, base64_body=True)
    event["body"] = "%%%not-base64"
    with pytest.raises(BadSignature):
        verify(event, SECRET, NOW)
    assert base64.b64decode(signed_request(PAYLOAD, signed_at=NOW, base64_body=True)["body"]).decode() == (
        form_body(PAYLOAD)
    )


@pytest.mark.parametrize(
    "body",
    [form_body(PAYLOAD), "", "payload=%7B%7D&x=%E2%9C%93", "ünïcødé body ✓", b"payload=%7B%7D", "a" * 70_000],
)
@pytest.mark.parametrize("secret", [SECRET, "s", " padded secret "])
def test_the_signature_is_slack_sdks(body: str | bytes, secret: str) -> None:
    # verify.py computes the v0 signature itself, not with slack_sdk's SignatureVerifier (whose import loads
    # slack_sdk's clients and asyncio): it must give the same signature, and accept and refuse alike.
    from slack_sdk.signature import SignatureVerifier

    stamp = int(NOW.timestamp())
    text = body.decode() if isinstance(body, bytes) else body
    theirs = SignatureVerifier(secret).generate_signature(timestamp=str(stamp), body=body)
    assert sign(text, stamp, secret) == theirs
    raw = body if isinstance(body, bytes) else body.encode()
    if len(raw) <= MAX_BODY:  # a larger body is refused before any signature is computed
        for signature in (theirs, f"{theirs[:-1]}0", "v0=", "garbage"):
            ours_accepts = _accepts(raw, str(stamp), signature, secret)
            slack_accepts = SignatureVerifier(secret, clock=_At(NOW)).is_valid(raw, str(stamp), signature)
            assert ours_accepts == slack_accepts, signature


def test_a_blank_secret_is_refused_as_slack_sdk_refuses_it() -> None:
    from slack_sdk.signature import SignatureVerifier

    with pytest.raises(ValueError, match="must not be empty") as theirs:
        SignatureVerifier("  ")
    with pytest.raises(ValueError, match="must not be empty") as ours:
        sign("body", int(NOW.timestamp()), "  ")
    assert str(ours.value) == str(theirs.value)


def _accepts(body: bytes, stamp: str, signature: str, secret: str) -> bool:
    try:
        verify_body(body, stamp, signature, secret, NOW)
    except BadSignature:
        return False
    except MalformedRequest:
        return True  # signed correctly; only the payload is not an interaction's
    return True


class _At:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> float:
        return self.at.timestamp()


@pytest.mark.parametrize(
    ("body", "signature"),
    [
        (form_body(PAYLOAD).encode(), "v0=\u00e9" + "0" * 63),  # a forged header of non-ASCII characters
        (form_body(PAYLOAD).encode(), "v0=\udcff"),  # a lone surrogate, as a header decoder may leave one
        (b"\xff\xfepayload=x", None),  # a body that is not UTF-8, under a signature of something else
    ],
)
def test_a_forged_signature_or_body_of_any_bytes_is_a_bad_signature_not_an_error(
    body: bytes, signature: str | None
) -> None:
    stamp = int(NOW.timestamp())
    with pytest.raises(BadSignature):
        verify_body(body, str(stamp), signature or sign("payload=x", stamp, SECRET), SECRET, NOW)
