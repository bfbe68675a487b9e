"""What the command line prints of a resource (a Name tag, a summary, an AWS error): never a control character.

A Name tag may hold anything: ``\\x1b[32mOK\\x1b[0m\\r`` printed raw turns a ``FIX`` line green and writes over
it, a BEL rings, a bidirectional control reorders the line. ``printable`` shows each such character as its escape
(``\\x1b``, ``\\r``, ``\\u202e``), so the text stays readable and says what it holds, and can do nothing to the
terminal. JSON output needs none of this: ``json.dumps`` escapes control characters itself.
"""

from __future__ import annotations

import re

# C0 controls (ESC, CR, BEL, ...), DEL and C1 controls (CSI U+009B among them), the Unicode line separators and
# the bidirectional controls.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _shown(character: str) -> str:
    if character in _NAMED:
        return _NAMED[character]
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, *, lines: bool = False) -> str:
    """``text`` with every control character shown as its escape. ``lines``: a block of several lines that
    costguard composed (a rendered Slack message), whose newlines and tabs stay as they are; a single value (a
    name, a summary) gets none, so it cannot start a line of its own."""
    kept = "\n\t" if lines else ""
    return _CONTROL.sub(lambda m: m.group() if m.group() in kept else _shown(m.group()), str(text))
