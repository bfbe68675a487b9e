"""What a click does, off the request path: keep, protect, stop now or mute, each recorded and told in the thread.

Every click must be one costguard offered (interact/offers.py: that action, reason, resource and duration, on a
message costguard posted to that channel); it is authorized against the owner recorded when the finding was
first told, done once however often it is delivered (an ``action#<click>`` record written before acting), and
told in the resource's thread through the decisions queue (a Notice naming the person). A refused click changes
nothing and is answered to the person alone (an ephemeral reply through the interaction's response_url).

Modes: keep, protect and mute only ever hold costguard back, so they work in both modes. "Stop now" is the
one that changes what runs: in notify mode costguard promises never to stop anything, so it is refused there
(the person is told so), as it is where the finding's reason is in notify (ReasonModes) or the resource outside
RemediateScope; in remediate mode it goes through the same policy as a sweep's stop (protected,
snoozed and stop-blocked resources are refused, only what costguard has marked may be stopped, the hourly cap
counts it), is judged again at the click with the sweep's own read (interact/rejudge.py: refused when the
resource works again, its reading fails, or its mark is for another reason now) and goes through the same
executor.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from costguard.act.executor import Outcome, Remediator, StopBlockerReader, StopLimiter, execute
from costguard.act.ledger_book import Ledger
from costguard.act.marks import MarkRecords, vouched
from costguard.aws import clients
from costguard.interact import resources, state
from costguard.interact.authorize import OWNER_TAG_KEY, Allowed, SlackDirectory, refusal
from costguard.interact.offers import Offer, OfferBook
from costguard.interact.rejudge import Rejudge
from costguard.model import Action, Decision, Finding, Resource
from costguard.notify.notice import Notice
from costguard.notify.queue import NoticeQueue
from costguard.notify.values import ActionId, ActionValue, parse_action_value
from costguard.observability import logger, metrics
from costguard.policy import (
    SNOOZE_TAG_KEY,
    Policy,
    decide_requested_stop,
    is_protected,
    snoozed_until,
    utc_text,
)
from costguard.pricing import PriceBook

# An ephemeral reply's text: Slack takes 40,000 characters; a reply is a sentence or two.
REPLY_LIMIT = 3000


class Mrkdwn(str):
    """A reply already in mrkdwn: costguard's own words (a user group's mention), every value from AWS or a user
    in it escaped. Any other reply text is escaped whole before it is sent (_reply)."""


class SlackResponder(SlackDirectory, Protocol):
    """What the actions ask of Slack (costguard.notify.slack_api.SlackApi has these)."""

    def respond(
        self, response_url: str, text: str, *, replace_original: bool = False, ephemeral: bool = True
    ) -> None: ...


class _Option(BaseModel):
    value: str


class _Element(BaseModel):
    model_config = ConfigDict(extra="ignore")

    action_id: str
    action_ts: str = ""
    value: str | None = None
    selected_option: _Option | None = None


class _Id(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, max_length=64)


class _Container(BaseModel):
    model_config = ConfigDict(extra="ignore")

    message_ts: str | None = Field(default=None, max_length=64)
    channel_id: str | None = Field(default=None, max_length=64)


class BlockActions(BaseModel):
    """The part of Slack's block_actions payload costguard reads."""

    model_config = ConfigDict(extra="ignore")

    type: str
    user: _Id
    channel: _Id | None = None
    container: _Container | None = None  # the message the element was on
    response_url: str | None = None
    actions: list[_Element] = Field(min_length=1)


@dataclass(frozen=True)
class Click:
    action: ActionId
    value: ActionValue
    raw_value: str
    user: str
    action_ts: str
    response_url: str | None
    channel: str | None = None  # where the message clicked on was
    message_ts: str | None = None  # and which message it was

    @property
    def id(self) -> str:
        return state.click_id(self.user, self.action, self.action_ts, self.raw_value)


class UnreadableClick(ValueError):
    """Not a click on one of costguard's elements, or not one Slack signed: logged with its message id,
    counted, and left to the interactions queue's dead-letter queue, where it is kept. Nothing is done."""


