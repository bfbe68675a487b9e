"""Slack Block Kit payloads rendered as terminal text."""

from __future__ import annotations

import re
import textwrap
from typing import Any

_LINK = re.compile(r"<([^|>]+)\|([^>]+)>")


def _plain(text: str) -> str:
    return _LINK.sub(r"\2 (\1)", text)


def render(message: dict[str, Any], width: int = 96) -> str:
    lines = [f"┌─ Slack #{message.get('channel', 'local')} " + "─" * max(0, width - 20)]
    for block in message.get("blocks", []):
        kind = block.get("type")
        if kind == "header":
            lines.append(f"│ ** {block['text']['text']} **")
        elif kind == "section":
            if "text" in block:
                for line in _plain(block["text"]["text"]).splitlines():
                    lines.extend("│ " + part for part in textwrap.wrap(line, width) or [""])
            for fld in block.get("fields", []):
                label, _, value = _plain(fld["text"]).partition("\n")
                lines.append(f"│   {label.strip('*')}: {value}")
        elif kind == "context":
            for element in block.get("elements", []):
                lines.extend("│ " + part for part in textwrap.wrap(_plain(element.get("text", "")), width))
    lines.append("└" + "─" * (width + 2))
    return "\n".join(lines)
