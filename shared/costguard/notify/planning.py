"""Planning a destination's batch: which notices open conversations, group, reply in a thread, or are news of
many threads (Post, plan). Pure: it reads the conversations given, never Slack or the table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from costguard.model import ResourceKind
from costguard.notify.conversation import Conversation
from costguard.notify.notice import (
    GROUP_ABOVE,
    ROWS_CARRIED,
    AnyNotice,
    GroupNotice,
    Notice,
    group,
    kind_of,
    merged_totals,
    stands_alone,
    totals_without,
)


def tags_of(notice: AnyNotice) -> dict[str, str]:
    return notice.route_tags if isinstance(notice, GroupNotice) else notice.decision.resource.tags


def place_of(notice: AnyNotice) -> tuple[str | None, str | None]:
    """The account and OU a notice (a group's first row) is about: routes may follow them."""
    first = notice.rows[0] if isinstance(notice, GroupNotice) and notice.rows else notice
    if isinstance(first, GroupNotice):
        return None, None
    resource = first.decision.resource
    return resource.account, resource.account_ou


@dataclass
class Post:
    """One message to send: an opener, a group, or a reply in a conversation's thread."""

    kind: str  # "opener" | "group" | "digest" | "reply" | "news"
    members: list[str]  # the SQS message ids it carries (news: one per notice, in step with ``notices``)
    notices: list[Notice] = field(default_factory=list)  # the notices it tells (a group's rows)
    group: GroupNotice | None = None
    conversation: Conversation | None = None  # the one replied in
    threads: list[Conversation] = field(default_factory=list)  # news: each notice's open conversation


def plan(
    items: Sequence[tuple[str, AnyNotice]],
    conversations: dict[str, Conversation],
    *,
    threads: bool,
    above: int = GROUP_ABOVE,
    routing_tag_key: str = "team",
) -> tuple[list[Post], list[str]]:
    """What to post for one destination's notices (pure): the posts, and the message ids already told."""
    told: list[str] = []
    replies: list[Post] = []
    openers: list[tuple[str, Notice]] = []
    groups: list[tuple[str, GroupNotice]] = []
    digests: list[tuple[str, GroupNotice]] = []
    seen: set[str] = set()
    for mid, notice in items:
        if notice.id in seen:  # the same notice twice in one batch (EventBridge, SQS deliver at least once)
            told.append(mid)
            continue
        seen.add(notice.id)
        if isinstance(notice, GroupNotice):
            if notice.digest:
                digests.append((mid, notice))
                continue
            # A row whose conversation is open is news in that thread; a row told already is not told again.
            rest, follow = _split(notice, conversations, threads=threads)
            replies.extend(Post("reply", [mid], [row], conversation=c) for row, c in follow)
            if rest is None:
                if not follow:
                    told.append(mid)
            elif rest.count == len(rest.rows) and (
                rest.count <= above or kind_of(rest) is None or any(stands_alone(r) for r in rest.rows)
            ):
                # Few left: each its own, as a run's few are. So are the rows of a group queued before groups
                # were made per kind and kept budgets apart: grouped again below, per kind.
                openers.extend((mid, row) for row in rest.rows)
            else:
                groups.append((mid, rest))
            continue
        conversation = conversations.get(notice.decision.finding.conversation)
        if conversation is not None and notice.id in conversation.told:
            told.append(mid)
        elif threads and conversation is not None and conversation.ts:
            replies.append(Post("reply", [mid], [notice], conversation=conversation))
        else:
            openers.append((mid, notice))
    posts = _news(replies, above, routing_tag_key) if threads else list(replies)
    # A budget alert or an anomaly is always its own message; the rest are grouped per resource kind when more
    # than ``above`` of them arrive (or a producer grouped them), a kind with one notice still told on its own.
    loose = [(mid, n) for mid, n in openers if not stands_alone(n)]
    grouped: dict[ResourceKind | None, list[tuple[str, AnyNotice]]] = {}
    if groups or len(loose) > above:
        for mid, produced in groups:
            grouped.setdefault(kind_of(produced), []).append((mid, produced))
        for mid, single in loose:
            grouped.setdefault(single.decision.resource.kind, []).append((mid, single))
    for kind, members in list(grouped.items()):
        if len(members) == 1 and isinstance(members[0][1], Notice):
            del grouped[kind]  # alone of its kind: told on its own
    in_group = {id(part) for members in grouped.values() for _, part in members}
    posts.extend(Post("opener", [mid], [notice]) for mid, notice in openers if id(notice) not in in_group)
    for members in grouped.values():
        posts.append(
            Post(
                "group",
                [mid for mid, _ in members],
                group=_merge(
                    [p for _, p in members if isinstance(p, GroupNotice)],
                    [p for _, p in members if isinstance(p, Notice)],
                    routing_tag_key,
                ),
            )
        )
    digest_kinds: dict[ResourceKind | None, list[tuple[str, GroupNotice]]] = {}
    for mid, digest in digests:
        digest_kinds.setdefault(kind_of(digest), []).append((mid, digest))
    for same_kind in digest_kinds.values():
        merged = _merge([g for _, g in same_kind], [], routing_tag_key, digest=True)
        posts.append(Post("digest", [mid for mid, _ in same_kind], group=merged))
    return posts, told


def _news(replies: list[Post], above: int, routing_tag_key: str) -> list[Post]:
    """Replies, or, when more than ``above`` of them arrive at once (an organization's sweeps stopping what they
    marked, say), one group message of news per resource kind: Slack takes about one message a second per
    channel. Each notice is still recorded in its conversation and shown by its parent (tell_news). A budget
    alert or an anomaly stays a reply in its thread, and so does a kind with one notice."""
    loose = [p for p in replies if not stands_alone(p.notices[0])]
    if len(loose) <= above:
        return replies
    posts = [p for p in replies if stands_alone(p.notices[0])]
    kinds: dict[ResourceKind, list[tuple[str, Notice, Conversation]]] = {}
    for reply in loose:
        notice, conversation = reply.notices[0], reply.conversation
        assert conversation is not None  # a reply's
        kinds.setdefault(notice.decision.resource.kind, []).append((reply.members[0], notice, conversation))
    for same in kinds.values():
        notices = [n for _, n, _ in same]
        if len(same) == 1:
            posts.extend(Post("reply", [m], [n], conversation=c) for m, n, c in same)
            continue
        posts.append(
            Post(
                "news",
                [m for m, _, _ in same],
                notices,
                group=group(notices, routing_tag_key=routing_tag_key),
                threads=[c for _, _, c in same],
            )
        )
    return posts


def _split(
    grouped: GroupNotice, conversations: dict[str, Conversation], *, threads: bool
) -> tuple[GroupNotice | None, list[tuple[Notice, Conversation]]]:
    """A producer's group less its rows told already and its rows with an open thread (returned to be replied
    there); None when nothing is left of it. The totals are those of what is left."""
    keep: list[Notice] = []
    follow: list[tuple[Notice, Conversation]] = []
    removed: list[Notice] = []
    for row in grouped.rows:
        conversation = conversations.get(row.decision.finding.conversation)
        if conversation is not None and row.id in conversation.told:
            removed.append(row)
        elif threads and conversation is not None and conversation.ts:
            follow.append((row, conversation))
            removed.append(row)
        else:
            keep.append(row)
    if not removed:
        return grouped, []
    count = grouped.count - len(removed)
    if count <= 0:
        return None, follow
    by_reason = dict(grouped.by_reason)
    for row in removed:
        reason = row.decision.reason.value
        by_reason[reason] = by_reason.get(reason, 0) - 1
    rest = grouped.model_copy(
        update={
            "rows": keep,
            "count": count,
            # A resource counts until its last row is removed (another finding about it may stay).
            **totals_without(grouped, removed),
            "by_reason": {k: v for k, v in by_reason.items() if v > 0},
        }
    )
    return rest, follow


def _merge(
    groups: Sequence[GroupNotice], notices: Sequence[Notice], routing_tag_key: str, *, digest: bool = False
) -> GroupNotice:
    """Groups and single notices for one destination, as one group (totals over all of them)."""
    loose = group(notices, routing_tag_key=routing_tag_key, digest=digest) if notices else None
    parts = [*groups, *([loose] if loose else [])]
    rows = sorted(
        (row for part in parts for row in part.rows),
        key=lambda n: (
            -(n.decision.hourly_usd if n.decision.hourly_usd is not None else -1.0),
            n.decision.resource.key,
        ),
    )
    by_reason: dict[str, int] = {}
    for part in parts:
        for reason, count in part.by_reason.items():
            by_reason[reason] = by_reason.get(reason, 0) + count
    return GroupNotice(
        rows=rows[:ROWS_CARRIED],
        count=sum(p.count for p in parts),
        **merged_totals(parts),  # a resource in two of the parts counts once
        by_reason=dict(sorted(by_reason.items(), key=lambda kv: -kv[1])),
        digest=digest,
        route_tags=parts[0].route_tags if parts else {},
        source=next((p.source for p in parts if p.source), None),
        log_id=next((p.log_id for p in parts if p.log_id), None),
    )
