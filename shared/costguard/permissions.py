"""The IAM actions behind costguard's AWS calls, declared next to the code that makes the calls.

Each adapter module holds a ``PERMISSIONS`` set (or one per capability), flows take the union of what they
use, and every ``functions/<name>/app.py`` exposes the union its handler needs. tests/template/test_iam.py
checks that the template grants each function exactly that set, and tests/integration/test_iam_calls.py that
no handler makes a call outside it.
"""

from __future__ import annotations

import re

Permissions = frozenset[str]

# service:Action, spelled as IAM spells it; a wildcard is never a declaration.
_ACTION = re.compile(r"[a-z0-9-]+:[A-Z][A-Za-z0-9]+")


def needs(*actions: str) -> Permissions:
    """The IAM actions a piece of code needs, checked for shape: ``needs("ec2:DescribeInstances")``."""
    for action in actions:
        if not _ACTION.fullmatch(action):
            raise ValueError(f"not an IAM action: {action!r}")
    return frozenset(actions)


NONE: Permissions = frozenset()