def click_of(payload: dict[str, Any]) -> Click:
    try:
        parsed = BlockActions.model_validate(payload)
    except ValidationError as error:
        raise UnreadableClick(f"not a block_actions payload ({error.error_count()} problems)") from None
    if parsed.type != "block_actions":
        raise UnreadableClick(f"interaction type {parsed.type[:40]!r} is not handled")
    element = parsed.actions[0]
    try:
        action = ActionId(element.action_id)
    except ValueError:
        raise UnreadableClick(f"action_id {element.action_id[:60]!r} is not costguard's") from None
    raw = element.selected_option.value if element.selected_option else element.value
    if raw is None:
        raise UnreadableClick(f"{action} carries no value")
    try:
        value = parse_action_value(raw, action=action)
    except ValueError as error:
        raise UnreadableClick(f"{action} value unreadable: {error}") from None
    container = parsed.container or _Container()
    return Click(
        action,
        value,
        raw,
        parsed.user.id,
        element.action_ts,
        parsed.response_url,
        channel=container.channel_id or (parsed.channel.id if parsed.channel else None),
        message_ts=container.message_ts,
    )


@dataclass(frozen=True)
class Interactions:
    """What carrying a click out needs, built once per process (functions/interaction_actions)."""

    table: str
    policy: Policy
    allowed: Allowed
    slack: SlackResponder
    queue: NoticeQueue
    remediator: Remediator
    prices: PriceBook
    offers: OfferBook
    rejudge: Rejudge | None = None  # None: Stop now is refused (it cannot be judged again at the click)
    limiter: StopLimiter | None = None
    # costguard's records of its live marks (act/marks.py): Stop now stops only what costguard itself marked
    records: MarkRecords | None = None
    # The savings ledger (act/ledger_book.py): a Stop now that stopped is written there, as a sweep's stop
    ledger: Ledger | None = None


@dataclass(frozen=True)
class Result:
    outcome: str  # done | refused | failed | duplicate | ignored (unreadable)
    detail: str

    def summary(self) -> dict[str, str]:
        return {"outcome": self.outcome, "detail": self.detail}


def carry_out(click: Click, deps: Interactions, now: datetime) -> Result:
    """The click, done once (a second delivery finds its record and does nothing)."""
    record = state.ActionRecord(deps.table, click.id)
    if not record.start(user=click.user, action=click.action, resource=click.value.resource.key, at=now):
        logger.info("click already handled", extra={"click": click.id, "action": click.action})
        return Result("duplicate", "this click was already handled")
    try:
        with clients.acting_in(click.value.resource.account):  # the resource's own account (member role)
            result = _act(click, deps, now)
    except Exception:
        record.forget()  # nothing was recorded as done: the redelivery tries again
        raise
    record.finish(result.outcome, result.detail)
    logger.info(
        "click handled",
        extra={
            "click": click.id,
            "user": click.user,
            "action": click.action,
            "resource": click.value.resource.key,
            **result.summary(),
        },
    )
    return result


def offer_refusal(click: Click, offer: Offer | None) -> str | None:
    """Why this click is not one costguard offered (None: it is)."""
    if offer is None or click.message_ts not in offer.messages:
        return "costguard did not post this button to this channel (or it has expired)"
    if not offer.offers(click.action, click.value.hours):
        return "costguard did not offer this choice on that message"
    return None


