"""The notifier: queued notices become Slack messages on the right channels, one conversation per episode.

What one invocation receives (an SQS batch, gathered over the event source's batching window) is told per
destination (channel or webhook): a notice whose conversation is open is a reply in its thread, and its parent is
updated to the current state (Slack app); the rest open conversations, each its own message, or group messages,
one per resource kind, when there are more than GROUP_ABOVE (and always for the daily digest); a budget alert or
a cost anomaly is always its own message. More than GROUP_ABOVE replies at once are one group of news per kind
instead (each conversation records its notice, each parent shows it). A notice already told in its
conversation (a redelivery, a redrive) is not told again. With a webhook there are no threads: what follows is
its own message, grouped the same way.

Exactly once, in the right thread, whatever runs at the same time (the event source runs two notifiers) and
whatever Slack loses (notify/conversation.py keeps the records, notify/slack_api.py makes the calls):

- The notices of one conversation in a batch are told one after another, the oldest first, each planned with
  what the one before recorded (rounds).
- A parent (an opener, a group) is claimed in each conversation it opens before it is posted; a notifier that
  loses a claim waits for the winner's ts and replies in its thread. A reply or digest takes a lease on its
  notice first, and so does each row of a group of news (a lease it leaves unsure names that group's post). Told
  notices are added to a set; a group's rows are written over the version read, and retried.
- Each post carries its key (the notice's id, a group's id) in its metadata. A post whose answer was lost (a reset,
  a timeout after Slack took it) is not retried blindly: it is looked for (conversations.history, .replies) and
  adopted if there; so is one left unsure by a notifier that stopped mid-post (its claim or lease, taken over).
- A parent shows the newest notice of its conversation (a group, the newest of each row). A failed update leaves
  it marked not shown: the next notice, or the redelivery of this one, renders it again; Slack refusing the
  update for good parks the notice, as a refused post does.
- No post starts unless the Lambda's remaining time covers the call and its worst back-off: what is left goes
  back to the queue untouched (NotStartedError).
- Slack takes about one message a second per channel: the conversations a stop is told in go first, in every
  destination, and a post Slack's limit still refuses after the client's retries waits its turn again while the
  invocation has time (_send_in_turn), rather than going back to the queue for its visibility timeout.
- Slack refusing the app itself (invalid_auth, token_revoked, account_inactive, missing_scope..., or its own
  ``ratelimited`` past the retries) stops the batch: the rest is parked (or, rate limited, retried) without
  another call, and the refusal is told once on the ops topic (``tell_ops_app_refused``) with what to fix.

A webhook secret nobody filled in (created empty by the stack, or blank) cannot be told through Slack: the first
notice that meets it, once per cold start, publishes one message to the ops topic (the ``OpsNotificationsTopic``
the stack creates, subscribe an email to it), logs ``Slack webhook secret not filled`` and counts
``SlackSecretNotFilled``. The notice itself goes on as before: retried while the secret has no value, parked
when it is blank.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit

from costguard.aws import clients
from costguard.clock import now as clock_now
from costguard.clock import wall as wall_clock
from costguard.interact.offers import PERMISSIONS as OFFER_PERMISSIONS
from costguard.interact.offers import offered_in, record_offers
from costguard.model import Action, ResourceKind
from costguard.notify.conversation import PERMISSIONS as CONVERSATION_PERMISSIONS
from costguard.notify.conversation import (
    Claim,
    Conversation,
    DynamoConversationStore,
    GroupState,
    Lease,
    ParentState,
    destination_id,
    group_item,
    group_post_id,
    order_of,
)
from costguard.notify.delivery import (
    SECRET_PERMISSIONS,
    UNBOUNDED,
    UNFILLED_SECRET_ERRORS,
    Deadline,
    DeliveryError,
    NotStartedError,
    load_routes,
    post,
    within,
)
from costguard.notify.message import (
    OWNER_TAG,
    build_group_message,
    build_message,
    build_reply,
    log_link,
)
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
from costguard.notify.routing import SlackRoutes
from costguard.notify.slack_api import ApiDeliveryError, ApiOutcomeUnknown
from costguard.notify.slack_limits import RATE_LIMITED_ERRORS
from costguard.observability import logger, metrics, tracer
from costguard.permissions import needs
from costguard.settings import Settings

if TYPE_CHECKING:
    from costguard.notify.slack_api import SlackApi

# The ops topic's ARN (the NotifierFunction's environment only); unset, the notice is logged and counted only.
OPS_TOPIC_VARIABLE = "COSTGUARD_OPS_TOPIC_ARN"
OPS_PERMISSIONS = needs("sns:Publish")  # tell_ops_once: the ops topic only
DELIVER_PERMISSIONS = (
    SECRET_PERMISSIONS | OPS_PERMISSIONS | CONVERSATION_PERMISSIONS | OFFER_PERMISSIONS
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
    channel. Each notice is still recorded in its conversation and shown by its parent (_tell_news). A budget
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


class Sender:
    """The final calls for one destination: a webhook post, or the Slack app's posts, look-ups and updates."""

    def __init__(self, destination: str, api: SlackApi | None, *, buttons: bool = True) -> None:
        self.destination = destination
        self.api = api  # when the secret holds the app's token
        self.buttons = buttons  # the app's interactions endpoint is deployed: a click reaches costguard

    @property
    def threads(self) -> bool:
        return self.api is not None

    @property
    def interactive(self) -> bool:
        """Messages carry buttons: posted as the app, whose clicks costguard receives (SlackApp=on)."""
        return self.api is not None and self.buttons

    @property
    def channel(self) -> str | None:
        """The channel id posted to (Slack app); a webhook has none to record."""
        return self.destination if self.api is not None else None

    @property
    def worst(self) -> float:
        """The longest the next call may take with its retries: no new post starts unless it fits."""
        from costguard.notify.slack_api import worst_call_seconds

        return worst_call_seconds(self.api.timeout if self.api is not None else WEBHOOK_TIMEOUT_SECONDS)

    def owner(self, notice: Notice) -> str | None:
        tag = notice.decision.resource.tags.get(OWNER_TAG, "").strip()
        if not tag or self.api is None:
            return None
        try:
            return self.api.user_for(tag)
        except Exception:  # an owner nobody can resolve falls back to the channel
            return None

    def send(
        self,
        message: dict[str, Any],
        *,
        key: str | None = None,
        thread_ts: str | None = None,
        look_first: bool = False,
    ) -> str | None:
        """Post ``message``: through the webhook (no ts), or as the app, once for ``key`` (SlackApi.post_once)."""
        if self.api is None:
            post(self.destination, message)
            return None
        if key is None:
            return self.api.post(self.destination, message, thread_ts)
        return self.api.post_once(
            self.destination, message, key=key, thread_ts=thread_ts, look_first=look_first
        )

    def find(self, key: str, thread_ts: str | None = None) -> str | None:
        return self.api.find(self.destination, key, thread_ts) if self.api is not None else None

    def update(self, ts: str, message: dict[str, Any]) -> None:
        if self.api is not None:
            self.api.update(self.destination, ts, message)


