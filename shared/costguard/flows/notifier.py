"""The notifier: queued notices become Slack messages on the right channels, one conversation per episode.

What one invocation receives (an SQS batch, gathered over the event source's batching window) is told per
destination (channel or webhook): a notice whose conversation is open is a reply in its thread, and its parent is
updated to the current state (Slack app); the rest open conversations, each its own message, or group messages,
one per resource kind, when there are more than GROUP_ABOVE (and always for the daily digest); a budget alert or
a cost anomaly is always its own message. More than GROUP_ABOVE replies at once are one group of news per kind
instead (each conversation records its notice, each parent shows it). A notice already told in its
conversation (a redelivery, a redrive) is not told again. With a webhook there are no threads: what follows is
its own message, grouped the same way.

This flow takes the batch, reads the routes, sorts the notices by destination (stops first) and hands each
destination's rounds to Slack delivery's machinery in notify/: planning.py plans, rounds.py tells a round,
opening.py and posts.py post and record, run.py holds the batch's deadline, failures and waits, ops_topic.py
tells the ops topic. It returns what was not told, for the handler to report.

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
  invocation has time (notify/rounds.py), rather than going back to the queue for its visibility timeout.
- Slack refusing the app itself (invalid_auth, token_revoked, account_inactive, missing_scope..., or its own
  ``ratelimited`` past the retries) stops the batch: the rest is parked (or, rate limited, retried) without
  another call, and the refusal is told once on the ops topic (``notify.ops_topic.tell_ops_app_refused``) with what to fix.

A webhook secret nobody filled in (created empty by the stack, or blank) cannot be told through Slack: the first
notice that meets it, once per cold start, publishes one message to the ops topic (the ``OpsNotificationsTopic``
the stack creates, subscribe an email to it), logs ``Slack webhook secret not filled`` and counts
``SlackSecretNotFilled``. The notice itself goes on as before: retried while the secret has no value, parked
when it is blank.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from costguard.interact.offers import PERMISSIONS as OFFER_PERMISSIONS
from costguard.interact.offers import record_offers
from costguard.notify.conversation import PERMISSIONS as CONVERSATION_PERMISSIONS
from costguard.notify.conversation import DynamoConversationStore
from costguard.notify.delivery import (
    SECRET_PERMISSIONS,
    UNBOUNDED,
    UNFILLED_SECRET_ERRORS,
    Deadline,
    load_routes,
    within,
)
from costguard.notify.notice import AnyNotice
from costguard.notify.ops_topic import OPS_PERMISSIONS, tell_ops_once
from costguard.notify.planning import place_of, tags_of
from costguard.notify.rounds import deliver_round, rounds_of, stops_of
from costguard.notify.routing import SlackRoutes
from costguard.notify.run import Run
from costguard.notify.sender import Sender
from costguard.observability import logger, tracer
from costguard.settings import Settings

if TYPE_CHECKING:
    from costguard.notify.slack_api import SlackApi


DELIVER_PERMISSIONS = (
    SECRET_PERMISSIONS | OPS_PERMISSIONS | CONVERSATION_PERMISSIONS | OFFER_PERMISSIONS
)  # deliver, deliver_batch


def routes_for(settings: Settings) -> SlackRoutes:
    """The Slack secret's routes. A secret nobody filled in is told once on the ops topic, then raised: retried
    while it has no value (UnsetSecretError), parked when it is blank (EmptySecretError)."""
    try:
        return load_routes(settings.slack_secret_id)
    except UNFILLED_SECRET_ERRORS as unfilled:
        tell_ops_once(unfilled, settings)
        raise


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
    run = Run(
        store or DynamoConversationStore(settings.state_table),
        settings,
        deadline or UNBOUNDED,
        record_offers=record_offers,
    )
    api = _api_for(routes)
    by_destination: dict[str, list[tuple[str, AnyNotice]]] = {}
    for mid, notice in items:
        destination = routes.channel_for(tags_of(notice), settings.routing_tag_key, *place_of(notice))
        by_destination.setdefault(destination, []).append((mid, notice))
    with within(run.deadline):
        for stops in (True, False):
            for destination, members in by_destination.items():
                sender = Sender(destination, api, buttons=settings.slack_buttons)
                first = stops_of(members)
                part = [m for m in members if (id(m[1]) in first) is stops]
                # A webhook has no thread to continue: its batch is told at once, grouped as it comes.
                for batch in rounds_of(part) if sender.threads else [part] if part else []:
                    deliver_round(batch, sender, run)
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
