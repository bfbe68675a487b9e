"""A group message: many notices of one kind as one card (a row each, then a line each, the rest counted and
linked to the run's log)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from slack_sdk.models.blocks import (
    Block,
    ContextBlock,
    HeaderBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)

from costguard.model import ResourceKind
from costguard.notify.links import console_url, is_region
from costguard.notify.message import (
    INSTANCE_KINDS,
    ROWS_BRIEF,
    USER_ID,
    action_line,
    actions_for,
    asked,
    figure_text,
    headline,
    owner_text,
    title_of,
)
from costguard.notify.notice import ROWS_SHOWN, GroupNotice, Notice, kind_of
from costguard.notify.text import (
    MAX_CONTEXT,
    MAX_HEADER,
    MAX_SECTION,
    MAX_TEXT,
    SHORT_LIMIT,
    clip,
    money,
    resource_account,
    resource_link,
    safe_text,
)
from costguard.notify.titles import TITLE_OF_CODE, kind_noun


def _row_figure(notice: Notice) -> str:
    """A row's dollar figure: a resource's own $/h; a family's or a digest's own figure, never a $/h of theirs."""
    finding = notice.decision.finding
    if finding.resource.kind.has_own_rate:
        return money(finding.hourly_usd, "/h")
    return safe_text(figure_text(finding), 80)


def _row_title(notice: Notice) -> str:
    """A row's title: a click told back says what was done and, apart, the finding its button was on."""
    done = asked(notice)
    if done is None or done == "muted":
        return headline(notice)
    return f"{done.capitalize()} (asked from: {title_of(notice.decision)})"


def _row_line(notice: Notice, owner: str | None) -> str:
    decision = notice.decision
    resource = decision.resource
    parts = [f"*{resource_link(console_url(resource), safe_text(resource.display_name, 120))}*"]
    if resource.kind in INSTANCE_KINDS and resource.instance_type:
        count = "" if resource.instance_count == 1 else f" x {resource.instance_count}"
        parts.append(f"{safe_text(resource.instance_type, 40)}{count}")
    if resource.account_name:  # an organization: whose account and where
        parts.append(f"{resource_account(resource)} {safe_text(resource.region, SHORT_LIMIT)}")
    if figure := _row_figure(notice):
        parts.append(figure)
    parts.append(safe_text(_row_title(notice), 120))
    parts.append(safe_text(action_line(notice).split(" ", 1)[-1], 300))
    if shown := owner_text(resource, owner):
        parts.append(f"owner {shown}")
    if notice.actor and USER_ID.fullmatch(notice.actor):
        parts.append(f"asked by <@{notice.actor}> at {decision.decided_at:%H:%M UTC}")
    return " · ".join(parts)


def _brief_line(notice: Notice) -> str:
    name = safe_text(notice.decision.resource.display_name, 80)
    title = safe_text(_row_title(notice), 100)
    figure = _row_figure(notice)
    return f"{name} · {figure} · {title}" if figure else f"{name} · {title}"


def group_title(by_reason: dict[str, int], count: int, resources: int, kind: ResourceKind | None) -> str:
    """What a group is about, in words: "Idle GPU instance: 3 EC2 instances" for one verdict, "7 findings on 5
    EC2 instances" for several (never a reason code, never a bare count)."""
    many = resources or count
    things = f"{many} {kind_noun(kind, many)}"
    if len(by_reason) == 1:
        [reason] = by_reason
        return f"{TITLE_OF_CODE.get(reason, reason.replace('_', ' '))}: {things}"
    return f"{count} findings on {things}"


