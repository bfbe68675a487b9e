"""The action ids and values of costguard's interactive Slack elements: built by the message, read back by interact/."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from costguard.model import Reason, ResourceKind

# Slack caps a select option's value at 150 characters and a button's at 2000.
MAX_OPTION_VALUE = 150
MAX_BUTTON_VALUE = 2000
_SEPARATOR = "|"


class ActionId(StrEnum):
    """``action_id`` of each element (a keep or mute is a static_select, a stop or protect a button)."""

    KEEP = "costguard:keep"
    STOP = "costguard:stop"
    PROTECT = "costguard:protect"
    MUTE = "costguard:mute"


# The elements whose value starts with a number of hours.
WITH_HOURS = frozenset({ActionId.KEEP, ActionId.MUTE})
# The menus' choices, in hours (notify/message.py builds its options from these): a click carrying any other
# duration was not offered by costguard and is refused.
KEEP_MENU: tuple[tuple[int, str], ...] = ((4, "4 hours"), (24, "1 day"), (72, "3 days"), (168, "1 week"))
MUTE_MENU: tuple[tuple[int, str], ...] = ((24, "1 day"), (168, "1 week"), (720, "30 days"))
MENUS: dict[ActionId, frozenset[float]] = {
    ActionId.KEEP: frozenset(float(h) for h, _ in KEEP_MENU),
    ActionId.MUTE: frozenset(float(h) for h, _ in MUTE_MENU),
}


@dataclass(frozen=True)
class ResourceKey:
    """``Resource.key`` read back: ``<account>/<region>/<kind>/<id>``."""

    account: str
    region: str
    kind: ResourceKind
    id: str

    @property
    def key(self) -> str:
        return f"{self.account}/{self.region}/{self.kind}/{self.id}"


@dataclass(frozen=True)
class ActionValue:
    reason: Reason
    resource: ResourceKey
    hours: float | None = None


def action_value(reason: str, resource_key: str, hours: float | None = None) -> str:
    """The value of an element: ``<reason>|<resource key>``, or ``<hours>|<reason>|<resource key>`` for the
    keep and mute menus' options. Raises ValueError when Slack would refuse it (too long) or it cannot be read
    back."""
    parse_resource_key(resource_key)
    if _SEPARATOR in reason or _SEPARATOR in resource_key:
        raise ValueError(f"a reason or resource key must not contain {_SEPARATOR!r}")
    if hours is None:
        value = f"{reason}{_SEPARATOR}{resource_key}"
        limit = MAX_BUTTON_VALUE
    else:
        if not 0 < hours <= 24 * 365:
            raise ValueError(f"hours must be between 0 and a year, not {hours}")
        value = f"{hours:g}{_SEPARATOR}{reason}{_SEPARATOR}{resource_key}"
        limit = MAX_OPTION_VALUE
    if len(value) > limit:
        raise ValueError(f"the value is {len(value)} characters; Slack allows {limit}")
    return value


def parse_action_value(
    value: str, *, with_hours: bool | None = None, action: ActionId | None = None
) -> ActionValue:
    """An element's value read back (ValueError if costguard did not build it). Given the element's ``action``,
    its hours must be one of that menu's choices (MENUS)."""
    if with_hours is None:
        with_hours = action in WITH_HOURS
    parts = value.split(_SEPARATOR, 2 if with_hours else 1)
    hours: float | None = None
    if with_hours:
        if len(parts) != 3:
            raise ValueError("expected <hours>|<reason>|<resource key>")
        try:
            hours = float(parts[0])
        except ValueError:
            raise ValueError(f"hours {parts[0][:20]!r} is not a number") from None
        if not 0 < hours <= 24 * 365:
            raise ValueError(f"hours must be between 0 and a year, not {hours:g}")
        menu = MENUS.get(action) if action is not None else None
        if menu is not None and hours not in menu:
            choices = ", ".join(f"{h:g}" for h in sorted(menu))
            raise ValueError(f"{hours:g} hours is not on the {action} menu ({choices})")
        parts = parts[1:]
    if len(parts) != 2:
        raise ValueError("expected <reason>|<resource key>")
    try:
        reason = Reason(parts[0])
    except ValueError:
        raise ValueError(f"unknown reason {parts[0][:40]!r}") from None
    return ActionValue(reason=reason, resource=parse_resource_key(parts[1]), hours=hours)


def parse_resource_key(key: str) -> ResourceKey:
    parts = key.split("/", 3)
    if len(parts) != 4 or not all(parts):
        raise ValueError("expected <account>/<region>/<kind>/<id>")
    account, region, kind, ident = parts
    try:
        resource_kind = ResourceKind(kind)
    except ValueError:
        raise ValueError(f"unknown resource kind {kind[:40]!r}") from None
    return ResourceKey(account=account, region=region, kind=resource_kind, id=ident)


def choice(action: str, hours: float | None) -> str:
    return action if hours is None else f"{action}:{hours:g}"


def offered_in(message: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    """The choices a Block Kit message carries, by (resource key, reason): every costguard button's value and
    every option of its menus, read back with the same parser the worker uses."""
    found: dict[tuple[str, str], set[str]] = {}
    for block in message.get("blocks") or []:
        if not isinstance(block, dict) or block.get("type") != "actions":
            continue
        for element in block.get("elements") or []:
            if not isinstance(element, dict):
                continue
            try:
                action = ActionId(str(element.get("action_id")))
            except ValueError:
                continue
            values = [o.get("value") for o in element.get("options") or [] if isinstance(o, dict)]
            if element.get("value") is not None:
                values.append(element["value"])
            for raw in values:
                try:
                    value = parse_action_value(str(raw), action=action)
                except ValueError:
                    continue
                pair = (value.resource.key, value.reason.value)
                found.setdefault(pair, set()).add(choice(action, value.hours))
    return found
