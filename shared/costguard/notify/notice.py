"""What travels from a detector to the notifier over SQS: a decision and its outcome (a Notice), or many of
them at once (a GroupNotice: one run's findings for one channel, or the daily digest of what stays open)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, computed_field

from costguard.act.executor import Outcome
from costguard.model import Decision

# A run with more than this many notices for one channel sends them as one message (notify/message.py).
ROWS_SHOWN = 10  # a group message's rows, each with its own buttons (notify/message.py)
GROUP_ABOVE = 3
# The rows a GroupNotice carries (costliest first), so one SQS message stays well under its 256 KiB; the totals
# count every row, and the rest are in the producing function's log.
ROWS_CARRIED = 100
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


class GroupNotice(BaseModel):
    """Many notices for one channel, told as one message: totals, the costliest first, "and N more"."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["group"] = "group"
    rows: list[Notice]  # costliest first, at most ROWS_CARRIED
    count: int  # all of them, carried or not
    hourly_total_usd: float  # of the rows whose price is known
    unpriced: int = 0  # rows whose price is unknown
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


def group(
    notices: Sequence[Notice], *, routing_tag_key: str, digest: bool = False, source: str | None = None
) -> GroupNotice:
    """One group of notices (all for one channel), the costliest first."""
    ranked = sorted(notices, key=lambda n: (-_cost(n), n.decision.resource.key))
    known = [n.decision.hourly_usd for n in ranked if n.decision.hourly_usd is not None]
    route = ranked[0].decision.resource.tags.get(routing_tag_key) if ranked else None
    made = GroupNotice(
        rows=[n.slim(routing_tag_key) for n in ranked[:ROWS_CARRIED]],
        count=len(ranked),
        hourly_total_usd=round(sum(known), 2),
        unpriced=len(ranked) - len(known),
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
    """What a run queues: per channel (routing tag value), the notices one by one, or one group when there are
    more than ``above`` of them. A digest is always one group per channel."""
    routes: dict[str, list[Notice]] = {}
    for notice in notices:
        resource = notice.decision.resource
        # Untagged: by account, since a route may follow the account (an organization's notices).
        route = resource.tags.get(routing_tag_key) or f"account:{resource.account}"
        routes.setdefault(route, []).append(notice)
    out: list[AnyNotice] = []
    for members in routes.values():
        if digest or len(members) > above:
            out.append(group(members, routing_tag_key=routing_tag_key, digest=digest, source=source))
        else:
            out.extend(members)
    return out
