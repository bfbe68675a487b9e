"""Replay event files through the stack's own routing, handlers and notifier, on the embedded AWS."""

from __future__ import annotations

import json
import re
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from costguard import clock
from costguard.events.budgets import ANOMALY_DETAIL_TYPE
from costguard.events.cloudwatch import ALARM_DETAIL_TYPE
from costguard.events.common import sns_message, to_datetime
from costguard.events.registry import (
    BUDGETS_TEXT,
    CLOUDWATCH_ALARM,
    COST_ANOMALY,
    sns_content_of,
)
from costguard.events.sns import is_bare_notification, lambda_delivery
from costguard.local.interactions import is_function_url_event, replay_interaction
from costguard.local.replay_result import ReplayResult as ReplayResult  # replay.ReplayResult, as before
from costguard.local.rules import Refusal, deployed_in, refusal
from costguard.local.stack import SEED_AHEAD, LocalStack
from costguard.local.template import Function, Route, Template, sns_topic_name

# How a route was found, as `costguard replay` reports it.
BY_RULE = "routed by rule"
BY_SCHEDULE = "routed by schedule"
BY_SUBSCRIPTION = "routed by subscription"
BY_CONTENT = "routed by content"
BY_OPTION = "routed by --function"
BARE_SNS_NOTE = (
    "a bare SNS notification (as SNS posts it to an HTTPS or SQS subscriber): replayed as the Lambda delivery of its "
    "topic (Records[0].Sns, EventSource aws:sns)"
)


class EventFileError(ValueError):
    """An event file that is not a JSON object (``content``: what it held instead, when it was JSON)."""

    def __init__(self, message: str, content: Any = None) -> None:
        super().__init__(message)
        self.content = content


def event_files(paths: Sequence[str | Path]) -> list[Path]:
    """The files to replay: each file given, and each ``*.json`` of a directory given, by name."""
    out: list[Path] = []
    for given in paths:
        path = Path(given)
        out += sorted(path.glob("*.json")) if path.is_dir() else [path]
    return out


def read_events(path: str | Path) -> list[tuple[str, dict[str, Any] | EventFileError]]:
    """A file's events, each with its label: one JSON object (labelled as the file), or a JSON array of them
    (``file[0]``, ``file[1]``...); what cannot be read is an EventFileError in place of the event."""
    try:
        return [(str(path), read_event(path))]
    except EventFileError as error:
        if not isinstance(error.content, list):
            return [(str(path), error)]
        items = error.content
    out: list[tuple[str, dict[str, Any] | EventFileError]] = []
    for n, item in enumerate(items):
        label = f"{path}[{n}]"
        kind = type(item).__name__
        out.append(
            (
                label,
                item if isinstance(item, dict) else EventFileError(f"{label}: not a JSON object ({kind})"),
            )
        )
    if not out:
        out.append((str(path), EventFileError(f"{path}: an empty JSON array: no event in it")))
    return out


