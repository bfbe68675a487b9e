"""The IAM actions behind costguard's AWS calls, declared next to the code that makes the calls.

Each adapter module holds a ``PERMISSIONS`` set (or one per capability), flows take the union of what they
use, and every ``functions/<name>/app.py`` exposes the union its handler needs. tests/template/test_iam.py
checks that the template grants each function exactly that set, and tests/integration/test_iam_calls.py that
no handler makes a call outside it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

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


# The verbs of IAM actions that only read (budgets:ViewBudget, sagemaker:Search included).
READ_VERBS = ("Describe", "Get", "List", "Search", "View")


def is_read(action: str) -> bool:
    """Whether an IAM action (``service:Verb...``) only reads."""
    return action.partition(":")[2].startswith(READ_VERBS)


def read_only_policy(sid: str, actions: Iterable[str]) -> dict[str, Any]:
    """An IAM policy document allowing exactly these actions, every one a read, on any resource."""
    listed = sorted(set(actions))
    writes = [a for a in listed if not _ACTION.fullmatch(a) or not is_read(a)]
    if writes:
        raise ValueError(f"not read-only actions: {writes}")
    return {
        "Version": "2012-10-17",
        "Statement": [{"Sid": sid, "Effect": "Allow", "Action": listed, "Resource": "*"}],
    }
