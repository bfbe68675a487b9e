"""A destination's batch in rounds: at most one notice of a conversation per round, the oldest first, each round
planned with what the one before recorded; the conversations a stop is told in go first."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime

from costguard.clock import now as clock_now
from costguard.model import Action
from costguard.notify.conversation import (
    Conversation,
    destination_id,
    group_item,
)
from costguard.notify.delivery import NotStartedError
from costguard.notify.notice import (
    AnyNotice,
    GroupNotice,
    Notice,
)
from costguard.notify.opening import open_conversation
from costguard.notify.planning import Post, plan
from costguard.notify.posts import (
    left_to_another,
    render_group,
    render_parent,
    tell_digest,
    tell_news,
    tell_reply,
    tell_webhook,
)
from costguard.notify.run import (
    CHANNEL_INTERVAL_SECONDS,
    LIMITED_TURNS,
    REPLANS,
    ParentBusyError,
    ParentChangedError,
    Run,
)
from costguard.notify.sender import Sender
from costguard.notify.slack_api import ApiDeliveryError
from costguard.observability import logger


def _keys(notice: AnyNotice) -> set[str]:
    """The conversations a notice tells in (none for a digest: it leaves them where they are)."""
    if isinstance(notice, GroupNotice):
        return set() if notice.digest else {r.decision.finding.conversation for r in notice.rows}
    return {notice.decision.finding.conversation}


def stops_of(members: Sequence[tuple[str, AnyNotice]]) -> set[int]:
    """The notices (their id()) of the conversations a stop is told in, every notice of each: the order of a
    conversation's notices is kept."""
    keys: set[str] = set()
    for _, notice in members:
        rows = notice.rows if isinstance(notice, GroupNotice) else [notice]
        if any(r.decision.action is Action.STOP and not r.decision.dry_run for r in rows):
            keys |= _keys(notice)
    found: set[int] = set()
    while True:  # a producer's group spans conversations: what shares one with a stop goes with it
        more = [n for _, n in members if id(n) not in found and _keys(n) & keys]
        if not more:
            return found
        for notice in more:
            found.add(id(notice))
            keys |= _keys(notice)


def _oldest(notice: AnyNotice) -> datetime:
    if isinstance(notice, GroupNotice):
        return min((_decided(r) for r in notice.rows), default=datetime.min.replace(tzinfo=UTC))
    return _decided(notice)


def _decided(notice: Notice) -> datetime:
    decided = notice.decision.decided_at
    return decided if decided.tzinfo is not None else decided.replace(tzinfo=UTC)


def rounds_of(members: Sequence[tuple[str, AnyNotice]]) -> list[list[tuple[str, AnyNotice]]]:
    """The batch in rounds, each telling at most one notice of a conversation (the oldest first, else as they
    came): the next round plans with what the one before recorded (an opener's ts, its told notices)."""
    rest = sorted(members, key=lambda member: _oldest(member[1]))
    rounds: list[list[tuple[str, AnyNotice]]] = []
    while rest:
        taken: set[str] = set()
        now: list[tuple[str, AnyNotice]] = []
        later: list[tuple[str, AnyNotice]] = []
        for member in rest:
            keys = _keys(member[1])
            (later if keys & taken else now).append(member)
            if not keys & taken:
                taken |= keys
        rounds.append(now)
        rest = later
    return rounds


def deliver_round(members: list[tuple[str, AnyNotice]], sender: Sender, run: Run) -> None:
    pending = members
    for _ in range(REPLANS):
        pending = _deliver_once(pending, sender, run)
        if not pending:
            return
    run.fail(
        (mid for mid, _ in pending), ParentBusyError("the conversation's first message is still being posted")
    )


def _deliver_once(
    members: list[tuple[str, AnyNotice]], sender: Sender, run: Run
) -> list[tuple[str, AnyNotice]]:
    """Plan and post one round; the members to plan again (a claim lost to another notifier's parent)."""
    keys = [k for _, notice in members for k in sorted(_keys(notice))]
    try:
        conversations = run.store.get_many(sender.destination, keys)
    except Exception:  # the state table is unreachable: every notice opens its own message, none is lost
        logger.warning("conversations unavailable: telling without threads")
        conversations = {}
    posts, told = plan(
        members,
        conversations,
        threads=sender.threads,
        above=run.settings.slack_group_above,
        routing_tag_key=run.settings.routing_tag_key,
    )
    if sender.threads and told:
        catch_up(told, members, conversations, sender, run)
    again: list[tuple[str, AnyNotice]] = []
    for planned in posts:
        if run.halted is not None:
            run.fail(planned.members, run.halted)
            continue
        if not run.deadline.allows(sender.worst):
            run.not_started += len(planned.members)
            run.fail(
                planned.members,
                NotStartedError(
                    f"not started: {run.deadline.left():.1f} s left, a call may take {sender.worst:.0f} s"
                ),
            )
            continue
        try:
            if _send_in_turn(planned, sender, run):
                again.extend(member for member in members if member[0] in planned.members)
        except Exception as error:
            run.fail(planned.members, error)
    return again


def _send_in_turn(planned: Post, sender: Sender, run: Run) -> bool:
    """_send, tried again while Slack's rate limit (HTTP 429) keeps refusing it and the invocation has time (each
    try is idempotent: what was posted is found by its lease or claim). Slack's ``ok: false ratelimited`` (the app
    throttled across the workspace) is not waited for here: it stops the batch (Run.fail)."""
    for _ in range(LIMITED_TURNS):
        try:
            return _send(planned, sender, run)
        except ApiDeliveryError as error:
            if error.status != 429 or not run.deadline.allows(CHANNEL_INTERVAL_SECONDS + sender.worst):
                raise
        time.sleep(CHANNEL_INTERVAL_SECONDS)
    return _send(planned, sender, run)


def catch_up(
    told: Sequence[str],
    members: Sequence[tuple[str, AnyNotice]],
    conversations: dict[str, Conversation],
    sender: Sender,
    run: Run,
) -> None:
    """A notice told already (a redelivery) whose parent may not show the newest state (its update failed):
    the parent is rendered again."""
    done: set[str] = set()
    for mid, notice in members:
        if mid not in told or not isinstance(notice, Notice):
            continue
        conversation = conversations.get(notice.decision.finding.conversation)
        if conversation is None or not conversation.ts or conversation.key in done:
            continue
        done.add(conversation.key)
        try:
            if conversation.grouped:
                item = group_item(destination_id(sender.destination), conversation)
                if item is not None:
                    render_group(item, conversation.ts, sender, run, clock_now())
            elif conversation.stale:
                render_parent(conversation, sender, run, clock_now())
        except ParentChangedError:
            left_to_another(conversation)
        except Exception as error:
            run.fail([mid], error)


def _send(planned: Post, sender: Sender, run: Run) -> bool:
    """Post one planned message and record it; True when its members are to be planned again."""
    now = clock_now()
    if planned.kind == "reply":
        tell_reply(planned, sender, run, now)
        return False
    if planned.kind == "digest":
        tell_digest(planned, sender, run, now)
        return False
    if planned.kind == "news":
        tell_news(planned, sender, run, now)
        return False
    if not sender.threads:
        tell_webhook(planned, sender, run, now)
        return False
    return open_conversation(planned, sender, run, now)
