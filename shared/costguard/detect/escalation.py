"""Budget escalation levels: what a breach of a given size allows costguard to do. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

# stop_all (stopping busy work) is opt-in: a user who wants it writes it.
DEFAULT_ESCALATION = "forecast:notify,actual>=100:stop_idle"


class AlertType(StrEnum):
    ACTUAL = "ACTUAL"
    FORECASTED = "FORECASTED"


class Escalation(StrEnum):
    NOTIFY = "notify"  # the ranked list, nothing else
    STOP_IDLE = "stop_idle"  # also mark, then stop, resources judged idle
    STOP_ALL = "stop_all"  # also mark, then stop, every unprotected resource in scope, busiest last


@dataclass(frozen=True)
class Level:
    """One rule: an alert of this type at or above this share of the budget gets this escalation."""

    alert_type: AlertType
    min_percent: float  # of the budgeted amount; 0 matches any alert of the type
    escalation: Escalation

    @property
    def label(self) -> str:
        kind = "forecast" if self.alert_type is AlertType.FORECASTED else "actual"
        when = f"{kind}>={self.min_percent:g}" if self.min_percent else kind
        return f"{when}:{self.escalation.value}"


_LEVEL = re.compile(r"^(forecast|forecasted|actual)\s*(?:>=\s*(\d+(?:\.\d+)?)\s*%?)?\s*:\s*([a-z_]+)$")


def parse_levels(spec: str) -> tuple[Level, ...]:
    """Read "forecast:notify,actual>=100:stop_idle,actual>=150:stop_all"; ValueError names the bad part."""
    levels: list[Level] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        match = _LEVEL.match(part.lower())
        if match is None:
            raise ValueError(
                f"escalation level {part!r} is not '<forecast|actual>[>=PERCENT]:<notify|stop_idle|stop_all>'"
            )
        kind, percent, action = match.groups()
        try:
            escalation = Escalation(action)
        except ValueError:
            raise ValueError(
                f"escalation level {part!r}: {action!r} is not notify, stop_idle or stop_all"
            ) from None
        minimum = float(percent) if percent else 0.0
        if minimum > 100_000:
            raise ValueError(f"escalation level {part!r}: {minimum:g}% is out of range")
        alert = AlertType.ACTUAL if kind == "actual" else AlertType.FORECASTED
        if any(level.alert_type is alert and level.min_percent == minimum for level in levels):
            raise ValueError(f"escalation level {part!r} repeats an earlier one")
        levels.append(Level(alert, minimum, escalation))
    if not levels:
        raise ValueError("at least one escalation level is needed, e.g. 'forecast:notify,actual:notify'")
    return tuple(levels)


def level_for(levels: tuple[Level, ...], alert_type: AlertType, percent: float | None) -> Level | None:
    """The highest level this alert reaches; None when none applies (the alert is still reported).

    Without a known percentage only the levels that name no percentage apply.
    """
    reached = [
        level
        for level in levels
        if level.alert_type is alert_type
        and (level.min_percent == 0 or (percent is not None and percent >= level.min_percent))
    ]
    return max(reached, key=lambda level: level.min_percent, default=None)
