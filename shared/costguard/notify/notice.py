"""What travels from a detector to the notifier over SQS: a decision and its outcome (a Notice), or many of
them at once (a GroupNotice: one run's findings for one channel, or the daily digest of what stays open)."""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, computed_field

from costguard.act.executor import Outcome
from costguard.model import Action, Decision, Reason, ResourceKind

# A run with more than this many notices for one channel sends them as group messages, one per resource kind
# (notify/message.py); a kind with a single notice is still told on its own.
ROWS_SHOWN = 10  # a group message's rows, each with its own buttons (notify/message.py)
GROUP_ABOVE = 3
# The rows a GroupNotice carries (costliest first), so one SQS message stays well under its 256 KiB; the totals
# count every row, and the rest are in the producing function's log.
ROWS_CARRIED = 100
# The resources a GroupNotice tallies one by one (the costliest): beyond them its totals still count every
# resource once, but a merge can no longer tell whether two groups share one of the rest.
MAX_TALLIED = 3_000
# A budget alert or a cost anomaly is always its own message (in its budget's thread), with its ranked list of
# what runs and what its level did: never a row of a group. So is a resource acted on for a budget's level.
# A team's savings report is its own message too: one per team channel, never a row of a group.
STANDALONE_KINDS = frozenset({ResourceKind.BUDGET, ResourceKind.COST_ANOMALY, ResourceKind.SAVINGS_LEDGER})
STANDALONE_REASONS = frozenset({Reason.BUDGET_BREACH, Reason.COST_ANOMALY})
_SUMMARY = 300  # a row's summary, clipped
MAX_GROUP_BYTES = 200_000  # SQS takes 256 KiB
# The tags a row keeps: who owns it, where it is routed, what keeps costguard from it.
_ROW_TAGS = ("owner", "costguard:snooze-until")


