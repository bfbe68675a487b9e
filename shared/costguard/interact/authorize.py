"""Who may click what: COSTGUARD_SLACK_ALLOWED, read at start-up.

``channel`` (the default): anyone who can see the message may use its buttons. ``owner``: the Slack user the
resource's ``owner`` tag names. ``usergroups:S0123,S0456``: members of these Slack user groups. Combined with
``+`` (``owner+usergroups:S0123``), a click is allowed when any part allows it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Protocol

ALLOWED_VARIABLE = "COSTGUARD_SLACK_ALLOWED"
OWNER_TAG_KEY = "owner"
_GROUP = re.compile(r"S[A-Z0-9]{2,20}")


class SlackDirectory(Protocol):
    """What authorizing asks of Slack (costguard.notify.slack_api.SlackApi has these)."""

    def user_for(self, owner_tag_value: str) -> str | None: ...

    def usergroup_members(self, group_id: str) -> frozenset[str]: ...


class AllowedError(ValueError):
    """COSTGUARD_SLACK_ALLOWED cannot be read; the message names the variable."""


@dataclass(frozen=True)
class Allowed:
    channel: bool = False
    owner: bool = False
    usergroups: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = ["anyone in the channel"] if self.channel else []
        if self.owner:
            parts.append(f"the resource's owner (tag {OWNER_TAG_KEY})")
        if self.usergroups:
            parts.append("members of " + ", ".join(f"<!subteam^{g}>" for g in self.usergroups))
        return " or ".join(parts)


def parse_allowed(text: str) -> Allowed:
    """``channel``, ``owner``, ``usergroups:S1,S2``, joined by ``+``; empty: ``channel``."""
    text = text.strip()
    if not text:
        return Allowed(channel=True)
    channel = owner = False
    groups: list[str] = []
    for part in text.split("+"):
        part = part.strip()
        name, _, arguments = part.partition(":")
        if part == "channel":
            channel = True
        elif part == "owner":
            owner = True
        elif name == "usergroups":
            found = [g.strip() for g in arguments.split(",") if g.strip()]
            bad = [g for g in found if not _GROUP.fullmatch(g)]
            if not found or bad:
                raise AllowedError(
                    f"{ALLOWED_VARIABLE}: usergroups needs Slack user group ids like S0123ABCD "
                    f"(got {arguments[:60]!r})"
                )
            groups.extend(found)
        else:
            raise AllowedError(
                f"{ALLOWED_VARIABLE}: {part[:40]!r} is not channel, owner or usergroups:<ids> "
                "(combine them with +, e.g. owner+usergroups:S0123)"
            )
    return Allowed(channel=channel, owner=owner, usergroups=tuple(dict.fromkeys(groups)))


def allowed_from_environment() -> Allowed:
    return parse_allowed(os.environ.get(ALLOWED_VARIABLE, ""))


def refusal(allowed: Allowed, user: str, tags: dict[str, str], slack: SlackDirectory) -> str | None:
    """Why this user may not act on a resource with these tags (None: they may). Slack is asked only as far
    as needed: the owner first, then each group."""
    if allowed.channel:
        return None
    if allowed.owner:
        owner = tags.get(OWNER_TAG_KEY)
        if owner and slack.user_for(owner) == user:
            return None
    for group in allowed.usergroups:
        if user in slack.usergroup_members(group):
            return None
    return f"only {allowed.describe()} may do this"