# The webhook client's timeout (delivery.webhook_client): what one webhook call may take before its retries.
WEBHOOK_TIMEOUT_SECONDS = 10
# A claim or lease taken now is surely abandoned once this invocation is over: its remaining time, at most
# Lambda's longest run, and this margin.
CLAIM_MARGIN_SECONDS = 5.0
_LONGEST_RUN_SECONDS = 900.0
# A post whose answer was lost is handed on: another notifier may take it over (looking for it first) after this
# many times the call's timeout, once a late answer can no longer be on its way.
_GRACE_TIMEOUTS = 2
_VERSION_TRIES = 8  # a group row written again over the version another notifier just wrote
# Members handed back by a lost claim are planned again (as replies in the winner's thread) at most this often.
_REPLANS = 4
# Waiting for another notifier's claim or lease: pauses between looks (about 5 s in all).
_PAUSES = (0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.5)
_RENDERS = 3  # a parent rendered again while newer news keeps arriving
# Slack takes about one chat.postMessage a second per channel (replies included), whoever posts: a post still
# refused with a 429 after the client's retries (the other notifier posting there too) waits its turn again, up
# to this many times while the invocation has time, instead of going back to the queue, whose visibility timeout
# would hold it (a stop among them) for many minutes.
_LIMITED_TURNS = 10
_CHANNEL_INTERVAL_SECONDS = 1.0


def _pause(seconds: float) -> None:
    """Wait for another notifier (not time.sleep: the clients' back-off is patched in tests, this wait is real)."""
    threading.Event().wait(seconds)


