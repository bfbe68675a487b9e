"""The notifier: queued notices become Slack messages on the right channels, one conversation per episode.

What one invocation receives (an SQS batch, gathered over the event source's batching window) is told per
destination (channel or webhook): a notice whose conversation is open is a reply in its thread, and its parent is
updated to the current state (Slack app); the rest open conversations, each its own message, or one group
message when there are more than GROUP_ABOVE (and always for the daily digest). A notice already told in its
conversation (a redelivery, a redrive) is not told again. With a webhook there are no threads: what follows is
its own message, grouped the same way.

A webhook secret nobody filled in (created empty by the stack, or blank) cannot be told through Slack: the first
notice that meets it, once per cold start, publishes one message to the ops topic (the ``OpsNotificationsTopic``
the stack creates, subscribe an email to it), logs ``Slack webhook secret not filled`` and counts
``SlackSecretNotFilled``. The notice itself goes on as before: retried while the secret has no value, parked
when it is blank.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from costguard.aws import clients
from costguard.clock import now as clock_now
from costguard.notify.conversation import PERMISSIONS as CONVERSATION_PERMISSIONS
from costguard.notify.conversation import (
    Conversation,
    ConversationStore,
    DynamoConversationStore,
    destination_id,
)
from costguard.notify.delivery import (
    SECRET_PERMISSIONS,
    UNFILLED_SECRET_ERRORS,
    DeliveryError,
    load_routes,
    post,
)
from costguard.notify.message import (
    OWNER_TAG,
    build_group_message,
    build_message,
    build_reply,
    log_link,
)
from costguard.notify.notice import GROUP_ABOVE, ROWS_CARRIED, AnyNotice, GroupNotice, Notice, group
from costguard.notify.routing import SlackRoutes
from costguard.observability import logger, metrics, tracer
from costguard.permissions import needs
from costguard.settings import Settings

if TYPE_CHECKING:
    from costguard.notify.slack_api import SlackApi

# The ops topic's ARN (the NotifierFunction's environment only); unset, the notice is logged and counted only.
OPS_TOPIC_VARIABLE = "COSTGUARD_OPS_TOPIC_ARN"
OPS_PERMISSIONS = needs("sns:Publish")  # tell_ops_once: the ops topic only
DELIVER_PERMISSIONS = (
    SECRET_PERMISSIONS | OPS_PERMISSIONS | CONVERSATION_PERMISSIONS
)  # deliver, deliver_batch

OPS_SUBJECT = "costguard: the Slack webhook secret is not filled in"


# The (secret, topic) pairs this process (one Lambda cold start) has told about already. A Lambda process has one
# of each; keyed, a local stack (a new secret ARN each time) starts afresh in the same test process.
_told: set[tuple[str, str]] = set()


def routes_for(settings: Settings) -> SlackRoutes:
    """The Slack secret's routes. A secret nobody filled in is told once on the ops topic, then raised: retried
    while it has no value (UnsetSecretError), parked when it is blank (EmptySecretError)."""
    try:
        return load_routes(settings.slack_secret_id)
    except UNFILLED_SECRET_ERRORS as unfilled:
        tell_ops_once(unfilled, settings)
        raise


def _tags(notice: AnyNotice) -> dict[str, str]:
    return notice.route_tags if isinstance(notice, GroupNotice) else notice.decision.resource.tags


def _place(notice: AnyNotice) -> tuple[str | None, str | None]:
    """The account and OU a notice (a group's first row) is about: routes may follow them."""
    first = notice.rows[0] if isinstance(notice, GroupNotice) and notice.rows else notice
    if isinstance(first, GroupNotice):
        return None, None
    resource = first.decision.resource
    return resource.account, resource.account_ou


@dataclass
class Post:
    """One message to send: an opener, a group, or a reply in a conversation's thread."""

    kind: str  # "opener" | "group" | "digest" | "reply"
    members: list[str]  # the SQS message ids it carries
    notices: list[Notice] = field(default_factory=list)  # the notices it tells (a group's rows)
    group: GroupNotice | None = None
    conversation: Conversation | None = None  # the one replied in


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
            elif rest.count == len(rest.rows) and rest.count <= above:
                openers.extend((mid, row) for row in rest.rows)  # few left: each its own, as a run's few are
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
    posts = list(replies)
    if groups or len(openers) > above:
        members = [mid for mid, _ in groups] + [mid for mid, _ in openers]
        posts.append(
            Post(
                "group",
                members,
                group=_merge([g for _, g in groups], [n for _, n in openers], routing_tag_key),
            )
        )
    else:
        posts.extend(Post("opener", [mid], [notice]) for mid, notice in openers)
    if digests:
        merged = _merge([g for _, g in digests], [], routing_tag_key, digest=True)
        posts.append(Post("digest", [mid for mid, _ in digests], group=merged))
    return posts, told


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
    priced = [r.decision.hourly_usd for r in removed if r.decision.hourly_usd is not None]
    rest = grouped.model_copy(
        update={
            "rows": keep,
            "count": count,
            "hourly_total_usd": round(grouped.hourly_total_usd - sum(priced), 2),
            "unpriced": grouped.unpriced - (len(removed) - len(priced)),
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
        hourly_total_usd=round(sum(p.hourly_total_usd for p in parts), 2),
        unpriced=sum(p.unpriced for p in parts),
        by_reason=dict(sorted(by_reason.items(), key=lambda kv: -kv[1])),
        digest=digest,
        route_tags=parts[0].route_tags if parts else {},
        source=next((p.source for p in parts if p.source), None),
        log_id=next((p.log_id for p in parts if p.log_id), None),
    )


class Sender:
    """The final calls: a webhook post, or the Slack app's postMessage and update."""

    def __init__(self, destination: str, api: SlackApi | None) -> None:
        self.destination = destination
        self.api = api  # when the secret holds the app's token

    @property
    def threads(self) -> bool:
        return self.api is not None

    def owner(self, notice: Notice) -> str | None:
        tag = notice.decision.resource.tags.get(OWNER_TAG, "").strip()
        if not tag or self.api is None:
            return None
        try:
            return self.api.user_for(tag)
        except Exception:  # an owner nobody can resolve falls back to the channel
            return None

    def send(self, message: dict[str, Any], thread_ts: str | None = None) -> str | None:
        if self.api is None:
            post(self.destination, message)
            return None
        return self.api.post(self.destination, message, thread_ts=thread_ts)

    def update(self, ts: str, message: dict[str, Any]) -> None:
        if self.api is not None:
            self.api.update(self.destination, ts, message)


@tracer.capture_method
def deliver_batch(
    items: Sequence[tuple[str, AnyNotice]],
    settings: Settings,
    store: ConversationStore | None = None,
) -> dict[str, Exception]:
    """Tell a batch of queued notices; returns the failure of each SQS message id that was not told (a
    PermanentDeliveryError is parked by the caller, anything else retried)."""
    try:
        routes = routes_for(settings)
    except Exception as error:  # unfilled, malformed or unreadable: every notice meets the same
        return {mid: error for mid, _ in items}
    store = store or DynamoConversationStore(settings.state_table)
    api = _api_for(routes)
    by_destination: dict[str, list[tuple[str, AnyNotice]]] = {}
    for mid, notice in items:
        destination = routes.channel_for(_tags(notice), settings.routing_tag_key, *_place(notice))
        by_destination.setdefault(destination, []).append((mid, notice))
    failures: dict[str, Exception] = {}
    for destination, members in by_destination.items():
        sender = Sender(destination, api)
        keys = [
            n.decision.finding.conversation
            for _, notice in members
            for n in (notice.rows if isinstance(notice, GroupNotice) else [notice])
        ]
        try:
            conversations = store.get_many(destination, keys)
        except Exception:  # the state table is unreachable: every notice opens its own message, none is lost
            logger.warning("conversations unavailable: telling without threads")
            conversations = {}
        posts, _ = plan(
            members,
            conversations,
            threads=sender.threads,
            above=settings.slack_group_above,
            routing_tag_key=settings.routing_tag_key,
        )
        for planned in posts:
            try:
                _send(planned, sender, store, settings)
            except Exception as error:
                for mid in planned.members:
                    failures[mid] = error
    return failures


def _api_for(routes: SlackRoutes) -> SlackApi | None:
    """The Web API client when the secret holds a Slack app (imported only then: webhooks need none of it)."""
    if not routes.is_app:
        return None
    from costguard.notify.slack_api import api_for

    return api_for(routes)


def _send(planned: Post, sender: Sender, store: ConversationStore, settings: Settings) -> None:
    """Post one planned message and remember the conversations it opens or continues."""
    now = clock_now()
    where = destination_id(sender.destination)
    channel = sender.destination if sender.threads else None
    if planned.kind == "reply":
        notice, conversation = planned.notices[0], planned.conversation
        assert conversation is not None and conversation.ts is not None
        owner = sender.owner(notice)
        sender.send(build_reply(notice, owner=owner), thread_ts=conversation.ts)
        try:  # the parent shows the current state; a failed update loses nothing the thread does not say
            if conversation.grouped:
                _update_row(store, sender, where, conversation, notice, settings, now)
            else:
                sender.update(conversation.ts, build_message(notice, owner=owner, interactive=True))
        except Exception as error:
            logger.warning("parent not updated", extra={"cause": type(error).__name__})
        _remember(store, conversation.with_told(notice.id), now)
        return
    if planned.kind == "opener":
        notice = planned.notices[0]
        message = build_message(notice, owner=sender.owner(notice), interactive=sender.threads)
        ts = sender.send(message)
        key = notice.decision.finding.conversation
        _remember(
            store, Conversation(key=key, destination=where, channel=channel, ts=ts, told=(notice.id,)), now
        )
        return
    grouped = planned.group
    assert grouped is not None
    owners = {
        row.decision.resource.key: owner
        for row in grouped.rows[:10]
        if (owner := sender.owner(row)) is not None
    }
    link = None
    if grouped.source and grouped.log_id and grouped.rows:
        link = log_link(grouped.rows[0].decision.resource.region, grouped.source, grouped.log_id)
    ts = sender.send(build_group_message(grouped, owners=owners, interactive=sender.threads, more_link=link))
    if ts is not None and planned.kind == "group":
        try:  # kept so that a reply in its thread can update its row
            store.put_group(where, ts, grouped.model_dump_json(), now)
        except Exception as error:
            logger.warning("group not recorded", extra={"cause": type(error).__name__})
    if planned.kind == "digest":
        return  # its rows were told when first seen: their conversations stay where they are
    for row in grouped.rows:
        key = row.decision.finding.conversation
        _remember(
            store,
            Conversation(key=key, destination=where, channel=channel, ts=ts, grouped=True, told=(row.id,)),
            now,
        )


def _update_row(
    store: ConversationStore,
    sender: Sender,
    where: str,
    conversation: Conversation,
    notice: Notice,
    settings: Settings,
    now: datetime,
) -> None:
    """A group message whose row has news: the row shows the new state (and who asked for it)."""
    assert conversation.ts is not None
    body = store.get_group(where, conversation.ts)
    if body is None:
        return
    grouped = GroupNotice.model_validate_json(body)
    fresh = notice.slim(settings.routing_tag_key)
    rows = [fresh if r.decision.finding.conversation == conversation.key else r for r in grouped.rows]
    updated = grouped.model_copy(update={"rows": rows})
    owners = {r.decision.resource.key: o for r in rows[:10] if (o := sender.owner(r)) is not None}
    sender.update(conversation.ts, build_group_message(updated, owners=owners, interactive=True))
    store.put_group(where, conversation.ts, updated.model_dump_json(), now)


def _remember(store: ConversationStore, conversation: Conversation, now: datetime) -> None:
    try:
        store.put(conversation, now)
    except Exception as error:  # told already: a lost record costs a new thread next time, not a lost message
        logger.warning("conversation not recorded", extra={"cause": type(error).__name__})


def tell_ops_once(problem: DeliveryError, settings: Settings) -> bool:
    """Log, count and publish to the ops topic that the webhook secret is not filled: once per cold start.

    Returns whether the ops topic took the message. A failure to publish is logged, never raised: the notice's
    own fate (retried or parked) does not depend on it.
    """
    secret = settings.slack_secret_id
    topic = os.environ.get(OPS_TOPIC_VARIABLE, "").strip()
    if (secret, topic) in _told:
        return False
    _told.add((secret, topic))
    logger.error(
        "Slack webhook secret not filled",
        extra={"secret": secret, "problem": str(problem), "ops_topic": topic or None},
    )
    metrics.add_metric(name="SlackSecretNotFilled", unit=MetricUnit.Count, value=1)
    if not topic:
        return False
    text = (
        f"costguard cannot post to Slack: {problem}.\n\n"
        f"Secret: {secret}\n"
        "Put the Slack incoming-webhook URL (or a routing map) in it:\n"
        f"  aws secretsmanager put-secret-value --secret-id {secret} "
        "--secret-string 'https://hooks.slack.com/services/...'\n\n"
        "Notices wait meanwhile: while the secret has no value they are retried, then kept in the decisions "
        "dead-letter queue (costguard redrive); a blank secret parks them in the failed-events queue "
        "(costguard redrive --parked). This message is sent at most once per notifier cold start."
    )
    try:
        clients.client("sns").publish(TopicArn=topic, Subject=OPS_SUBJECT, Message=text)
    except Exception as failed:
        logger.error(
            "ops topic refused the message", extra={"ops_topic": topic, "cause": type(failed).__name__}
        )
        return False
    return True