def _act(click: Click, deps: Interactions, now: datetime) -> Result:
    key = click.value.resource
    offer = (
        deps.offers.offered(click.channel, key.key, click.value.reason.value, now) if click.channel else None
    )
    if (not_offered := offer_refusal(click, offer)) is not None:
        logger.warning(
            "click not offered", extra={"click": click.id, "resource": key.key, "why": not_offered}
        )
        metrics.add_metric(name="InteractionsNotOffered", unit=MetricUnit.Count, value=1)
        return _refuse(
            click, deps, f"Not a choice costguard offered here: {not_offered}. Nothing was changed."
        )
    assert offer is not None
    try:
        # A mute changes nothing on the resource, which may be gone (a finished job): nothing to read.
        muting = click.action is ActionId.MUTE
        resource = resources.described(key) if muting else resources.read(key)
    except resources.NotActable as gone:
        return _refuse(click, deps, str(gone))
    # The owner that authorizes is the one recorded when costguard first told this finding here.
    recorded = offer.owner or ""
    why = refusal(deps.allowed, click.user, {OWNER_TAG_KEY: recorded} if recorded else {}, deps.slack)
    if why is not None:
        now_owner = resource.tags.get(OWNER_TAG_KEY, "")
        changed = (
            f" (the owner tag changed since costguard told this finding: {_escape(recorded or 'none')} then, "
            f"{_escape(now_owner or 'none')} now; only the owner recorded then counts)"
            if deps.allowed.owner and now_owner != recorded
            else ""
        )
        # ``why`` is costguard's own, and may mention the allowed user groups (<!subteam^S...>).
        return _refuse(click, deps, Mrkdwn(f"You may not do this: {why}{changed}. Nothing was changed."))
    if click.action is ActionId.KEEP:
        return _keep(click, resource, deps, now)
    if click.action is ActionId.PROTECT:
        return _protect(click, resource, deps, now)
    if click.action is ActionId.MUTE:
        return _mute(click, resource, deps, now)
    return _stop(click, resource, deps, now)


def _tagged(resource: Resource, key: str, value: str) -> Resource:
    """The resource as it is after the tag was written (the thread's message reads its tags)."""
    return resource.model_copy(update={"tags": {**resource.tags, key: value}})


def _hours(click: Click) -> timedelta:
    assert click.value.hours is not None  # parse_action_value requires hours for keep and mute
    return timedelta(hours=click.value.hours)


def _keep(click: Click, resource: Resource, deps: Interactions, now: datetime) -> Result:
    if is_protected(resource.tags, deps.policy.protect_tag_key):
        return _refuse(
            click,
            deps,
            f"{resource.display_name} is protected: costguard never stops it, no need to keep it.",
        )
    until = (now + _hours(click)).replace(second=0, microsecond=0)
    resources.set_tag(resource, SNOOZE_TAG_KEY, until.isoformat())
    note = f"kept running until {utc_text(until)}"
    kept = _tagged(resource, SNOOZE_TAG_KEY, until.isoformat())
    return _told(click, kept, deps, now, note, f"tagged {SNOOZE_TAG_KEY}={until.isoformat()}")


def _protect(click: Click, resource: Resource, deps: Interactions, now: datetime) -> Result:
    key = deps.policy.protect_tag_key
    if is_protected(resource.tags, key):
        return _refuse(click, deps, f"{resource.display_name} is already protected (tag {key}).")
    resources.set_tag(resource, key, "true")
    note = f"protected: costguard will never stop it (tag {key}=true)"
    return _told(click, _tagged(resource, key, "true"), deps, now, note, f"tagged {key}=true")


def _mute(click: Click, resource: Resource, deps: Interactions, now: datetime) -> Result:
    until = (now + _hours(click)).replace(second=0, microsecond=0)
    state.mute(deps.table, resource.key, click.value.reason, until, by=click.user)
    note = f"{click.value.reason} muted until {utc_text(until)}"
    return _told(click, resource, deps, now, note, f"muted until {until.isoformat()}")


