"""What costguard offered in Slack: the buttons and menu options of each message it posted, by channel.

A click is acted on only when costguard offered exactly that element there: the same action, reason and
resource (so the same account and region), a duration from that menu, in a message costguard posted to that
channel. The notifier records an offer when it posts or re-renders a message with buttons; the actions worker
reads it back before anything else. An offer also keeps the resource's ``owner`` tag as it was when costguard
first told the finding: with ``SlackClickers=owner`` that recorded owner authorizes, never a tag written later.

One item per channel, resource and reason (``offer#<digest>``), written with one UpdateItem per element row:
the actions offered and the message timestamps are added to sets (never rewritten, so two notifiers at once
lose nothing), the owner is set only if absent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from costguard.aws import clients
from costguard.interact.authorize import OWNER_TAG_KEY
from costguard.notify.values import choice, offered_in
from costguard.permissions import needs

if TYPE_CHECKING:
    from costguard.notify.notice import Notice

PERMISSIONS = needs("dynamodb:UpdateItem")  # record_offers
READ_PERMISSIONS = needs("dynamodb:GetItem")  # DynamoOffers.offered
LIFETIME = timedelta(days=30)  # as long as a conversation: a button older than its thread is not honoured


@dataclass(frozen=True)
class Offer:
    """What costguard offered for one resource and reason in one channel."""

    channel: str
    resource_key: str
    reason: str
    choices: frozenset[str]  # choice(): "costguard:stop", "costguard:keep:24", ...
    messages: frozenset[str]  # the ts of each message that carried them
    owner: str | None  # the owner tag when the finding was first told here ("" recorded: it had none)

    def offers(self, action: str, hours: float | None) -> bool:
        return choice(action, hours) in self.choices


def offer_id(channel: str, resource_key: str, reason: str) -> str:
    digest = hashlib.sha256(f"{channel}|{resource_key}|{reason}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"offer#{digest[:40]}"


def record_offers(
    table: str,
    channel: str,
    ts: str,
    notices: Sequence[Notice],
    now: datetime,
    *,
    message: dict[str, Any] | None = None,
) -> None:
    """Record what a posted (or re-rendered) message offers. ``message`` is the Block Kit message as posted:
    its elements are what is recorded. Without it, each notice's own buttons are built (notify.message)."""
    if message is None:
        from costguard.notify.message import build_message

        message = {"blocks": [b for n in notices for b in build_message(n, interactive=True)["blocks"]]}
    owners = {n.decision.resource.key: n.decision.resource.tags.get(OWNER_TAG_KEY, "") for n in notices}
    dynamodb = clients.client("dynamodb")
    expiration = str(int((now + LIFETIME).timestamp()))
    for (resource_key, reason), choices in sorted(offered_in(message).items()):
        dynamodb.update_item(
            TableName=table,
            Key={"id": {"S": offer_id(channel, resource_key, reason)}},
            UpdateExpression=(
                "ADD choices :choices, messages :ts "
                "SET channel = :channel, resource_key = :key, reason = :reason, expiration = :expiration, "
                "#owner = if_not_exists(#owner, :owner)"
            ),
            ExpressionAttributeNames={"#owner": "owner"},
            ExpressionAttributeValues={
                ":choices": {"SS": sorted(choices)},
                ":ts": {"SS": [ts]},
                ":channel": {"S": channel},
                ":key": {"S": resource_key},
                ":reason": {"S": reason},
                ":expiration": {"N": expiration},
                ":owner": {"S": owners.get(resource_key, "")[:256]},
            },
        )


class OfferBook(Protocol):
    def offered(self, channel: str, resource_key: str, reason: str, now: datetime) -> Offer | None: ...


class DynamoOffers:
    def __init__(self, table: str) -> None:
        self.table = table

    def offered(self, channel: str, resource_key: str, reason: str, now: datetime) -> Offer | None:
        item = (
            clients.client("dynamodb")
            .get_item(
                TableName=self.table,
                Key={"id": {"S": offer_id(channel, resource_key, reason)}},
                ConsistentRead=True,
            )
            .get("Item")
        )
        if not item or int(item.get("expiration", {}).get("N", "0")) <= now.timestamp():
            return None
        return Offer(
            channel=channel,
            resource_key=resource_key,
            reason=reason,
            choices=frozenset(item.get("choices", {}).get("SS", [])),
            messages=frozenset(item.get("messages", {}).get("SS", [])),
            owner=item.get("owner", {}).get("S"),
        )


class MemoryOffers:
    """The same book in memory (unit tests)."""

    def __init__(self) -> None:
        self.items: dict[str, Offer] = {}

    def add(
        self, channel: str, ts: str, message: dict[str, Any], owners: dict[str, str] | None = None
    ) -> None:
        for (key, reason), choices in offered_in(message).items():
            known = self.items.get(offer_id(channel, key, reason))
            self.items[offer_id(channel, key, reason)] = Offer(
                channel=channel,
                resource_key=key,
                reason=reason,
                choices=frozenset(choices) | (known.choices if known else frozenset()),
                messages=frozenset({ts}) | (known.messages if known else frozenset()),
                owner=known.owner if known else (owners or {}).get(key, ""),
            )

    def offered(self, channel: str, resource_key: str, reason: str, now: datetime) -> Offer | None:
        return self.items.get(offer_id(channel, resource_key, reason))
