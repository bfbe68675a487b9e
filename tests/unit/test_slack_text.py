"""Slack text from AWS or users: escaped, without bidirectional controls, clipped by UTF-16 code units."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from costguard.act.executor import Outcome
from costguard.model import Action, Decision, Finding, Reason, Resource, ResourceKind
from costguard.notify.message import build_message
from costguard.notify.notice import Notice
from costguard.notify.text import account_text, clip, escape, utf16_len

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
EMOJI = "\U0001f600"
FULLWIDTH = "".join(chr(0xFF10 + int(d)) for d in "123456789012")
# Characters that stress escaping and clipping: Slack's control characters, bidi controls, astral characters.
tricky = st.text(
    alphabet=st.one_of(
        st.sampled_from(["<", ">", "&", "!", "@", "|", "`", "*", EMOJI, "é", *BIDI]), st.characters()
    ),
    max_size=400,
)


def test_escape_turns_slacks_control_characters_into_entities_and_drops_bidi_controls() -> None:
    assert escape("<!channel> & <@U1>") == "&lt;!channel&gt; &amp; &lt;@U1&gt;"
    assert escape("&lt;!here&gt;") == "&amp;lt;!here&amp;gt;"
    assert escape(f"a{BIDI}b") == "ab"
    assert escape("\ud83d") == "?"  # a lone surrogate is no character


@given(text=tricky, limit=st.integers(min_value=2, max_value=120))
@settings(max_examples=300, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
def test_clipped_escaped_text_fits_and_keeps_whole_characters_and_entities(text: str, limit: int) -> None:
    escaped = escape(text)
    clipped = clip(escaped, limit)
    assert utf16_len(clipped) <= limit
    clipped.encode("utf-8")  # no half surrogate pair
    assert not re.search(r"&(?!amp;|lt;|gt;)", clipped)  # no entity cut in half
    assert "<" not in clipped and ">" not in clipped
    if utf16_len(escaped) <= limit:
        assert clipped == escaped
    else:
        assert clipped.endswith("…") and escaped.startswith(clipped[:-1])


@pytest.mark.parametrize("k", range(5))
def test_an_emoji_at_the_boundary_is_dropped_whole(k: int) -> None:
    text = "a" * k + EMOJI * 10
    clipped = clip(text, 6)
    clipped.encode("utf-8")
    assert utf16_len(clipped) <= 6
    assert clipped.rstrip("…").replace("a", "").replace(EMOJI, "") == ""


@pytest.mark.parametrize(
    ("account", "shown"),
    [
        ("123456789012", "123456789012"),
        ("12345678901", "invalid account id `12345678901`"),
        ("<!channel>", "invalid account id `&lt;!channel&gt;`"),
        (FULLWIDTH, f"invalid account id `{FULLWIDTH}`"),  # digits, but not ASCII ones
    ],
)
def test_an_account_id_is_twelve_digits_or_shown_as_invalid(account: str, shown: str) -> None:
    assert account_text(account) == shown


def _notice(value: str) -> Notice:
    resource = Resource(
        kind=ResourceKind.TRAINING_JOB,
        id=value or "job",
        account=value,
        region=value,
        name=value,
        instance_type=value,
        tags={value: value},
    )
    finding = Finding(
        reason=Reason.TRAINING_JOB_FAILED,
        resource=resource,
        summary=value,
        observed_at=NOW,
        evidence={"failure_reason": value, value or "k": [value]},
    )
    decision = Decision(
        action=Action.NOTIFY, reason=finding.reason, finding=finding, dry_run=True, note=value, decided_at=NOW
    )
    return Notice(decision=decision, outcome=Outcome(done=False, detail=value, error=value or None))


def _texts(message: dict[str, Any]) -> list[tuple[str, int]]:
    found = [(message["text"], 40_000)]
    for block in message["blocks"]:
        if block["type"] == "header":
            found.append((block["text"]["text"], 150))
        elif "text" in block:
            found.append((block["text"]["text"], 3000))
        found.extend((f["text"], 2000) for f in block.get("fields", []))
        found.extend((e["text"], 3000) for e in block.get("elements", []))
    return found


@given(value=tricky)
@settings(max_examples=150, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
def test_any_value_in_every_field_gives_a_message_slack_takes_and_that_cannot_ping(value: str) -> None:
    message = build_message(_notice(value))
    own_link = re.compile(r"<https://[a-z0-9.-]*console\.aws\.amazon\.com/[^<>|\s]*\|[^<>]*>")
    for text, limit in _texts(message):
        assert utf16_len(text) <= limit
        rest = own_link.sub("", text)
        assert "<" not in rest and ">" not in rest
        assert not any(c in text for c in BIDI)
    json.dumps(message).encode("utf-8")


def test_a_50k_name_is_clipped_in_the_text_and_every_block() -> None:
    message = build_message(_notice("<!channel>" * 5_000))
    for text, limit in _texts(message):
        assert utf16_len(text) <= limit
        assert "<!channel>" not in text
    # The blocks together stay far below what Slack refuses as msg_blocks_too_long (about 12,000 characters).
    assert sum(utf16_len(t) for t, _ in _texts(message)[1:]) < 12_000


def test_a_region_that_is_not_a_region_gets_no_link_into_it() -> None:
    message = build_message(_notice("evil.com/x#"))
    resource = message["blocks"][2]["fields"][0]["text"]
    assert "evil.com" not in resource.split("|")[0]
    assert resource.startswith("*Resource*\n<https://console.aws.amazon.com/console/home|")