class ParentBusyError(DeliveryError):
    """Another notifier is posting this conversation's first message: the notice is retried (then replies)."""


class PostBusyError(DeliveryError):
    """Another notifier is posting this very notice: it is retried, and then found posted."""


class ParentChangedError(DeliveryError):
    """The parent kept changing while it was rendered: rendered again with the next notice or redelivery."""


@dataclass
class _Run:
    """One batch's delivery: its store and settings, the time it has, what failed, and whether Slack refused the
    app itself (then nothing more is tried: every call would meet the same answer)."""

    store: DynamoConversationStore
    settings: Settings
    deadline: Deadline
    failures: dict[str, Exception] = field(default_factory=dict)
    halted: Exception | None = None
    not_started: int = 0

    def fail(self, members: Iterable[str], error: Exception) -> None:
        for mid in members:
            self.failures[mid] = error
        if self.halted is None and _whole_app(error):
            self.halted = error
            tell_ops_app_refused(error, self.settings)

    def until(self) -> float:
        """When a claim or lease taken now is surely abandoned (epoch seconds)."""
        return wall_clock() + min(self.deadline.left(), _LONGEST_RUN_SECONDS) + CLAIM_MARGIN_SECONDS


@tracer.capture_method
def deliver_batch(
    items: Sequence[tuple[str, AnyNotice]],
    settings: Settings,
    store: DynamoConversationStore | None = None,
    *,
    deadline: Deadline | None = None,
) -> dict[str, Exception]:
    """Tell a batch of queued notices; returns the failure of each SQS message id that was not told (a
    PermanentDeliveryError is parked by the caller, anything else retried).

    Per destination, the notices of one conversation are told one after another (the oldest first), each seeing
    what the one before recorded. The conversations a stop is told in go first, in every destination, then the
    rest: Slack takes about one message a second per channel, and a stop waits for no finding. With a
    ``deadline`` (the Lambda context's), no post starts unless the call's worst case (its timeouts and back-off)
    still fits: the rest is returned as NotStartedError, untouched."""
    try:
        routes = routes_for(settings)
    except Exception as error:  # unfilled, malformed or unreadable: every notice meets the same
        return {mid: error for mid, _ in items}
    run = _Run(store or DynamoConversationStore(settings.state_table), settings, deadline or UNBOUNDED)
    api = _api_for(routes)
    by_destination: dict[str, list[tuple[str, AnyNotice]]] = {}
    for mid, notice in items:
        destination = routes.channel_for(_tags(notice), settings.routing_tag_key, *_place(notice))
        by_destination.setdefault(destination, []).append((mid, notice))
    with within(run.deadline):
        for stops in (True, False):
            for destination, members in by_destination.items():
                sender = Sender(destination, api, buttons=settings.slack_buttons)
                first = _stops_of(members)
                part = [m for m in members if (id(m[1]) in first) is stops]
                # A webhook has no thread to continue: its batch is told at once, grouped as it comes.
                for batch in _rounds(part) if sender.threads else [part] if part else []:
                    _deliver_round(batch, sender, run)
    if run.not_started:
        logger.warning(
            "batch cut short: the rest goes back to the queue",
            extra={"not_started": run.not_started, "seconds_left": round(run.deadline.left(), 1)},
        )
    return run.failures


def _api_for(routes: SlackRoutes) -> SlackApi | None:
    """The Web API client when the secret holds a Slack app (imported only then: webhooks need none of it)."""
    if not routes.is_app:
        return None
    from costguard.notify.slack_api import api_for

    return api_for(routes)


def _keys(notice: AnyNotice) -> set[str]:
    """The conversations a notice tells in (none for a digest: it leaves them where they are)."""
    if isinstance(notice, GroupNotice):
        return set() if notice.digest else {r.decision.finding.conversation for r in notice.rows}
    return {notice.decision.finding.conversation}


def _stops_of(members: Sequence[tuple[str, AnyNotice]]) -> set[int]:
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


def _rounds(members: Sequence[tuple[str, AnyNotice]]) -> list[list[tuple[str, AnyNotice]]]:
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


def _deliver_round(members: list[tuple[str, AnyNotice]], sender: Sender, run: _Run) -> None:
    pending = members
    for _ in range(_REPLANS):
        pending = _deliver_once(pending, sender, run)
        if not pending:
            return
    run.fail(
        (mid for mid, _ in pending), ParentBusyError("the conversation's first message is still being posted")
    )


