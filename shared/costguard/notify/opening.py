"""Opening conversations: a parent (an opener or a group) is claimed in each conversation it opens before it is
posted; one whose answer was lost, or left unsure by a notifier that stopped, is looked for and adopted."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from costguard.notify.conversation import (
    Claim,
    destination_id,
    group_post_id,
)
from costguard.notify.message import build_message
from costguard.notify.notice import Notice
from costguard.notify.planning import Post
from costguard.notify.posts import group_message
from costguard.notify.run import ParentBusyError, Run, grace, record_offered, wait_for_parent
from costguard.notify.sender import Sender
from costguard.notify.slack_api import ApiOutcomeUnknown
from costguard.observability import logger


def open_conversation(planned: Post, sender: Sender, run: Run, now: datetime) -> bool:
    """A new conversation's parent (an opener, or a group of them), claimed before it is posted: one parent per
    conversation whatever else is telling it. True when a claim was lost: the members are planned again, as
    replies in the winner's thread."""
    where, channel = destination_id(sender.destination), sender.destination
    grouped = planned.group if planned.kind == "group" else None
    rows = list(grouped.rows) if grouped is not None else planned.notices[:1]
    post_key = grouped.id if grouped is not None else rows[0].id
    keys = list(dict.fromkeys(r.decision.finding.conversation for r in rows))
    claimed: dict[str, Claim] = {}
    recorded = True
    try:
        for key in keys:
            claim = run.store.claim(where, key, channel, post_key, run.until(), now)
            if not claim.won:
                _release(run, where, post_key, claimed)
                wait_for_parent(run, sender, where, key)
                return True
            claimed[key] = claim
    except ParentBusyError:
        raise
    except Exception as error:  # the state table is unreachable: posted unrecorded, as before (never lost)
        logger.warning("parent not claimed: told without recording it", extra={"cause": type(error).__name__})
        _release(run, where, post_key, claimed)
        recorded = False
    if (
        recorded
        and (found := _look_for_taken_over(planned, sender, run, where, post_key, claimed, now)) is not None
    ):
        return found
    if grouped is not None and recorded:
        run.store.put_group(where, post_key, grouped, now)
    message = (
        group_message(grouped, sender, interactive=sender.interactive)
        if grouped is not None
        else build_message(rows[0], owner=sender.owner(rows[0]), interactive=sender.interactive)
    )
    try:
        ts = sender.send(message, key=post_key)
    except ApiOutcomeUnknown:
        for key in claimed:  # the next try looks for it first
            run.store.abandon(where, key, post_key, grace(sender))
        raise
    except Exception:
        _release(run, where, post_key, claimed)
        raise
    assert ts is not None
    if recorded:
        _record_open(run, where, channel, post_key, ts, rows, grouped is not None, now)
    record_offered(run, channel, ts, rows, message, now)
    return False


def _release(run: Run, where: str, post_key: str, claimed: dict[str, Claim]) -> None:
    for key, claim in claimed.items():
        run.store.release(where, key, post_key, claim.before)


def _look_for_taken_over(
    planned: Post,
    sender: Sender,
    run: Run,
    where: str,
    post_key: str,
    claimed: dict[str, Claim],
    now: datetime,
) -> bool | None:
    """Claims taken over from a notifier that stopped mid-post: its post may be in Slack. Found, it is the
    parent: ours (the same post, redelivered) is recorded as posted (False: done); another's opens its
    conversations, and ours is planned again as replies there (True). None: nothing found, post ours."""
    stale = {
        claim.before.claim for claim in claimed.values() if claim.before is not None and claim.before.claim
    }
    for earlier in sorted(stale):
        try:
            ts = sender.find(earlier)
        except Exception:
            _release(run, where, post_key, claimed)
            raise
        if ts is None:
            continue
        if earlier == post_key:
            grouped = planned.group if planned.kind == "group" else None
            rows = list(grouped.rows) if grouped is not None else planned.notices[:1]
            if grouped is not None:
                run.store.put_group(where, post_key, grouped, now)
            _record_open(run, where, sender.destination, post_key, ts, rows, grouped is not None, now)
            return False
        _adopt(run, sender, where, earlier, ts, post_key, claimed, now)
        _release(run, where, post_key, claimed)
        return True
    return None


def _adopt(
    run: Run,
    sender: Sender,
    where: str,
    earlier: str,
    ts: str,
    post_key: str,
    claimed: dict[str, Claim],
    now: datetime,
) -> None:
    """Another notifier's post, found in Slack: the parent of the conversations it claimed (a group's are kept
    with its rows; an opener's key is its notice's id)."""
    channel = sender.destination
    state = run.store.group(group_post_id(where, earlier))
    if state is None:
        for key, claim in claimed.items():
            if claim.before is not None and claim.before.claim == earlier:
                run.store.open(
                    where,
                    key,
                    channel=channel,
                    post=earlier,
                    ts=ts,
                    grouped=False,
                    told=[earlier],
                    now=now,
                    claims=[post_key],
                )
        return
    told: dict[str, list[str]] = {}
    for row in state.body.rows:
        if row.id in state.posted:
            told.setdefault(row.decision.finding.conversation, []).append(row.id)
    for key, ids in told.items():
        run.store.open(
            where,
            key,
            channel=channel,
            post=earlier,
            ts=ts,
            grouped=True,
            told=ids,
            now=now,
            claims=[post_key, earlier],
        )
    message = group_message(state.body, sender, interactive=sender.interactive)
    record_offered(run, channel, ts, state.body.rows, message, now)


def _record_open(
    run: Run,
    where: str,
    channel: str,
    post_key: str,
    ts: str,
    rows: Sequence[Notice],
    grouped: bool,
    now: datetime,
) -> None:
    """The posted parent, recorded in each conversation it opens with the notices it told there."""
    for key in dict.fromkeys(r.decision.finding.conversation for r in rows):
        told = [r.id for r in rows if r.decision.finding.conversation == key]
        try:
            opened = run.store.open(
                where,
                key,
                channel=channel,
                post=post_key,
                ts=ts,
                grouped=grouped,
                told=told,
                now=now,
                parent=None if grouped else rows[0],
                claims=[post_key],
            )
        except Exception as error:  # posted: the next notice of it opens a new thread, nothing is lost
            logger.warning("conversation not recorded", extra={"cause": type(error).__name__})
            continue
        if not opened:
            logger.error("parent posted, but its conversation has another", extra={"key": key, "ts": ts})
