"""Text from AWS or users made safe for Slack: no pings, no forged links, no bidirectional tricks, within Slack's
limits (counted in UTF-16 units, as Slack counts)."""

from __future__ import annotations

import re

from costguard.model import Resource

# Slack's limits (docs.slack.dev, Block Kit reference): top-level ``text`` 40,000 characters (Slack truncates
# beyond), a section's text 3,000, a section field 2,000, a header's plain_text 150, any other text object 3,000.
# Lengths are counted here in UTF-16 code units (an emoji outside the BMP counts 2), never fewer than Slack counts.
MAX_TEXT = 40_000


MAX_SECTION = 3_000


MAX_FIELD = 2_000


MAX_HEADER = 150


MAX_CONTEXT = 3_000


# Slack also refuses a message whose blocks add up to much more than about 12,000 characters
# (msg_blocks_too_long), so the pieces taken from AWS or users get budgets well under the per-block limits.
NAME_LIMIT = 300  # a name or id inside a field (an EC2 Name tag is at most 256)


SHORT_LIMIT = 100  # an instance type, an account id, a region


TAG_KEY_LIMIT, TAG_VALUE_LIMIT = 128, 256  # AWS's own limits for a tag


EVIDENCE_VALUE_LIMIT = MAX_SECTION  # one value may fill the evidence section (a ranked list, say)


ACTION_LIMIT = 2_000


TAGS_LIMIT = 1_500


NOTIFICATION_NAME_LIMIT = 1_000  # the resource name in the notification text


# Unicode bidirectional controls: they make text read differently from what it is (Trojan Source).
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


_ACCOUNT = re.compile(r"[0-9]{12}")  # \d would take any script's digits


# A console link is put inside <url|name> only if nothing in it can end the link or start another.
_SAFE_URL = re.compile(r"https://[A-Za-z0-9.-]+\.amazon\.com/[A-Za-z0-9/?#=:%._~+-]*")


_MAX_URL = 1_000


def clean(text: str) -> str:
    """No bidirectional controls, and no lone surrogate (which no JSON encoder should send)."""
    text = _BIDI.sub("", text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def escape(text: str) -> str:
    """Text from AWS or users must not ping channels or forge links in mrkdwn: Slack's three control
    characters become entities, and bidirectional controls go."""
    return clean(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def clip(text: str, limit: int) -> str:
    """At most ``limit`` UTF-16 code units, ending in an ellipsis when cut; never half a surrogate pair or half an
    entity (``&amp;``) of escaped text."""
    if len(text) <= limit // 2 or utf16_len(text) <= limit:
        return text
    # Decoding a cut UTF-16 buffer with "ignore" drops a pair's lone first half at the end.
    head = text.encode("utf-16-le", "surrogatepass")[: 2 * (limit - 1)].decode("utf-16-le", "ignore")
    amp = head.rfind("&", max(0, len(head) - 5))
    if amp != -1 and ";" not in head[amp:]:
        head = head[:amp]
    return head + "…"


def safe_text(value: object, limit: int) -> str:
    """Any value from AWS or users, as safe mrkdwn of at most ``limit`` units."""
    return clip(escape(str(value)), limit)


def safe_code(value: object, limit: int) -> str:
    """The same, for inside a `code span` (a backtick would end it)."""
    return safe_text(str(value).replace("`", "'"), limit)


def account_text(account: str, name: str | None = None) -> str:
    """An AWS account id is 12 digits; anything else is shown as what it is, escaped. With the organization's
    name for it: ``research (222222222222)``."""
    if not _ACCOUNT.fullmatch(account):
        return f"invalid account id `{safe_code(account, 40)}`"
    return f"{safe_text(name, SHORT_LIMIT)} ({account})" if name and name.strip() else account


def resource_account(resource: Resource) -> str:
    """The resource's account as a message names it: its name in the organization where known."""
    return account_text(resource.account, resource.account_name)


def resource_link(url: str, name: str) -> str:
    if len(url) <= _MAX_URL and _SAFE_URL.fullmatch(url):
        return f"<{url}|{name}>"
    return name


def money(value: float | None, suffix: str = "") -> str:
    return "unknown" if value is None else f"${value:,.2f}{suffix}"
