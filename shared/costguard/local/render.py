"""Slack Block Kit payloads rendered as terminal text: what a reader would see in Slack, not the escaped source."""

from __future__ import annotations

import re
import textwrap
from typing import Any

_LINK = re.compile(r"<([^|>]+)\|([^>]+)>")


def unescape(text: str) -> str:
    """Slack's three entities back to the characters Slack shows for them (``&amp;`` last: ``&amp;lt;`` is shown
    as ``&lt;``)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _plain(text: str) -> str:
    # Links first: only costguard's own <url|name> can be one, every '<' from AWS or users is still &lt; here.
    return unescape(_LINK.sub(r"\2 (\1)", text))


def _wrapped(text: str, width: int) -> list[str]:
    lines: list[str] = []
    for line in _plain(text).splitlines() or [""]:
        lead = line[: len(line) - len(line.lstrip(" "))]  # an indented list item stays indented when wrapped
        lines.extend(
            "│ " + part for part in textwrap.wrap(line, width, subsequent_indent=lead + "  ") or [""]
        )
    return lines


def _element(element: dict[str, Any]) -> str:
    """A button or a menu as the reader sees it: [Stop now], [Keep running for… ▾]."""
    text = element.get("text") or element.get("placeholder") or {}
    label = _plain(text.get("text", "")) if isinstance(text, dict) else ""
    return f"[{label} ▾]" if element.get("type", "").endswith("select") else f"[{label}]"


def render(message: dict[str, Any], width: int = 96) -> str:
    where = f"Slack #{message.get('channel', 'local')}"
    if message.get("thread_ts"):
        where += " ↳ reply in the thread"
    elif message.get("updated"):
        where += " ✎ the thread's first message, updated"
    lines = [f"┌─ {where} " + "─" * max(0, width - len(where) - 4)]
    for block in message.get("blocks", []):
        kind = block.get("type")
        if kind == "header":
            lines.append(f"│ ** {_plain(block['text']['text'])} **")
        elif kind == "section":
            if "text" in block:
                lines.extend(_wrapped(block["text"]["text"], width))
            for fld in block.get("fields", []):
                label, _, value = _plain(fld["text"]).partition("\n")
                lines.append(f"│   {label.strip('*')}: {value}")
        elif kind == "context":
            for element in block.get("elements", []):
                lines.extend(_wrapped(element.get("text", ""), width))
        elif kind == "actions":
            lines.append("│ " + " ".join(_element(e) for e in block.get("elements", [])))
    lines.append("└" + "─" * (width + 2))
    return "\n".join(lines)
