"""How the replayed stack's EventBridge rules see an event: the account the stack is deployed in for it, and,
when no rule takes it, the field that fails.

Every rule of template.yaml pins the stack's own account (``account: [!Ref AWS::AccountId]``) unless the stack is
an organization's hub. An event captured in the user's own account is therefore replayed as the stack deployed
in that account; a world that names its accounts (an organization) plays its hub, whose rules take every member's
events.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from costguard.events.sns import ACCOUNT_ID
from costguard.local.template import Route, Template, pattern_matches
from costguard.local.world import World

# What a path into an event finds when the event has no such field.
MISSING = object()
_SHOWN = 200  # characters of a value or a pattern quoted in a sentence


def deployed_in(world: World, event: Mapping[str, Any]) -> tuple[str, dict[str, bool]]:
    """The account the stack is deployed in for this event, and the template's conditions there: an
    organization world's hub (its rules take any account's events), else the event's own account (the world's
    when the event names none)."""
    if world.organization is not None:
        return world.account, {"IsOrganization": True}
    named = event.get("account")
    account = named if isinstance(named, str) and ACCOUNT_ID.fullmatch(named) else world.account
    return account, {"IsOrganization": False}


@dataclass(frozen=True)
class Refusal:
    """The field of an event that no rule takes: ``wanted`` is what the nearest rule's pattern asks of it
    (``function``'s), or for ``source`` and ``detail-type`` what all the rules take."""

    field: str
    value: Any
    wanted: Any
    function: str | None = None

    def sentence(self) -> str:
        has = "the event has none" if self.value is MISSING else f"the event has {_shown(self.value)}"
        if self.function is None:
            takes = ", ".join(_shown(w) for w in self.wanted)
            return f"the field that fails is {self.field}: {has}, no rule takes it (the rules take {takes})"
        return (
            f"the field that fails is {self.field}: {has}, {self.function}'s rule takes {_shown(self.wanted)}"
        )


def refusal(
    template: Template, event: Mapping[str, Any], account: str, conditions: Mapping[str, bool]
) -> Refusal | None:
    """Why no EventBridge rule or schedule of the template takes the event: its source, else its detail-type
    (among the rules of that source), else the first field the nearest rule of both refuses. None when a rule
    does take it."""
    rules: list[tuple[Route, dict[str, Any]]] = []
    for function in template.functions().values():
        for route in function.routes:
            pattern = route.event_pattern(account, conditions)
            if pattern is not None:
                rules.append((route, pattern))
    for key in ("source", "detail-type"):
        taking = [(r, p) for r, p in rules if key not in p or _takes((key,), p[key], event)]
        if not taking:
            wanted = sorted({str(v) for _, p in rules for v in _values(p.get(key))})
            return Refusal(key, event.get(key, MISSING), wanted)
        rules = taking
    nearest = min(((r, _failing(p, event)) for r, p in rules), key=lambda found: len(found[1]), default=None)
    if nearest is None or not nearest[1]:
        return None
    route, failing = nearest
    path, wanted = failing[0]
    return Refusal(".".join(path), _value_at(event, path), wanted, route.function)


def _values(pattern: Any) -> list[Any]:
    return pattern if isinstance(pattern, list) else [] if pattern is None else [pattern]


def _nest(path: Sequence[str], value: Any) -> dict[str, Any]:
    nested: Any = value
    for key in reversed(path):
        nested = {key: nested}
    result: dict[str, Any] = nested
    return result


def _takes(path: Sequence[str], pattern: Any, event: Mapping[str, Any]) -> bool:
    return pattern_matches(_nest(path, pattern), dict(event))


def _failing(
    pattern: Mapping[str, Any], event: Mapping[str, Any], path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], Any]]:
    """The deepest fields of ``pattern`` that refuse the event, in the pattern's order."""
    found: list[tuple[tuple[str, ...], Any]] = []
    for key, value in pattern.items():
        here = (*path, key)
        if _takes(here, value, event):
            continue
        deeper = _failing(value, event, here) if isinstance(value, dict) and not key.startswith("$") else []
        found.extend(deeper or [(here, value)])
    return found


def _value_at(event: Mapping[str, Any], path: Sequence[str]) -> Any:
    value: Any = event
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return MISSING
        value = value[key]
    return value


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}..."
