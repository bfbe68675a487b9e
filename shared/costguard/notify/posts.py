"""Posting what a plan says: replies and digests under a lease, groups of news, webhooks, and rendering a
parent (an opener or a group) again to show its conversation's newest notice."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from costguard.notify.conversation import (
    Conversation,
    GroupState,
    Lease,
    ParentState,
    destination_id,
    group_item,
    order_of,
)
from costguard.notify.group_message import build_group_message, log_link
from costguard.notify.message import build_message, build_reply
from costguard.notify.notice import (
    GroupNotice,
    Notice,
    group,
)
from costguard.notify.planning import Post
from costguard.notify.run import (
    RENDERS,
    VERSION_TRIES,
    ParentChangedError,
    PostBusyError,
    Run,
    grace,
    quietly,
    record_offered,
    take_lease,
)
from costguard.notify.sender import Sender
from costguard.notify.slack_api import ApiOutcomeUnknown
from costguard.notify.values import offered_in
from costguard.observability import logger, metrics


def group_message(grouped: GroupNotice, sender: Sender, *, interactive: bool) -> dict[str, Any]:
    owners = {
        row.decision.resource.key: owner
        for row in grouped.rows[:10]
        if (owner := sender.owner(row)) is not None
    }
    link = None
    if grouped.source and grouped.log_id and grouped.rows:
        link = log_link(grouped.rows[0].decision.resource.region, grouped.source, grouped.log_id)
    return build_group_message(grouped, owners=owners, interactive=interactive, more_link=link)


def tell_webhook(planned: Post, sender: Sender, run: Run, now: datetime) -> None:
    """A webhook: the message, then the notices it told (no thread, so no parent to claim or update)."""
    where = destination_id(sender.destination)
    if planned.kind == "opener":
        rows = planned.notices[:1]
        sender.send(build_message(rows[0], owner=sender.owner(rows[0]), interactive=False))
    else:
        assert planned.group is not None
        rows = list(planned.group.rows)
        sender.send(group_message(planned.group, sender, interactive=False))
    for key in dict.fromkeys(r.decision.finding.conversation for r in rows):
        told = [r.id for r in rows if r.decision.finding.conversation == key]
        try:  # told already: a lost record costs the same message again on a redelivery, not a lost message
            run.store.add_told(where, key, told, now)
        except Exception as error:
            logger.warning("conversation not recorded", extra={"cause": type(error).__name__})


def _post_leased(
    run: Run,
    sender: Sender,
    where: str,
    key: str,
    message: dict[str, Any],
    now: datetime,
    thread_ts: str | None,
    *,
    recorded: str | None = None,
) -> str | None:
    """Post ``message`` under a lease on ``key``: at most once, whoever else holds the same notice. With
    ``recorded`` (a conversation key), the post is recorded as told there; the lease keeps its ts only when that
    record fails (a redelivery then finds it in the lease instead)."""
    lease = take_lease(run, sender, where, key, now)
    if lease is not None and lease.unsure and lease.post:  # the earlier try told it in a group of news
        found = _look_for_news(run, sender, where, key, lease.post)
        lease = Lease(False, ts=found) if found else Lease(True)  # there, or surely not: post it, no look
    if lease is not None and lease.ts:
        if recorded is not None:
            quietly(run.store.add_told, where, recorded, [key], now, ts=thread_ts)
        return None if lease.ts == WEBHOOK_SENT else lease.ts  # posted already
    try:
        ts = sender.send(
            message,
            key=key if sender.threads else None,
            thread_ts=thread_ts,
            look_first=lease is not None and lease.unsure,
        )
    except ApiOutcomeUnknown:
        if lease is not None:
            run.store.abandon_lease(where, key, grace(sender))
        raise
    except Exception:
        if lease is not None:
            run.store.release_lease(where, key)
        raise
    if recorded is not None:
        try:
            run.store.add_told(where, recorded, [key], now, ts=thread_ts)
            return ts
        except Exception as error:  # the lease keeps it: a redelivery finds it there
            logger.warning("conversation not recorded", extra={"cause": type(error).__name__})
    if lease is not None:
        try:
            run.store.finish(where, key, ts or WEBHOOK_SENT)
        except Exception as error:
            logger.warning("post not recorded", extra={"cause": type(error).__name__})
    return ts


# What a lease records for a webhook post, which has no ts.
WEBHOOK_SENT = "sent"


def tell_digest(planned: Post, sender: Sender, run: Run, now: datetime) -> None:
    """The daily digest: posted once (a lease on its id), its rows' conversations left where they are."""
    grouped = planned.group
    assert grouped is not None
    message = group_message(grouped, sender, interactive=sender.interactive)
    ts = _post_leased(run, sender, destination_id(sender.destination), grouped.id, message, now, None)
    record_offered(run, sender.channel, ts, grouped.rows, message, now)