def _stop(click: Click, resource: Resource, deps: Interactions, now: datetime) -> Result:
    if not deps.policy.may_act:
        return _refuse(
            click,
            deps,
            "costguard runs in notify mode: it never stops anything, and Stop now does nothing there. "
            "Stop it yourself, or switch costguard to remediate mode.",
        )
    if deps.policy.max_stops < 1:
        return _refuse(click, deps, "costguard's stop cap per run is 0: it stops nothing.")
    finding = _finding(click, resource, deps, now, "stop requested in Slack")
    if deps.records is not None:  # a mark tag costguard did not write starts no stop
        [finding] = vouched([finding], deps.records, now)
        resource = finding.resource
    decision = decide_requested_stop(finding, deps.policy, now)
    if decision.action is Action.STOP and isinstance(deps.remediator, StopBlockerReader):
        try:
            blocker = deps.remediator.stop_blocker(resource)
        except Exception:  # unreadable: EC2 still refuses a protected stop, as in the pipeline
            logger.warning("stop blocker unreadable: deciding without it", extra={"resource": resource.key})
            blocker = None
        if blocker is not None:
            blocked = finding.model_copy(
                update={"resource": resource.model_copy(update={"stop_blocker": blocker})}
            )
            decision = decide_requested_stop(blocked, deps.policy, now)
    if decision.action is not Action.STOP:
        return _refuse(click, deps, f"{resource.display_name}: {decision.note}. Nothing was changed.")
    why_not = (
        deps.rejudge.refusal(click.value.reason, resource, now)
        if deps.rejudge is not None
        else "costguard cannot judge it again at the click"
    )
    if why_not is not None:
        return _refuse(
            click, deps, f"{resource.display_name} was not stopped: {why_not}. Nothing was changed."
        )
    outcome = execute(decision, deps.remediator, deps.limiter, records=deps.records, ledger=deps.ledger)
    deps.queue.send(
        [
            Notice(
                decision=decision,
                outcome=outcome,
                protect_tag_key=deps.policy.protect_tag_key,
                actor=click.user,
            )
        ]
    )
    if not outcome.done:
        _reply(click, deps, f"{outcome.detail}.")
        return Result("failed", outcome.detail)
    return Result("done", outcome.detail)


def _finding(click: Click, resource: Resource, deps: Interactions, now: datetime, summary: str) -> Finding:
    price = deps.prices.hourly(resource.instance_type, resource.region)
    return Finding(
        reason=click.value.reason,
        resource=resource,
        summary=summary,  # who asked is the notice's actor, told as a mention
        observed_at=now,
        hourly_usd=price.usd_per_hour * resource.instance_count if price else None,
        remediable=True,
        event_id=f"slack:{click.id}",
    )


def _told(
    click: Click, resource: Resource, deps: Interactions, now: datetime, note: str, detail: str
) -> Result:
    """A done keep, protect or mute: told in the resource's thread, with who asked."""
    asked = {ActionId.KEEP: "Keep running", ActionId.PROTECT: "Protect", ActionId.MUTE: "Mute"}[click.action]
    finding = _finding(click, resource, deps, now, f"{asked} asked in Slack").model_copy(
        update={"report_note": note}
    )
    decision = Decision(
        action=Action.NOTIFY,
        reason=finding.reason,
        finding=finding,
        dry_run=deps.policy.dry_run_for(finding),
        note=note,
        decided_at=now,
    )
    notice = Notice(
        decision=decision,
        outcome=Outcome(done=True, detail=detail),
        protect_tag_key=deps.policy.protect_tag_key,
        actor=click.user,
    )
    deps.queue.send([notice])
    return Result("done", note)


def _refuse(click: Click, deps: Interactions, text: str) -> Result:
    _reply(click, deps, text)
    return Result("refused", text)


def _escape(text: str) -> str:
    # notify.message loads slack_sdk's Block Kit models: not at this function's cold start, only for a reply
    # (which loads slack_sdk's webhook client anyway).
    from costguard.notify.text import escape

    return escape(text)


def reply_text(text: str) -> str:
    """What a reply sends: the text escaped (a resource's name or tags, an AWS error, a tag value must not become
    a link or a mention) unless it is Mrkdwn already; clipped to REPLY_LIMIT either way."""
    from costguard.notify.text import clip

    return clip(text if isinstance(text, Mrkdwn) else _escape(text), REPLY_LIMIT)


def _reply(click: Click, deps: Interactions, text: str) -> None:
    if not click.response_url:
        return
    try:
        deps.slack.respond(click.response_url, reply_text(text), ephemeral=True)
    except Exception as error:  # the reply is a courtesy; the record and the log keep what happened
        logger.warning("Slack reply failed", extra={"click": click.id, "error": type(error).__name__})


def still_snoozed(resource: Resource, now: datetime) -> datetime | None:
    """When the resource's snooze ends, if it is snoozed (for messages that want to say so)."""
    return snoozed_until(resource.tags, now)