def read_event(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if path.is_dir():
        raise EventFileError(f"{path}: a directory: give its files (replay reads every *.json of it)")
    try:
        event = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise EventFileError(f"{path}: cannot read: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise EventFileError(f"{path}: not UTF-8 text (byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise EventFileError(
            f"{path}: bad JSON at line {error.lineno} column {error.colno}: {error.msg}"
        ) from None
    if not isinstance(event, dict):
        raise EventFileError(f"{path}: an event must be a JSON object, not {type(event).__name__}", event)
    return event


def as_delivered(event: dict[str, Any]) -> dict[str, Any]:
    """The event as a function receives it: a bare SNS notification (``Type``, ``MessageId``, ``TopicArn``,
    ``Message``..., what an HTTPS endpoint or an SQS queue subscribed to a topic gets) wrapped in the ``Records``
    of a Lambda SNS delivery, so it is routed (by topic, else by content) and handled as that delivery."""
    return lambda_delivery(event) if is_bare_notification(event) else event


# -- routing ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Routing:
    """The functions an event goes to and how they were found (``how`` is what the replay prints)."""

    functions: list[str]
    how: str


def _probe(source: str, detail_type: str) -> dict[str, Any]:
    return {"version": "0", "id": "probe", "source": source, "detail-type": detail_type, "detail": {}}


def handling(template: Template, source: str, detail_type: str) -> list[str]:
    """The functions whose EventBridge rules take events of this source and detail-type.

    Only the rules' ``source`` and ``detail-type`` are matched (moto's pattern engine): the rest of a pattern
    (the account, say) is about where an event comes from, not what handles it."""
    found = []
    for function in template.functions().values():
        for route in function.routes:
            if route.source_type not in ("EventBridgeRule", "CloudWatchEvent") or not route.pattern:
                continue
            kind = {k: v for k, v in route.pattern.items() if k in ("source", "detail-type")}
            if replace(route, pattern=kind).matches(_probe(source, detail_type)):
                found.append(function.logical_id)
                break
    return found


_STACK_NAME = "[A-Za-z][-A-Za-z0-9]*"  # what CloudFormation allows in a stack name


def _topic_name_pattern(template: Template, route: Route) -> re.Pattern[str] | None:
    """The names a subscribed topic has in any deployment: ``${AWS::StackName}`` matches any stack's name,
    and a topic the template leaves unnamed is CloudFormation's ``<stack>-<LogicalId>-<suffix>``."""
    target = route.target
    if isinstance(target, dict) and "Ref" in target:
        props = template.resources.get(target["Ref"], {}).get("Properties", {})
        name = props.get("TopicName")
        if name is None:
            return re.compile(rf"{_STACK_NAME}-{re.escape(target['Ref'])}-[A-Za-z0-9]+")
    else:
        name = target
    if isinstance(name, dict) and "Fn::Sub" in name:
        name = name["Fn::Sub"]
    if not isinstance(name, str) or not name:
        return None
    if name.startswith("arn:"):
        name = name.rsplit(":", 1)[-1]  # a topic named by ARN
    pieces = name.split("${AWS::StackName}")
    if any("${" in piece for piece in pieces):
        return None  # another substitution: not a name this can match
    return re.compile(_STACK_NAME.join(re.escape(piece) for piece in pieces))


def subscribed(template: Template, event: dict[str, Any]) -> list[str]:
    """The functions subscribed to the topic an SNS delivery came from, in a stack of any name."""
    topic = sns_topic_name(event)
    if topic is None:
        return []
    found = []
    for function in template.functions().values():
        for route in function.routes:
            pattern = _topic_name_pattern(template, route) if route.source_type == "SNS" else None
            if pattern is not None and pattern.fullmatch(topic):
                found.append(function.logical_id)
                break
    return found


def budget_subscribers(template: Template) -> list[str]:
    """The functions subscribed to the topics the template's AWS Budgets notify (else to any topic)."""
    notified = {
        subscriber["Address"]["Ref"]
        for resource in template.resources.values()
        if resource.get("Type") == "AWS::Budgets::Budget"
        for notification in resource.get("Properties", {}).get("NotificationsWithSubscribers", [])
        for subscriber in notification.get("Subscribers", [])
        if subscriber.get("SubscriptionType") == "SNS"
        and isinstance(subscriber.get("Address"), dict)
        and "Ref" in subscriber["Address"]
    }
    sns_routes = [r for f in template.functions().values() for r in f.routes if r.source_type == "SNS"]
    chosen = [r for r in sns_routes if isinstance(r.target, dict) and r.target.get("Ref") in notified]
    return list(dict.fromkeys(r.function for r in (chosen or sns_routes)))


def by_content(template: Template, event: dict[str, Any]) -> Routing | None:
    """An SNS delivery no subscription takes, routed by what its message is."""
    content = sns_content_of(event)
    if content == BUDGETS_TEXT:
        functions = budget_subscribers(template)
    elif content == COST_ANOMALY:
        functions = handling(template, "aws.ce", ANOMALY_DETAIL_TYPE)  # the same function's SNS anomaly path
    elif content == CLOUDWATCH_ALARM:
        functions = handling(template, "aws.cloudwatch", ALARM_DETAIL_TYPE)
    else:
        return None
    return Routing(functions, f"{BY_CONTENT}: {content}") if functions else None


def route_event(
    template: Template,
    event: dict[str, Any],
    function: str | None = None,
    account: str | None = None,
    conditions: Mapping[str, bool] | None = None,
) -> Routing | None:
    """Where an event goes: ``function`` when given, else the template's rules (as deployed in ``account`` under
    ``conditions``) and subscriptions, else (an SNS delivery from a topic the template does not subscribe to) its
    content. None: nowhere."""
    if function is not None:
        return Routing([function], BY_OPTION)
    routes = template.route(event, account, conditions)
    if routes:
        kinds = {r.source_type for r in routes}
        how = (
            BY_SUBSCRIPTION
            if kinds == {"SNS"}
            else BY_SCHEDULE
            if kinds <= {"Schedule", "ScheduleV2"}
            else BY_RULE
        )
        return Routing(list(dict.fromkeys(r.function for r in routes)), how)
    if sns_message(event) is None:
        return None
    functions = subscribed(template, event)
    if functions:
        return Routing(functions, BY_SUBSCRIPTION)
    return by_content(template, event)


def resolve_function(template: Template, name: str) -> Function | None:
    """A function by its logical id (BudgetsFunction) or its code directory (budgets), any case."""
    wanted = name.strip().lower()
    for function in template.functions().values():
        if wanted in (function.logical_id.lower(), function.code_uri.name.lower()):
            return function
    return None


def _no_route(path: str | Path, event: dict[str, Any], why: Refusal | None = None) -> str:
    if sns_message(event) is not None:
        return (
            f"{path}: an SNS notification from topic {sns_topic_name(event)!r} that no subscription in "
            "template.yaml takes, and its message is none of Budgets text, a Cost Anomaly alert or a "
            "CloudWatch alarm; --function NAME routes it"
        )
    return (
        f"{path}: no rule in template.yaml matches this event "
        f"(source={event.get('source')!r}, detail-type={event.get('detail-type')!r})"
        f"{': ' + why.sentence() if why is not None else ''}; --function NAME routes it"
    )


# -- replaying -------------------------------------------------------------------------------------


def replay_event(
    stack: LocalStack,
    path: str | Path,
    function: str | None = None,
    event: dict[str, Any] | EventFileError | None = None,
) -> ReplayResult:
    """One event: read from ``path``, or ``event`` as read already (one of a file's JSON array)."""
    result = ReplayResult(event=str(path))
    try:
        if isinstance(event, EventFileError):
            raise event
        event = read_event(path) if event is None else event
    except EventFileError as error:
        result.error = str(error)
        return result
    if is_function_url_event(event):  # a Slack interaction on the Function URL, not an EventBridge event
        return replay_interaction(stack, result, event)
    if is_bare_notification(event):
        event = as_delivered(event)
        result.notes.append(BARE_SNS_NOTE)
    note = advance_clock(stack, event)
    if note:
        result.notes.append(note)
    # The stack as deployed in the event's own account (an organization world: its hub).
    account, conditions = deployed_in(stack.world, event)
    if account != stack.world.account:
        result.notes.append(
            f"played as the stack deployed in the event's account {account}; the world's resources stand in for "
            "that account's"
        )
    routing = route_event(stack.template, event, function, account, conditions)
    if routing is None:
        result.error = _no_route(path, event, refusal(stack.template, event, account, conditions))
        return result
    result.route = routing.how
    before = len(stack.sink.messages)
    # The notifier's batching window runs on the events' own times (an event older than the world's now
    # still arrived when it says): what it held is told once an event comes in after the window closed.
    arrived = event_time(event)
    stack.window_passes(arrived)
    try:
        for name in routing.functions:
            result.function = name
            outcome = stack.invoke(name, event).result or {}
            if not isinstance(outcome, dict):
                outcome = {"returned": outcome}
            if "items" in outcome and "sweep" in outcome:  # an organization's sweep fanned out: run its items
                outcome |= stack.run_work_items(name)
            if outcome.get("rejected"):
                result.error = f"{path}: rejected by {name}: {outcome.get('problem')}"
            result.findings.extend(outcome.get("findings", []))
            result.decisions.extend(outcome.get("decisions", []))
            result.output.update({k: v for k, v in outcome.items() if k not in ("findings", "decisions")})
    except Exception as error:  # what Lambda would retry, then keep: reported, and the next event still runs
        result.error = f"{path}: {result.function} raised {type(error).__name__}: {str(error)[:2000]}"
        result.trace = traceback.format_exc()
    # What the function queued (before it failed, too) is delivered, as it would be: at once, or when the
    # notifier's batching window closes (LocalStack.batch_window).
    stack.queued(arrived)
    result.slack = stack.sink.messages[before:]
    return result


def event_time(event: dict[str, Any]) -> datetime | None:
    event = as_delivered(event)
    try:
        if "time" not in event and isinstance(event.get("Records"), list):
            return to_datetime(event["Records"][0]["Sns"]["Timestamp"])  # an SNS delivery
        return to_datetime(event["time"])
    except (KeyError, IndexError, ValueError, TypeError):
        return None


def advance_clock(stack: LocalStack, event: dict[str, Any]) -> str | None:
    """The clock moves forward to an event's own time when that is later, as it would in a live account.

    Returns a note when that time is past the metric series the stack seeded (capped, stack.SEED_AHEAD)."""
    at = event_time(event)
    if at is None or at <= clock.now():
        return None
    clock.freeze(at)
    seeded = stack.until or stack.world.now
    if at > seeded:
        return (
            f"event time {at:%Y-%m-%dT%H:%M:%SZ} is past the metric series seeded (up to "
            f"{seeded:%Y-%m-%dT%H:%M:%SZ}; at most {SEED_AHEAD.days} days past the world's now): the handlers "
            "run at the event's time and find no datapoints after the series end"
        )
    return None


def latest_event_time(paths: list[str | Path]) -> datetime | None:
    """How far the world's metric series must run for these events (the stack caps it, see SEED_AHEAD)."""
    times = []
    for path in event_files(paths):
        for _, event in read_events(path):
            at = None if isinstance(event, EventFileError) else event_time(event)
            if at is not None:
                times.append(at)
    return max(times, default=None)


def replay_each(
    stack: LocalStack, paths: list[str | Path], function: str | None = None
) -> Iterator[ReplayResult]:
    """Each event's result as soon as it has run (a failed one does not stop the next): a directory's files, a
    file's JSON array, each in turn."""
    for path in event_files(paths):
        for label, event in read_events(path):
            yield replay_event(stack, label, function, event)


def replay(stack: LocalStack, paths: list[str | Path], function: str | None = None) -> list[ReplayResult]:
    return list(replay_each(stack, paths, function))
