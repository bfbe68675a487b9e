"""The rollout previewed (`costguard backtest --widen TAG`): remediate widened one value of a tag at a time.

The README's rollout widens remediation one team at a time (``RemediateScope=team=vision``, then
``team=vision|nlp``, ...). This walks the period once with no scope, to order the values safest first (fewest
stops of labelled work, then fewest near-misses, then the most dollars), then once per step with the scope that
step deploys, so each row is exactly what the deployed sweeps would have stopped and saved with that scope (the
stop caps, shared across teams, make a step's figures more than the sum of its teams' alone). The last step,
the empty scope, also covers the resources without the tag. ReasonModes applies at every step, as deployed."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from costguard.backtest.history import History
from costguard.backtest.walk import Outcome, Params, Result

EVERY_RESOURCE = "every resource"


@dataclass(frozen=True)
class WidenRow:
    """One step of the rollout: the value it adds, the scope it deploys, and what that scope stops."""

    step: int
    added: str
    scope: str  # RemediateScope as deployed at this step ("" at the last: every resource)
    result: Result

    @property
    def work_stops(self) -> int | None:
        labelled = self.result.labelled
        return labelled.work_stops if labelled is not None else None

    def as_json(self) -> dict[str, Any]:
        r = self.result
        return {
            "step": self.step,
            "added": self.added,
            "remediate_scope": self.scope,
            "stops": r.stops,
            "near_misses": r.near_misses,
            "reclaimable_usd": r.reclaimable_usd,
            "work_stops": self.work_stops,
        }


def _figures(result: Result, tag: str) -> dict[str, tuple[int, int, float]]:
    """Per value of ``tag`` in the unscoped walk: (stops of labelled work, near-misses, -dollars)."""
    by_value: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in result.outcomes:
        if value := outcome.subject.resource.tags.get(tag):
            by_value[value].append(outcome)
    figures = {}
    for value, outcomes in by_value.items():
        part = replace(result, outcomes=outcomes)
        labelled = part.labelled
        figures[value] = (labelled.work_stops if labelled else 0, part.near_misses, -part.reclaimable_usd)
    return figures


def values_of(history: History, tag: str) -> list[str]:
    """The values of ``tag`` among the period's resources, sorted."""
    return sorted({v for s in history.subjects if (v := s.resource.tags.get(tag))})


def scope_for(tag: str, values: list[str]) -> str:
    return f"{tag}={'|'.join(values)}"


def widening(
    history: History, params: Params, tag: str, walk: Callable[[History, Params], Result]
) -> list[WidenRow]:
    """Each step of the rollout, walked with its own scope; the steps ordered safest first by the unscoped walk.
    A value a scope cannot name (with ``|``, ``,``, ``=`` or ``!``, or padded with spaces) is left to the last step."""
    named = [v for v in values_of(history, tag) if not set(v) & set("|,=!") and v == v.strip()]
    unscoped = walk(history, replace(params, remediate_scope=""))
    figures = _figures(unscoped, tag)
    order = sorted(named, key=lambda v: (figures.get(v, (0, 0, 0.0)), v))
    rows = []
    for step, value in enumerate(order, start=1):
        scope = scope_for(tag, order[:step])
        rows.append(
            WidenRow(step, f"{tag}={value}", scope, walk(history, replace(params, remediate_scope=scope)))
        )
    rows.append(WidenRow(len(order) + 1, EVERY_RESOURCE, "", unscoped))
    return rows


def widen_table(rows: list[WidenRow]) -> str:
    """The terminal table: one line per step, its scope's stops, near-misses, dollars (and stops of work)."""
    labelled = any(r.work_stops is not None for r in rows)
    lines = [
        f"{'step':>4}  {'adds':<24} {'stops':>6} {'near-misses':>11} {'saved $':>12}"
        + (f" {'work stops':>10}" if labelled else "")
    ]
    for row in rows:
        r = row.result
        lines.append(
            f"{row.step:>4}  {row.added[:24]:<24} {r.stops:>6} {r.near_misses:>11} {r.reclaimable_usd:>12,.2f}"
            + (f" {row.work_stops if row.work_stops is not None else '-':>10}" if labelled else "")
        )
    return "\n".join(lines)