def tell_reply(planned: Post, sender: Sender, run: Run, now: datetime) -> None:
    """News in an open conversation: a reply in its thread (once, under a lease on the notice), then the parent
    shows the newest state."""
    notice, conversation = planned.notices[0], planned.conversation
    assert conversation is not None and conversation.ts is not None
    where = destination_id(sender.destination)
    message = build_reply(notice, owner=sender.owner(notice))
    _post_leased(run, sender, where, notice.id, message, now, conversation.ts, recorded=conversation.key)
    _show(conversation, notice, sender, run, now)


def _show(conversation: Conversation, notice: Notice, sender: Sender, run: Run, now: datetime) -> None:
    """The parent of a conversation with news shows it: its row of a group, or the whole single parent. The
    notice is told by now: a render another notifier kept overtaking is left to that notifier (the last render to
    begin shows the newest), never handed back to the queue."""
    try:
        if conversation.grouped:
            _update_row(conversation, notice, sender, run, now)
            return
        try:
            state = run.store.set_parent(destination_id(sender.destination), conversation.key, notice)
        except Exception as error:
            logger.warning("parent state not recorded", extra={"cause": type(error).__name__})
            return
        render_parent(conversation, sender, run, now, state)
    except ParentChangedError:
        left_to_another(conversation)


def left_to_another(conversation: Conversation) -> None:
    logger.info(
        "parent render left to the notifier that overtook it", extra={"conversation": conversation.key}
    )
    metrics.add_metric(name="ParentRendersOvertaken", unit=MetricUnit.Count, value=1)


# A group of news is posted under this prefix and its rows' ids (its rows are kept under that key).
NEWS_PREFIX = "news-"


def tell_news(planned: Post, sender: Sender, run: Run, now: datetime) -> None:
    """News of many open conversations at once, as one group message. Each notice is told under the lease its
    reply would take (one telling whichever way a redelivery tells it: a lease already done is not told again,
    one left unsure is looked for first); then, as after a reply, its conversation records it and its parent
    shows it. A notice another notifier is telling, or whose parent update fails, is handed back alone."""
    where = destination_id(sender.destination)
    tell: list[tuple[str, Notice, Conversation]] = []
    told: list[tuple[str, Notice, Conversation]] = []
    leased: set[str] = set()
    for mid, notice, conversation in zip(planned.members, planned.notices, planned.threads, strict=True):
        try:
            lease = run.store.begin(where, notice.id, run.until(), now)
        except Exception as error:  # the state table cannot be written: told anyway, twice rather than never
            logger.warning("post not leased", extra={"cause": type(error).__name__})
            tell.append((mid, notice, conversation))
            continue
        if lease.busy:
            run.fail([mid], PostBusyError("another notifier is posting this notice"))
            continue
        found = lease.ts
        if lease.unsure:  # an earlier try may have told it: its own reply, or a group of news
            try:
                found = _look_for_news(run, sender, where, notice.id, lease.post, conversation.ts)
            except Exception as error:
                run.fail([mid], error)
                continue
        if found:
            told.append((mid, notice, conversation))
            continue
        leased.add(notice.id)
        tell.append((mid, notice, conversation))
    if tell:
        body = group([n for _, n, _ in tell], routing_tag_key=run.settings.routing_tag_key)
        key = NEWS_PREFIX + body.id
        quietly(run.store.put_group, where, key, body, now)  # what it tells, kept under its key
        message = group_message(body, sender, interactive=sender.interactive)
        try:
            ts = sender.send(message, key=key)
        except ApiOutcomeUnknown:
            for notice_id in leased:  # the next try looks for this post first
                run.store.abandon_lease(where, notice_id, grace(sender), post=key)
            raise
        except Exception:
            for notice_id in leased:
                run.store.release_lease(where, notice_id)
            raise
        assert ts is not None
        for notice_id in leased:
            quietly(run.store.finish, where, notice_id, ts)
        record_offered(run, sender.channel, ts, body.rows, message, now)
    groups: dict[str, tuple[str, GroupState, list[str]]] = {}  # a group's item: its ts, state, members
    for mid, notice, conversation in [*tell, *told]:
        try:
            run.store.add_told(where, conversation.key, [notice.id], now, ts=conversation.ts)
        except Exception as error:  # its lease keeps it: a redelivery finds it told there
            logger.warning("conversation not recorded", extra={"cause": type(error).__name__})
        try:  # told: a parent not shown is rendered by the redelivery (catch_up)
            if not conversation.grouped:
                _show(conversation, notice, sender, run, now)
            elif (written := _write_row(conversation, notice, run, where)) is not None and conversation.ts:
                item, state = written
                groups[item] = (conversation.ts, state, [*groups.get(item, ("", state, []))[2], mid])
        except Exception as error:
            run.fail([mid], error)
    for item, (ts, state, mids) in groups.items():  # each group rendered once, with all its rows' news
        try:
            render_group(item, ts, sender, run, now, state)
        except Exception as error:
            run.fail(mids, error)


def _look_for_news(
    run: Run, sender: Sender, where: str, key: str, post: str | None, thread_ts: str | None = None
) -> str | None:
    """Where an earlier try, gone with its outcome unknown, told notice ``key``: the group of news ``post``, or
    (none) its own reply in the thread at ``thread_ts``. Found, its lease is done; a look that fails leaves the
    lease unsure, still pointing at ``post``, and is raised."""
    try:
        found = sender.find(post) if post else sender.find(key, thread_ts)
    except Exception:
        run.store.abandon_lease(where, key, grace(sender), post=post)
        raise
    if found:
        quietly(run.store.finish, where, key, found)
    return found