def build_group_message(
    group: GroupNotice,
    *,
    owners: dict[str, str] | None = None,
    interactive: bool = False,
    more_link: str | None = None,
) -> dict[str, Any]:
    """Many findings of one resource kind for one channel as one message: totals, the costliest first (type,
    $/h, verdict, action, owner), each row with its own buttons, "and N more". The total counts each resource
    once, at its own hourly price (the group's tally); kinds without a price of their own have no total."""
    owners = owners or {}
    verdicts = ", ".join(f"{safe_text(TITLE_OF_CODE.get(r, r), 80)} {n}" for r, n in group.by_reason.items())
    kind = kind_of(group)
    title = group_title(group.by_reason, group.count, group.resource_count, kind)
    if group.digest:
        title = f"Still open after a day: {title}"
    priced = group.resource_count > 0 or any(r.decision.resource.kind.has_own_rate for r in group.rows)
    summary = f"*{group.count} findings*"
    if group.resource_count:
        summary += f" on {group.resource_count} {kind_noun(kind, group.resource_count)}"
    if priced:
        unpriced = f" ({group.unpriced} with no known price)" if group.unpriced else ""
        summary += f" costing *${group.hourly_total_usd:,.2f}/h* together{unpriced}"
    summary = f"{summary}: {verdicts}."
    if group.digest:
        summary = f"{summary}\nEach was told when it was first seen and is still open; it is not told again on its own."
    blocks: list[Block] = [
        HeaderBlock(text=PlainTextObject(text=clip(f"costguard: {title}", MAX_HEADER))),
        SectionBlock(text=MarkdownTextObject(text=clip(summary, MAX_SECTION))),
    ]
    shown = group.rows[:ROWS_SHOWN]
    for row in shown:
        line = _row_line(row, owners.get(row.decision.resource.key))
        blocks.append(SectionBlock(text=MarkdownTextObject(text=clip(line, MAX_SECTION))))
        if interactive and (buttons := actions_for(row)):  # a row's buttons are its own card's
            blocks.append(buttons)
    # The next ones in brief (name, $/h, verdict), a section per 20 lines; only the rest is "and N more".
    brief = group.rows[ROWS_SHOWN : ROWS_SHOWN + ROWS_BRIEF]
    for start in range(0, len(brief), 20):
        lines = [f"• {_brief_line(row)}" for row in brief[start : start + 20]]
        blocks.append(SectionBlock(text=MarkdownTextObject(text=clip("\n".join(lines), MAX_SECTION))))
    rest = group.count - len(shown) - len(brief)
    if rest > 0:
        where = (
            f"<{more_link}|the full list>"
            if more_link and _SAFE_LOG_URL.fullmatch(more_link)
            else "the full list"
        )
        note = f"… and {rest} more, cheaper ones: {where} is in the log of the function that found them."
        if not group.source:
            note = f"… and {rest} more, cheaper ones."
        blocks.append(ContextBlock(elements=[MarkdownTextObject(text=clip(note, MAX_CONTEXT))]))
    first = shown[0].decision.resource if shown else None
    one_place = len({(n.decision.resource.account, n.decision.resource.region) for n in group.rows}) == 1
    where_text = (
        f" ({resource_account(first)}/{safe_text(first.region, SHORT_LIMIT)})" if first and one_place else ""
    )
    text = f"costguard: {group.count} findings{where_text}"
    if priced:
        text = f"{text}: ${group.hourly_total_usd:,.2f}/h"
    return {"text": clip(text, MAX_TEXT), "blocks": [block.to_dict() for block in blocks]}


_SAFE_LOG_URL = re.compile(
    r"https://[a-z0-9-]+\.console\.aws\.amazon\.com/cloudwatch/home\?[A-Za-z0-9/?#=:%._~+$-]*"
)


def log_link(region: str, log_group: str, run_id: str) -> str | None:
    """The CloudWatch console's view of a log group filtered on a run's id (where a group's rows are logged)."""
    if not is_region(region) or not log_group:
        return None

    def console(text: str) -> str:  # the console's own escaping of a fragment: % written as $25
        return quote(quote(text, safe=""), safe="").replace("%", "$")

    return (
        f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#logsV2:log-groups/log-group/"
        f"{console(log_group)}/log-events$3FfilterPattern$3D{console(run_id)}"
    )
