"""One batch's delivery run: its store, settings and deadline, what failed, and the waits and leases shared by
every post (a claim or lease surely abandoned once the invocation is over; another notifier waited for)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from costguard.clock import wall as wall_clock
from costguard.notify.conversation import (
    DynamoConversationStore,
    Lease,
)
from costguard.notify.delivery import (
    Deadline,
    DeliveryError,
)
from costguard.notify.notice import Notice
from costguard.notify.ops_topic import tell_ops_app_refused, whole_app
from costguard.notify.sender import WEBHOOK_TIMEOUT_SECONDS, Sender
from costguard.observability import logger
from costguard.settings import Settings

# A claim or lease taken now is surely abandoned once this invocation is over: its remaining time, at most
# Lambda's longest run, and this margin.
CLAIM_MARGIN_SECONDS = 5.0


_LONGEST_RUN_SECONDS = 900.0


# A post whose answer was lost is handed on: another notifier may take it over (looking for it first) after this
# many times the call's timeout, once a late answer can no longer be on its way.
_GRACE_TIMEOUTS = 2


VERSION_TRIES = 8  # a group row written again over the version another notifier just wrote


# Members handed back by a lost claim are planned again (as replies in the winner's thread) at most this often.
REPLANS = 4


# Waiting for another notifier's claim or lease: pauses between looks (about 5 s in all).
_PAUSES = (0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.5)


RENDERS = 3  # a parent rendered again while newer news keeps arriving


# Slack takes about one chat.postMessage a second per channel (replies included), whoever posts: a post still
# refused with a 429 after the client's retries (the other notifier posting there too) waits its turn again, up
# to this many times while the invocation has time, instead of going back to the queue, whose visibility timeout
# would hold it (a stop among them) for many minutes.
LIMITED_TURNS = 10


CHANNEL_INTERVAL_SECONDS = 1.0


def _pause(seconds: float) -> None:
    """Wait for another notifier (not time.sleep: the clients' back-off is patched in tests, this wait is real)."""
    threading.Event().wait(seconds)


class RecordOffers(Protocol):
    """interact/offers.record_offers: what a posted message offers, recorded for its clicks."""

    def __call__(
        self,
        table: str,
        channel: str,
        ts: str,
        notices: Sequence[Notice],
        now: datetime,
        *,
        message: dict[str, Any] | None = None,
    ) -> None: ...


class ParentBusyError(DeliveryError):
    """Another notifier is posting this conversation's first message: the notice is retried (then replies)."""


class PostBusyError(DeliveryError):
    """Another notifier is posting this very notice: it is retried, and then found posted."""


class ParentChangedError(DeliveryError):
    """The parent kept changing while it was rendered: rendered again with the next notice or redelivery."""


@dataclass
class Run:
    """One batch's delivery: its store and settings, the time it has, what failed, and whether Slack refused the
    app itself (then nothing more is tried: every call would meet the same answer)."""

    store: DynamoConversationStore
    settings: Settings
    deadline: Deadline
    failures: dict[str, Exception] = field(default_factory=dict)
    halted: Exception | None = None
    not_started: int = 0
    # Records the buttons a posted message offers (interact/offers.record_offers, given by the flow: the
    # interactions room stands above this one); None records nothing.
    record_offers: RecordOffers | None = None

    def fail(self, members: Iterable[str], error: Exception) -> None:
        for mid in members:
            self.failures[mid] = error
        if self.halted is None and whole_app(error):
            self.halted = error
            tell_ops_app_refused(error, self.settings)

    def until(self) -> float:
        """When a claim or lease taken now is surely abandoned (epoch seconds)."""
        return wall_clock() + min(self.deadline.left(), _LONGEST_RUN_SECONDS) + CLAIM_MARGIN_SECONDS


def grace(sender: Sender) -> float:
    return _GRACE_TIMEOUTS * float(sender.api.timeout if sender.api is not None else WEBHOOK_TIMEOUT_SECONDS)


def quietly(write: Callable[..., None], *args: Any, **kwargs: Any) -> None:
    try:
        write(*args, **kwargs)
    except Exception as error:
        logger.warning("state not recorded", extra={"cause": type(error).__name__})


def take_lease(run: Run, sender: Sender, where: str, key: str, now: datetime) -> Lease | None:
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


def wait_for_parent(run: Run, sender: Sender, where: str, key: str) -> None:
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


def record_offered(
    run: Run,
    channel: str | None,
    ts: str | None,
    notices: Sequence[Notice],
    message: dict[str, Any],
    now: datetime,
) -> None:
    """Record the buttons a message posted to a channel offers (interact/offers.py): a click is acted on only
    when costguard offered it there. A failed record costs that message's clicks (refused), never the message."""
    if not channel or not ts or run.record_offers is None:
        return  # a webhook: no buttons
    try:
        run.record_offers(run.settings.state_table, channel, ts, notices, now, message=message)
    except Exception as error:
        logger.warning("offers not recorded", extra={"cause": type(error).__name__})