def render_parent(
    conversation: Conversation, sender: Sender, run: Run, now: datetime, state: ParentState | None = None
) -> None:
    """The parent shows the newest notice of its conversation. After each update the newest is read again:
    news recorded meanwhile is rendered too, so the update Slack takes last is the newest. A failed update
    leaves the parent marked not shown (rendered again by the next notice or a redelivery), and is raised."""
    where, key, ts = destination_id(sender.destination), conversation.key, conversation.ts
    assert ts is not None
    state = state or run.store.parent(where, key)
    if state.notice is None or state.order is None or not state.stale:
        return  # nothing kept to render, or Slack shows it already
    for _ in range(RENDERS):
        if state.token is None:
            state = run.store.begin_render(where, key)
        if state.notice is None or state.order is None or state.token is None:
            return
        message = build_message(
            state.notice, owner=sender.owner(state.notice), interactive=sender.interactive
        )
        try:
            sender.update(ts, message)
        except Exception:
            quietly(run.store.forget_shown, where, key)
            raise
        record_offered(run, sender.channel, ts, [state.notice], message, now)
        # Marked only if it is still the newest and no other render began or failed meanwhile.
        newer = run.store.mark_shown(where, key, state.order, state.token)
        if newer is None or (newer.order == state.order and newer.shown == state.order):
            return  # marked, or another render of this same notice was (whichever landed last, Slack shows it)
        state = newer
    quietly(run.store.forget_shown, where, key)
    raise ParentChangedError("the parent kept changing while it was rendered")


def _update_row(conversation: Conversation, notice: Notice, sender: Sender, run: Run, now: datetime) -> None:
    """A group message whose row has news: the row shows the newest notice (_write_row), then the message is
    rendered."""
    written = _write_row(conversation, notice, run, destination_id(sender.destination))
    if written is not None and conversation.ts is not None:
        item, state = written
        render_group(item, conversation.ts, sender, run, now, state, changed=notice.decision.resource.key)


def _write_row(
    conversation: Conversation, notice: Notice, run: Run, where: str
) -> tuple[str, GroupState] | None:
    """The row of a group message with news shows the newest notice (and who asked for it), written over the
    version it was read at (another notifier may be updating another row): the group's item and state, None
    when nothing is kept of it."""
    item = group_item(where, conversation)
    if item is None or conversation.ts is None:
        return None
    fresh = notice.slim(run.settings.routing_tag_key)
    for _ in range(VERSION_TRIES):
        state = run.store.group(item)
        if state is None:
            return None  # nothing kept of it: no row to update
        mine = [r for r in state.body.rows if r.decision.finding.conversation == conversation.key]
        if not mine or order_of(mine[0]) >= order_of(fresh):
            break  # not a row of it, or it shows newer news already
        rows = [fresh if r.decision.finding.conversation == conversation.key else r for r in state.body.rows]
        written = run.store.put_group_version(
            item, state.body.model_copy(update={"rows": rows}), state.version
        )
        if written is not None:
            state = written
            break
    else:
        raise ParentChangedError("the group kept changing while its row was updated")
    return item, state


def render_group(
    item: str,
    ts: str,
    sender: Sender,
    run: Run,
    now: datetime,
    state: GroupState | None = None,
    *,
    changed: str | None = None,
) -> None:
    """A group message shows its latest rows, as render_parent does for a single parent. The offers of the
    ``changed`` row (a resource key) are recorded again; the others' were when they were first shown."""
    state = state or run.store.group(item)
    if state is None or not state.stale:
        return
    for _ in range(RENDERS):
        if state.token is None:
            state = run.store.begin_group_render(item)
            if state is None:
                return
        message = group_message(state.body, sender, interactive=sender.interactive)
        try:
            sender.update(ts, message)
        except Exception:
            quietly(run.store.forget_group_shown, item)
            raise
        offered = _buttons_of(message, changed) if changed is not None else message
        record_offered(run, sender.channel, ts, state.body.rows, offered, now)
        # Marked only if it is still the latest and no other render began or failed meanwhile.
        newer = run.store.mark_group_shown(item, state.version, state.token or 0)
        if newer is None or (newer.version == state.version and newer.shown == state.version):
            return  # marked, or another render of this same version was
        state, changed = newer, None  # rows changed meanwhile: all rendered, all offered
    quietly(run.store.forget_group_shown, item)
    raise ParentChangedError("the group kept changing while it was rendered")


def _buttons_of(message: dict[str, Any], resource_key: str) -> dict[str, Any]:
    """The action blocks of one resource's row in a group message."""
    return {
        "blocks": [
            block
            for block in message.get("blocks") or []
            if isinstance(block, dict)
            and block.get("type") == "actions"
            and any(key == resource_key for key, _ in offered_in({"blocks": [block]}))
        ]
    }