def _deliver_once(
    members: list[tuple[str, AnyNotice]], sender: Sender, run: _Run
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
        _catch_up(told, members, conversations, sender, run)
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


def _send_in_turn(planned: Post, sender: Sender, run: _Run) -> bool:
    """_send, tried again while Slack's rate limit (HTTP 429) keeps refusing it and the invocation has time (each
    try is idempotent: what was posted is found by its lease or claim). Slack's ``ok: false ratelimited`` (the app
    throttled across the workspace) is not waited for here: it stops the batch (_Run.fail)."""
    for _ in range(_LIMITED_TURNS):
        try:
            return _send(planned, sender, run)
        except ApiDeliveryError as error:
            if error.status != 429 or not run.deadline.allows(_CHANNEL_INTERVAL_SECONDS + sender.worst):
                raise
        time.sleep(_CHANNEL_INTERVAL_SECONDS)
    return _send(planned, sender, run)


def _catch_up(
    told: Sequence[str],
    members: Sequence[tuple[str, AnyNotice]],
    conversations: dict[str, Conversation],
    sender: Sender,
    run: _Run,
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
                    _render_group(item, conversation.ts, sender, run, clock_now())
            elif conversation.stale:
                _render_parent(conversation, sender, run, clock_now())
        except ParentChangedError:
            _left_to_another(conversation)
        except Exception as error:
            run.fail([mid], error)


def _send(planned: Post, sender: Sender, run: _Run) -> bool:
    """Post one planned message and record it; True when its members are to be planned again."""
    now = clock_now()
    if planned.kind == "reply":
        _reply(planned, sender, run, now)
        return False
    if planned.kind == "digest":
        _digest(planned, sender, run, now)
        return False
    if planned.kind == "news":
        _tell_news(planned, sender, run, now)
        return False
    if not sender.threads:
        _tell_webhook(planned, sender, run, now)
        return False
    return _open(planned, sender, run, now)


def _group_message(grouped: GroupNotice, sender: Sender, *, interactive: bool) -> dict[str, Any]:
    owners = {
        row.decision.resource.key: owner
        for row in grouped.rows[:10]
        if (owner := sender.owner(row)) is not None
    }
    link = None
    if grouped.source and grouped.log_id and grouped.rows:
        link = log_link(grouped.rows[0].decision.resource.region, grouped.source, grouped.log_id)
    return build_group_message(grouped, owners=owners, interactive=interactive, more_link=link)


def _tell_webhook(planned: Post, sender: Sender, run: _Run, now: datetime) -> None:
    """A webhook: the message, then the notices it told (no thread, so no parent to claim or update)."""
    where = destination_id(sender.destination)
    if planned.kind == "opener":
        rows = planned.notices[:1]
        sender.send(build_message(rows[0], owner=sender.owner(rows[0]), interactive=False))
    else:
        assert planned.group is not None
        rows = list(planned.group.rows)
        sender.send(_group_message(planned.group, sender, interactive=False))
    for key in dict.fromkeys(r.decision.finding.conversation for r in rows):
        told = [r.id for r in rows if r.decision.finding.conversation == key]
        try:  # told already: a lost record costs the same message again on a redelivery, not a lost message
            run.store.add_told(where, key, told, now)
        except Exception as error:
            logger.warning("conversation not recorded", extra={"cause": type(error).__name__})


def _take_lease(run: _Run, sender: Sender, where: str, key: str, now: datetime) -> Lease | None:
    """The lease on post ``key``, waiting a little while another notifier holds it; None when the state table
    cannot be written (posted anyway: a message twice rather than none)."""
    for pause in (0.0, *_PAUSES):
        if pause:
            if not run.deadline.allows(pause + sender.worst):
                break
            _pause(pause)
        try:
            lease = run.store.begin(where, key, run.until(), now)
        except Exception as error:
            logger.warning("post not leased", extra={"cause": type(error).__name__})
            return None
        if not lease.busy:
            return lease
    raise PostBusyError("another notifier is posting this notice")


def _post_leased(
    run: _Run,
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
    lease = _take_lease(run, sender, where, key, now)
    if lease is not None and lease.unsure and lease.post:  # the earlier try told it in a group of news
        found = _look_for_news(run, sender, where, key, lease.post)
        lease = Lease(False, ts=found) if found else Lease(True)  # there, or surely not: post it, no look
    if lease is not None and lease.ts:
        if recorded is not None:
            _quietly(run.store.add_told, where, recorded, [key], now, ts=thread_ts)
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
            run.store.abandon_lease(where, key, _grace(sender))
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


def _grace(sender: Sender) -> float:
    return _GRACE_TIMEOUTS * float(sender.api.timeout if sender.api is not None else WEBHOOK_TIMEOUT_SECONDS)


def _digest(planned: Post, sender: Sender, run: _Run, now: datetime) -> None:
    """The daily digest: posted once (a lease on its id), its rows' conversations left where they are."""
    grouped = planned.group
    assert grouped is not None
    message = _group_message(grouped, sender, interactive=sender.interactive)
    ts = _post_leased(run, sender, destination_id(sender.destination), grouped.id, message, now, None)
    _offered(run.settings, sender.channel, ts, grouped.rows, message, now)


def _reply(planned: Post, sender: Sender, run: _Run, now: datetime) -> None:
    """News in an open conversation: a reply in its thread (once, under a lease on the notice), then the parent
    shows the newest state."""
    notice, conversation = planned.notices[0], planned.conversation
    assert conversation is not None and conversation.ts is not None
    where = destination_id(sender.destination)
    message = build_reply(notice, owner=sender.owner(notice))
    _post_leased(run, sender, where, notice.id, message, now, conversation.ts, recorded=conversation.key)
    _show(conversation, notice, sender, run, now)


def _show(conversation: Conversation, notice: Notice, sender: Sender, run: _Run, now: datetime) -> None:
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
        _render_parent(conversation, sender, run, now, state)
    except ParentChangedError:
        _left_to_another(conversation)


def _left_to_another(conversation: Conversation) -> None:
    logger.info(
        "parent render left to the notifier that overtook it", extra={"conversation": conversation.key}
    )
    metrics.add_metric(name="ParentRendersOvertaken", unit=MetricUnit.Count, value=1)


# A group of news is posted under this prefix and its rows' ids (its rows are kept under that key).
NEWS_PREFIX = "news-"


def _tell_news(planned: Post, sender: Sender, run: _Run, now: datetime) -> None:
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
        _quietly(run.store.put_group, where, key, body, now)  # what it tells, kept under its key
        message = _group_message(body, sender, interactive=sender.interactive)
        try:
            ts = sender.send(message, key=key)
        except ApiOutcomeUnknown:
            for notice_id in leased:  # the next try looks for this post first
                run.store.abandon_lease(where, notice_id, _grace(sender), post=key)
            raise
        except Exception:
            for notice_id in leased:
                run.store.release_lease(where, notice_id)
            raise
        assert ts is not None
        for notice_id in leased:
            _quietly(run.store.finish, where, notice_id, ts)
        _offered(run.settings, sender.channel, ts, body.rows, message, now)
    groups: dict[str, tuple[str, GroupState, list[str]]] = {}  # a group's item: its ts, state, members
    for mid, notice, conversation in [*tell, *told]:
        try:
            run.store.add_told(where, conversation.key, [notice.id], now, ts=conversation.ts)
        except Exception as error:  # its lease keeps it: a redelivery finds it told there
            logger.warning("conversation not recorded", extra={"cause": type(error).__name__})
        try:  # told: a parent not shown is rendered by the redelivery (_catch_up)
            if not conversation.grouped:
                _show(conversation, notice, sender, run, now)
            elif (written := _write_row(conversation, notice, run, where)) is not None and conversation.ts:
                item, state = written
                groups[item] = (conversation.ts, state, [*groups.get(item, ("", state, []))[2], mid])
        except Exception as error:
            run.fail([mid], error)
    for item, (ts, state, mids) in groups.items():  # each group rendered once, with all its rows' news
        try:
            _render_group(item, ts, sender, run, now, state)
        except Exception as error:
            run.fail(mids, error)


def _look_for_news(
    run: _Run, sender: Sender, where: str, key: str, post: str | None, thread_ts: str | None = None
) -> str | None:
    """Where an earlier try, gone with its outcome unknown, told notice ``key``: the group of news ``post``, or
    (none) its own reply in the thread at ``thread_ts``. Found, its lease is done; a look that fails leaves the
    lease unsure, still pointing at ``post``, and is raised."""
    try:
        found = sender.find(post) if post else sender.find(key, thread_ts)
    except Exception:
        run.store.abandon_lease(where, key, _grace(sender), post=post)
        raise
    if found:
        _quietly(run.store.finish, where, key, found)
    return found


def _render_parent(
    conversation: Conversation, sender: Sender, run: _Run, now: datetime, state: ParentState | None = None
) -> None:
    """The parent shows the newest notice of its conversation. After each update the newest is read again:
    news recorded meanwhile is rendered too, so the update Slack takes last is the newest. A failed update
    leaves the parent marked not shown (rendered again by the next notice or a redelivery), and is raised."""
    where, key, ts = destination_id(sender.destination), conversation.key, conversation.ts
    assert ts is not None
    state = state or run.store.parent(where, key)
    if state.notice is None or state.order is None or not state.stale:
        return  # nothing kept to render, or Slack shows it already
    for _ in range(_RENDERS):
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
            _quietly(run.store.forget_shown, where, key)
            raise
        _offered(run.settings, sender.channel, ts, [state.notice], message, now)
        # Marked only if it is still the newest and no other render began or failed meanwhile.
        newer = run.store.mark_shown(where, key, state.order, state.token)
        if newer is None or (newer.order == state.order and newer.shown == state.order):
            return  # marked, or another render of this same notice was (whichever landed last, Slack shows it)
        state = newer
    _quietly(run.store.forget_shown, where, key)
    raise ParentChangedError("the parent kept changing while it was rendered")


def _update_row(conversation: Conversation, notice: Notice, sender: Sender, run: _Run, now: datetime) -> None:
    """A group message whose row has news: the row shows the newest notice (_write_row), then the message is
    rendered."""
    written = _write_row(conversation, notice, run, destination_id(sender.destination))
    if written is not None and conversation.ts is not None:
        item, state = written
        _render_group(item, conversation.ts, sender, run, now, state, changed=notice.decision.resource.key)


def _write_row(
    conversation: Conversation, notice: Notice, run: _Run, where: str
) -> tuple[str, GroupState] | None:
    """The row of a group message with news shows the newest notice (and who asked for it), written over the
    version it was read at (another notifier may be updating another row): the group's item and state, None
    when nothing is kept of it."""
    item = group_item(where, conversation)
    if item is None or conversation.ts is None:
        return None
    fresh = notice.slim(run.settings.routing_tag_key)
    for _ in range(_VERSION_TRIES):
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


def _render_group(
    item: str,
    ts: str,
    sender: Sender,
    run: _Run,
    now: datetime,
    state: GroupState | None = None,
    *,
    changed: str | None = None,
) -> None:
    """A group message shows its latest rows, as _render_parent does for a single parent. The offers of the
    ``changed`` row (a resource key) are recorded again; the others' were when they were first shown."""
    state = state or run.store.group(item)
    if state is None or not state.stale:
        return
    for _ in range(_RENDERS):
        if state.token is None:
            state = run.store.begin_group_render(item)
            if state is None:
                return
        message = _group_message(state.body, sender, interactive=sender.interactive)
        try:
            sender.update(ts, message)
        except Exception:
            _quietly(run.store.forget_group_shown, item)
            raise
        offered = _buttons_of(message, changed) if changed is not None else message
        _offered(run.settings, sender.channel, ts, state.body.rows, offered, now)
        # Marked only if it is still the latest and no other render began or failed meanwhile.
        newer = run.store.mark_group_shown(item, state.version, state.token or 0)
        if newer is None or (newer.version == state.version and newer.shown == state.version):
            return  # marked, or another render of this same version was
        state, changed = newer, None  # rows changed meanwhile: all rendered, all offered
    _quietly(run.store.forget_group_shown, item)
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


def _quietly(write: Callable[..., None], *args: Any, **kwargs: Any) -> None:
    try:
        write(*args, **kwargs)
    except Exception as error:
        logger.warning("state not recorded", extra={"cause": type(error).__name__})


def _open(planned: Post, sender: Sender, run: _Run, now: datetime) -> bool:
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
                _wait_for_parent(run, sender, where, key)
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
        _group_message(grouped, sender, interactive=sender.interactive)
        if grouped is not None
        else build_message(rows[0], owner=sender.owner(rows[0]), interactive=sender.interactive)
    )
    try:
        ts = sender.send(message, key=post_key)
    except ApiOutcomeUnknown:
        for key in claimed:  # the next try looks for it first
            run.store.abandon(where, key, post_key, _grace(sender))
        raise
    except Exception:
        _release(run, where, post_key, claimed)
        raise
    assert ts is not None
    if recorded:
        _record_open(run, where, channel, post_key, ts, rows, grouped is not None, now)
    _offered(run.settings, channel, ts, rows, message, now)
    return False


def _release(run: _Run, where: str, post_key: str, claimed: dict[str, Claim]) -> None:
    for key, claim in claimed.items():
        run.store.release(where, key, post_key, claim.before)


def _wait_for_parent(run: _Run, sender: Sender, where: str, key: str) -> None:
    """Another notifier holds the claim: wait a little until its parent has a ts, or its claim is gone or
    abandoned (then plan again). Raises ParentBusyError if neither happens in time."""
    for pause in _PAUSES:
        if not run.deadline.allows(pause + sender.worst):
            break
        _pause(pause)
        held = run.store.get(where, key)
        if held is None or held.ts or not held.claim or (held.claim_until or 0.0) < wall_clock():
            return
    raise ParentBusyError("another notifier is posting this conversation's first message")


def _look_for_taken_over(
    planned: Post,
    sender: Sender,
    run: _Run,
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
    run: _Run,
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
    message = _group_message(state.body, sender, interactive=sender.interactive)
    _offered(run.settings, channel, ts, state.body.rows, message, now)


def _record_open(
    run: _Run,
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


def _offered(
    settings: Settings,
    channel: str | None,
    ts: str | None,
    notices: Sequence[Notice],
    message: dict[str, Any],
    now: datetime,
) -> None:
    """Record the buttons a message posted to a channel offers (interact/offers.py): a click is acted on only
    when costguard offered it there. A failed record costs that message's clicks (refused), never the message."""
    if not channel or not ts:
        return  # a webhook: no buttons
    try:
        record_offers(settings.state_table, channel, ts, notices, now, message=message)
    except Exception as error:
        logger.warning("offers not recorded", extra={"cause": type(error).__name__})


def _whole_app(error: Exception) -> bool:
    """Slack refused the app itself (its token, workspace or scopes, or its own rate limit past the retries)."""
    return bool(getattr(error, "whole_app", False))


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
    return _publish_ops(topic, OPS_SUBJECT, text)


OPS_APP_SUBJECT = "costguard: Slack refuses the costguard app"
OPS_TOLD_LIFETIME = timedelta(days=1)  # told again a day later if the refusal lasts
# What to fix, by Slack's answer.
_REINSTALL = (
    "Slack no longer accepts the app's bot token: the app was uninstalled, its token revoked, rotated or expired, "
    "or the workspace deactivated. Reinstall the app (api.slack.com/apps, OAuth & Permissions, Reinstall to "
    "Workspace) and put its new Bot User OAuth Token in the secret, with the rest of the secret as it was:\n"
    "  aws secretsmanager put-secret-value --secret-id {secret} --secret-string "
    '\'{{"bot_token": "xoxb-...", "signing_secret": "...", "default": "C...", "routes": {{...}}}}\'\n\n'
)
_SCOPE_FIX = (
    "The app lacks a scope it needs (README, Connecting Slack: chat:write, channels:history, groups:history, "
    "users:read, users:read.email, usergroups:read). Add it in the app's manifest, reinstall the app, and put the "
    "new bot token in the secret {secret}.\n\n"
)
_PARKED = (
    "Meanwhile no call is made with it: each notice is parked once in the failed-events queue. Once fixed, queue "
    "them again: costguard redrive --parked --stack <stack>. This is sent once a day at most while it lasts."
)
_RATE_FIX = (
    "Slack's Web API answers 'ratelimited' to the app (HTTP 200, ok: false) past costguard's own retries: the "
    "app is throttled across the workspace (another app or script sharing its token, or a flood of messages). "
    "Notices wait in the decisions queue and are retried; those that fail five receives wait in the dead-letter "
    "queue (costguard redrive --stack <stack>). This is sent once a day at most while it lasts."
)


def tell_ops_app_refused(problem: Exception, settings: Settings) -> bool:
    """Log, count and publish to the ops topic that Slack refuses the app itself (invalid_auth, token_revoked,
    account_inactive, missing_scope, its own rate limit...): once per refusal, across notifiers (a marker in the
    state table) and cold starts, for a day. Returns whether the ops topic took the message; never raises."""
    code = str(getattr(problem, "error", None) or type(problem).__name__)
    topic = os.environ.get(OPS_TOPIC_VARIABLE, "").strip()
    if (f"slack-app:{code}", topic) in _told:
        return False
    _told.add((f"slack-app:{code}", topic))
    logger.error(
        "Slack refuses the app", extra={"error": code, "problem": str(problem), "ops_topic": topic or None}
    )
    metrics.add_metric(name="SlackAppRefused", unit=MetricUnit.Count, value=1)
    if not topic or not _first_to_tell(settings, f"slack-app:{code}"):
        return False
    secret = settings.slack_secret_id
    if code in RATE_LIMITED_ERRORS:
        fix = _RATE_FIX
    else:
        fix = (_SCOPE_FIX if code in ("missing_scope", "no_permission") else _REINSTALL).format(secret=secret)
        fix += _PARKED
    text = f"costguard cannot post to Slack: Slack answers '{code}' ({problem}).\n\n{fix}"
    return _publish_ops(topic, OPS_APP_SUBJECT, text)


OPS_CHANNEL_SUBJECT = "costguard: Slack refuses a channel"
_CHANNEL_FIX = {
    "not_in_channel": "the app's bot is no longer a member of it (removed, or never invited)",
    "channel_not_found": "Slack knows no such channel (deleted, or the id in the secret's routes is wrong)",
    "is_archived": "the channel is archived",
    "channel_is_archived": "the channel is archived",
}


def tell_ops_channel_refused(channel: str, code: str, parked: int, settings: Settings) -> bool:
    """Publish to the ops topic, once a day per channel and answer across notifiers, that Slack refuses the app
    in one channel (the others are told as usual): which channel, Slack's answer, how many notices this batch
    parked, and the fix. Logged and counted each time; returns whether the ops topic took the message."""
    topic = os.environ.get(OPS_TOPIC_VARIABLE, "").strip()
    what = f"slack-channel:{channel}:{code}"
    logger.error(
        "Slack refuses a channel",
        extra={"channel": channel, "error": code, "parked": parked, "ops_topic": topic or None},
    )
    metrics.add_metric(name="SlackChannelRefused", unit=MetricUnit.Count, value=1)
    if (what, topic) in _told or not topic or not _first_to_tell(settings, what):
        return False
    _told.add((what, topic))
    why = _CHANNEL_FIX.get(code, f"Slack answers '{code}'")
    text = (
        f"costguard cannot post in Slack channel {channel}: Slack answers '{code}': {why}.\n\n"
        f"{parked} notice(s) routed there were parked in the failed-events queue by this delivery; each later one "
        "is parked the same way, and the other channels are told as usual.\n\n"
        f"Fix: invite the app to the channel (/invite @costguard in {channel}), or change the route that names it "
        f"in the Slack secret {settings.slack_secret_id} ('routes', or 'default'). Then queue the parked notices "
        "again: costguard redrive --parked --stack <stack>. This is sent once a day at most per channel while it "
        "lasts."
    )
    return _publish_ops(topic, OPS_CHANNEL_SUBJECT, text)


def _publish_ops(topic: str, subject: str, text: str) -> bool:
    """One message to the ops topic; whether it took it (a refusal is logged, never raised)."""
    try:
        clients.client("sns").publish(TopicArn=topic, Subject=subject, Message=text)
    except Exception as failed:
        logger.error(
            "ops topic refused the message", extra={"ops_topic": topic, "cause": type(failed).__name__}
        )
        return False
    return True


def _first_to_tell(settings: Settings, what: str) -> bool:
    """Whether this notifier is the first to tell ``what`` today (a conditional write in the state table); told
    anyway when the table cannot say."""
    now = clock_now()
    try:
        clients.client("dynamodb").put_item(
            TableName=settings.state_table,
            Item={
                "id": {"S": f"ops#{what}"},
                "expiration": {"N": str(int((now + OPS_TOLD_LIFETIME).timestamp()))},
            },
            ConditionExpression="attribute_not_exists(id) OR expiration < :now",
            ExpressionAttributeValues={":now": {"N": str(int(now.timestamp()))}},
        )
    except Exception as error:
        code = getattr(error, "response", {}).get("Error", {}).get("Code")
        return bool(code != "ConditionalCheckFailedException")
    return True