class Notice(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["notice"] = "notice"
    decision: Decision
    outcome: Outcome
    protect_tag_key: str = "costguard:protect"
    # Who asked for it, when a person did (a Slack user id, from a button in Slack): told in the resource's
    # thread with the time; None for what costguard decided on its own.
    actor: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def id(self) -> str:
        return self.decision.id

    def slim(self, routing_tag_key: str) -> Notice:
        """The notice as a row of a group: no evidence, a short summary, only the tags a row shows or acts on."""
        finding = self.decision.finding
        resource = finding.resource
        keep = {*_ROW_TAGS, routing_tag_key, self.protect_tag_key}
        tags = {k: v[:256] for k, v in resource.tags.items() if k in keep}
        slim_finding = finding.model_copy(
            update={
                "evidence": {},
                "summary": finding.summary[:_SUMMARY],
                "resource": resource.model_copy(update={"tags": tags}),
            }
        )
        return self.model_copy(
            update={"decision": self.decision.model_copy(update={"finding": slim_finding})}
        )


def stands_alone(notice: Notice) -> bool:
    """Whether a notice is always its own message (STANDALONE_KINDS, STANDALONE_REASONS)."""
    decision = notice.decision
    return decision.reason in STANDALONE_REASONS or decision.resource.kind in STANDALONE_KINDS


# Each resource once (a digest of its key): its own hourly price (None: unknown) and how many findings are about it.
Tally = dict[str, tuple[float | None, int]]


class GroupNotice(BaseModel):
    """Many notices of one resource kind for one channel, told as one message: totals, the costliest first,
    "and N more"."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["group"] = "group"
    rows: list[Notice]  # costliest first, at most ROWS_CARRIED
    count: int  # all of them, carried or not
    # Each resource once, at its own hourly price: a resource with two findings counts once, and a budget's, an
    # anomaly's or a family's figure (the sum of what runs in its scope) is never added in (has_own_rate).
    hourly_total_usd: float
    unpriced: int = 0  # resources whose price is unknown
    resource_count: int = 0  # the distinct resources with a price of their own, priced or not
    resources: Tally = {}  # those resources one by one, the costliest MAX_TALLIED of them
    by_reason: dict[str, int]
    digest: bool = False  # the daily digest of findings still open
    route_tags: dict[str, str] = {}  # the routing tag, as the rows carry it: which channel
    source: str | None = None  # the log group of the function that sent it (its log has every row)
    log_id: str | None = None  # what its rows are logged under there (the id it was sent with)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def id(self) -> str:
        basis = json.dumps([*sorted(n.id for n in self.rows), str(self.count), str(self.digest)])
        return hashlib.sha256(basis.encode()).hexdigest()[:32]


AnyNotice = Notice | GroupNotice


def urgent(notice: AnyNotice) -> bool:
    """Whether a notice tells what cannot wait for the batching window: a stop, scale to zero, deletion or
    cancellation made (not a dry run's), or a budget breached. It travels on the urgent queue, told at once."""
    rows = notice.rows if isinstance(notice, GroupNotice) else [notice]
    return any(_urgent(row) for row in rows)


def _urgent(notice: Notice) -> bool:
    decision = notice.decision
    if decision.reason is Reason.BUDGET_BREACH:
        return True
    return decision.action is Action.STOP and not decision.dry_run and notice.outcome.done


def parse_notice(body: str) -> AnyNotice:
    """A queued message: a group says so (``kind``); anything else is one notice (as every notice queued
    before groups existed). Raises ValueError when it is neither."""
    data = json.loads(body)
    if isinstance(data, dict) and data.get("kind") == "group":
        return GroupNotice.model_validate(data)
    return Notice.model_validate(data)


def _cost(notice: Notice) -> float:
    hourly = notice.decision.hourly_usd
    return hourly if hourly is not None else -1.0


def resource_digest(key: str) -> str:
    """A resource key as a group tallies it: short and of one length, whatever the id."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def tally(notices: Sequence[Notice]) -> Tally:
    """Each resource with a price of its own once: its hourly price (the highest known of its findings) and its
    number of findings. A budget, an anomaly, a family or a digest has no price of its own and is left out."""
    found: Tally = {}
    for notice in notices:
        resource = notice.decision.resource
        if not resource.kind.has_own_rate:
            continue
        key = resource_digest(resource.key)
        rate, rows = found.get(key, (None, 0))
        hourly = notice.decision.hourly_usd
        if hourly is not None and math.isfinite(hourly) and (rate is None or hourly > rate):
            rate = round(hourly, 6)  # a price to the millionth: the rates a table gives, kept exactly
        found[key] = (rate, rows + 1)
    return found


def _bounded(found: Tally) -> Tally:
    if len(found) <= MAX_TALLIED:
        return found
    costliest = sorted(found.items(), key=lambda kv: (kv[1][0] is None, -(kv[1][0] or 0.0), kv[0]))
    return dict(costliest[:MAX_TALLIED])


def _totals(found: Tally) -> tuple[float, int]:
    priced = [rate for rate, _ in found.values() if rate is not None]
    return sum(priced), len(found) - len(priced)


@dataclass(frozen=True)
class _Beyond:
    """What a group's totals hold beyond its tally: resources past MAX_TALLIED, or a group queued before groups
    tallied their resources."""

    hourly: float = 0.0
    unpriced: int = 0
    resources: int = 0


def _split_totals(grouped: GroupNotice) -> tuple[Tally, _Beyond]:
    found = dict(grouped.resources)
    if not found and grouped.resource_count == 0 and grouped.rows:  # queued before tallies
        if grouped.count == len(grouped.rows):  # every row carried: counted afresh, each resource once
            return tally(grouped.rows), _Beyond()
        return {}, _Beyond(grouped.hourly_total_usd, grouped.unpriced, 0)
    hourly, unpriced = _totals(found)
    rest = grouped.hourly_total_usd - hourly  # under a cent: the total's own rounding, nothing beyond
    return found, _Beyond(
        rest if rest >= 0.01 else 0.0,
        max(0, grouped.unpriced - unpriced),
        max(0, grouped.resource_count - len(found)),
    )


def _fields(found: Tally, beyond: Sequence[_Beyond]) -> dict[str, Any]:
    hourly, unpriced = _totals(found)
    return {
        "hourly_total_usd": round(hourly + sum(b.hourly for b in beyond), 2),
        "unpriced": unpriced + sum(b.unpriced for b in beyond),
        "resource_count": len(found) + sum(b.resources for b in beyond),
        "resources": _bounded(found),
    }


def merged_totals(parts: Sequence[GroupNotice]) -> dict[str, Any]:
    """The totals of groups told as one: a resource in two of them counts once."""
    found: Tally = {}
    beyond: list[_Beyond] = []
    for part in parts:
        own, rest = _split_totals(part)
        beyond.append(rest)
        for key, (rate, rows) in own.items():
            known, counted = found.get(key, (None, 0))
            best = rate if known is None else known if rate is None else max(rate, known)
            found[key] = (best, counted + rows)
    return _fields(found, beyond)


def totals_without(grouped: GroupNotice, removed: Sequence[Notice]) -> dict[str, Any]:
    """The totals of a group less some of its rows: a resource counts until its last finding is removed."""
    found, beyond = _split_totals(grouped)
    rest = beyond
    for row in removed:
        resource = row.decision.resource
        if not resource.kind.has_own_rate:
            continue
        key = resource_digest(resource.key)
        if key in found:
            rate, rows = found[key]
            if rows > 1:
                found[key] = (rate, rows - 1)
            else:
                del found[key]
        else:  # one of the resources beyond the tally: as if it had this one finding
            hourly = row.decision.hourly_usd
            rest = _Beyond(
                max(0.0, rest.hourly - (hourly or 0.0)),
                max(0, rest.unpriced - (1 if hourly is None else 0)),
                max(0, rest.resources - 1),
            )
    return _fields(found, [rest])


def kind_of(grouped: GroupNotice) -> ResourceKind | None:
    """The one resource kind a group's rows are about; None for a group of several (queued before groups were
    made per kind)."""
    kinds = {row.decision.resource.kind for row in grouped.rows}
    return kinds.pop() if len(kinds) == 1 else None


def group(
    notices: Sequence[Notice], *, routing_tag_key: str, digest: bool = False, source: str | None = None
) -> GroupNotice:
    """One group of notices (all for one channel, of one kind), the costliest first."""
    ranked = sorted(notices, key=lambda n: (-_cost(n), n.decision.resource.key))
    route = ranked[0].decision.resource.tags.get(routing_tag_key) if ranked else None
    made = GroupNotice(
        rows=[n.slim(routing_tag_key) for n in ranked[:ROWS_CARRIED]],
        count=len(ranked),
        **_fields(tally(ranked), []),
        by_reason=dict(Counter(n.decision.reason.value for n in ranked).most_common()),
        digest=digest,
        route_tags={routing_tag_key: route} if route else {},
        source=source,
    )
    made = made.model_copy(update={"log_id": made.id})
    # Hostile ids or names can make rows large: fewer rows, never a message SQS refuses.
    while len(made.rows) > 1 and len(made.model_dump_json().encode()) > MAX_GROUP_BYTES:
        made = made.model_copy(update={"rows": made.rows[: len(made.rows) // 2]})
    return made


def by_route(
    notices: Sequence[Notice],
    *,
    routing_tag_key: str,
    digest: bool = False,
    source: str | None = None,
    above: int = GROUP_ABOVE,
) -> list[AnyNotice]:
    """What a run queues: per channel (routing tag value), the notices one by one, or, when more than ``above``
    of them may be grouped, one group per resource kind (a kind with one notice is still told on its own). A
    digest is always grouped, per kind. A budget alert or an anomaly is never grouped (stands_alone)."""
    routes: dict[str, list[Notice]] = {}
    for notice in notices:
        resource = notice.decision.resource
        # Untagged: by account, since a route may follow the account (an organization's notices).
        route = resource.tags.get(routing_tag_key) or f"account:{resource.account}"
        routes.setdefault(route, []).append(notice)
    out: list[AnyNotice] = []
    for members in routes.values():
        kinds = by_kind(n for n in members if not stands_alone(n))
        if not digest and sum(len(k) for k in kinds.values()) <= above:
            out.extend(members)
            continue
        out.extend(n for n in members if stands_alone(n))
        for rows in kinds.values():
            if len(rows) == 1 and not digest:
                out.extend(rows)
            else:
                out.append(group(rows, routing_tag_key=routing_tag_key, digest=digest, source=source))
    return out


def by_kind(notices: Iterable[Notice]) -> dict[ResourceKind, list[Notice]]:
    """Notices by the kind of resource they are about, in the order they came."""
    kinds: dict[ResourceKind, list[Notice]] = {}
    for notice in notices:
        kinds.setdefault(notice.decision.resource.kind, []).append(notice)
    return kinds
