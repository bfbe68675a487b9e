"""Slack interactions on the local stack: the app secret, the interactions queues, signed sample requests, and
the replay of a Function URL request through the endpoint, the actions function and the notifier.

The local Slack app signs with LOCAL_SIGNING_SECRET (the events/slack-interaction-*.json files are signed with
it). Locally, clicks are allowed to ``owner+usergroups:S0LOCALOPS`` (LOCAL_ALLOWED), and the sink knows one
member of that group, LOCAL_OPS_USER, so events/slack-interaction-unauthorized.json (from LOCAL_GUEST_USER)
is refused; the deployed default is ``channel`` (template.yaml).
"""

from __future__ import annotations

import base64
import json
import traceback
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, urlsplit

from costguard import clock
from costguard.interact.authorize import ALLOWED_VARIABLE
from costguard.interact.verify import Unauthorized, body_of, headers_of, sign
from costguard.local.sink import SlackSink

if TYPE_CHECKING:
    from costguard.local.replay_result import ReplayResult
    from costguard.local.stack import LocalStack
    from costguard.local.template import Template

LOCAL_SIGNING_SECRET = "localsigningsecret0123456789abcd"  # noqa: S105 - the local app's, documented
LOCAL_BOT_TOKEN = "xoxb-local-test-token"  # noqa: S105
LOCAL_CHANNEL = "C0LOCAL0001"
LOCAL_OPS_GROUP = "S0LOCALOPS"
LOCAL_OPS_USER = "U0LOCALOPS1"
LOCAL_GUEST_USER = "U0LOCALGUEST1"
LOCAL_ALLOWED = f"owner+usergroups:{LOCAL_OPS_GROUP}"
# The workspace's people the demo world's owner tags name (users.lookupByEmail): owners appear as mentions.
LOCAL_USERS = {
    "dana@example.com": "U0LOCALDANA",
    "li@example.com": "U0LOCALLI01",
    "sam@example.com": "U0LOCALSAM1",
}
# Where the sample events' response_urls point: the replay sends every response_url to the sink instead.
SAMPLE_RESPONSE_ORIGIN = "http://127.0.0.1:0"
QUEUES = {  # the dead-letter queue first: the interactions queue's redrive policy names it
    "InteractionsDeadLetterQueue": "costguard-interactions-dlq",
    "InteractionsQueue": "costguard-interactions",
}
BY_FUNCTION_URL = "routed by Function URL"


def app_secret(routes: dict[str, str]) -> dict[str, Any]:
    """The Slack secret's app form (channel routes only: webhook routes do not apply to an app)."""
    channels = {k: v for k, v in routes.items() if not v.startswith("http")}
    return {
        "bot_token": LOCAL_BOT_TOKEN,
        "signing_secret": LOCAL_SIGNING_SECRET,
        "default": LOCAL_CHANNEL,
        "routes": channels,
    }


def create_interaction_queues(sqs: Any, max_receive_count: int) -> dict[str, str]:
    urls: dict[str, str] = {}
    for logical, name in QUEUES.items():
        attributes = {"VisibilityTimeout": "0"}
        if logical == "InteractionsQueue":
            dlq = urls["InteractionsDeadLetterQueue"]
            arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
                "QueueArn"
            ]
            attributes["RedrivePolicy"] = json.dumps(
                {"deadLetterTargetArn": arn, "maxReceiveCount": max_receive_count}
            )
        urls[logical] = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    return urls


def interaction_environment(urls: dict[str, str], sink: SlackSink) -> dict[str, str]:
    """The two functions' own variables (template.yaml), and the sink as the Slack Web API."""
    # Imported here: the endpoint module brings powertools' metrics, which must not exist before the stack
    # has set their environment.
    from costguard.interact.endpoint import QUEUE_VARIABLE

    sink.usergroups.setdefault(LOCAL_OPS_GROUP, [LOCAL_OPS_USER])
    for email, user in LOCAL_USERS.items():
        sink.users.setdefault(email, user)
    return {
        QUEUE_VARIABLE: urls["InteractionsQueue"],
        ALLOWED_VARIABLE: LOCAL_ALLOWED,
        "COSTGUARD_SLACK_API_URL": sink.api_url,
    }


# -- requests --------------------------------------------------------------------------------------


def block_actions(
    action_id: str,
    value: str,
    *,
    user: str = LOCAL_OPS_USER,
    action_ts: str = "1795176300.000100",
    response_url: str = f"{SAMPLE_RESPONSE_ORIGIN}/response/local",
    select: bool | None = None,
    channel: str = LOCAL_CHANNEL,
    message_ts: str = "1795176000.000100",
) -> dict[str, Any]:
    """A block_actions payload as Slack sends it for a click on one of costguard's elements (of the message
    ``message_ts`` in ``channel``)."""
    select = action_id in ("costguard:keep", "costguard:mute") if select is None else select
    element: dict[str, Any] = {
        "action_id": action_id,
        "block_id": "costguard-actions",
        "action_ts": action_ts,
    }
    if select:
        element |= {"type": "static_select", "selected_option": {"value": value}}
    else:
        element |= {"type": "button", "value": value}
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "team_id": "T0LOCAL01"},
        "team": {"id": "T0LOCAL01", "domain": "costguard-local"},
        "channel": {"id": channel, "name": "costguard"},
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel},
        "response_url": response_url,
        "actions": [element],
    }


@dataclass(frozen=True)
class Offered:
    """One element costguard posted: where (channel, message ts), and the value a click on it carries."""

    channel: str
    ts: str
    action_id: str
    value: str


def offered_elements(sink: SlackSink) -> list[Offered]:
    """Every button and menu option of costguard's messages as they stand now (after their updates), in the
    order they were posted: what a person in Slack could click."""
    found: list[Offered] = []
    for posted in list(sink.messages):
        channel, ts = str(posted.get("channel", "")), str(posted.get("ts", ""))
        if not channel or not ts:
            continue
        for block in sink.current(channel, ts).get("blocks") or []:
            if not isinstance(block, dict) or block.get("type") != "actions":
                continue
            for element in block.get("elements") or []:
                action = str(element.get("action_id", ""))
                values = [o["value"] for o in element.get("options") or [] if "value" in o]
                values += [element["value"]] if "value" in element else []
                found += [Offered(channel, ts, action, v) for v in values]
    return found


def click_on(
    sink: SlackSink, action_id: str, resource_id: str, *, hours: int | None = None, reason: str | None = None
) -> Offered:
    """The latest element of that action for that resource (its menu option of ``hours``; of ``reason``) that
    costguard posted: a click a person could make. AssertionError when none was offered."""
    for offered in reversed(offered_elements(sink)):
        parts = offered.value.split("|")
        if offered.action_id != action_id or not parts[-1].endswith(f"/{resource_id}"):
            continue
        if hours is not None and parts[0] != str(hours):
            continue
        if reason is not None and reason not in parts:
            continue
        return offered
    raise AssertionError(f"no {action_id} on {resource_id} was offered in any message")


def form_body(payload: dict[str, Any]) -> str:
    return "payload=" + quote(json.dumps(payload, separators=(",", ":")), safe="")


def signed_request(
    payload: dict[str, Any],
    *,
    signed_at: datetime,
    arrived: datetime | None = None,
    secret: str = LOCAL_SIGNING_SECRET,
    signature: str | None = None,
    base64_body: bool = False,
    retry_num: int | None = None,
    request_id: str = "local-request",
) -> dict[str, Any]:
    """A Lambda Function URL event (payload version 2.0) carrying a Slack-signed interaction."""
    body = form_body(payload)
    stamp = int(signed_at.timestamp())
    arrived = arrived or signed_at
    headers = {
        "content-type": "application/x-www-form-urlencoded",
        "user-agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
        "x-slack-request-timestamp": str(stamp),
        "x-slack-signature": signature or sign(body, stamp, secret),
    }
    if retry_num is not None:
        headers |= {"x-slack-retry-num": str(retry_num), "x-slack-retry-reason": "http_timeout"}
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/",
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "costguardlocalurl",
            "domainName": "costguardlocalurl.lambda-url.us-east-1.on.aws",
            "domainPrefix": "costguardlocalurl",
            "http": {
                "method": "POST",
                "path": "/",
                "protocol": "HTTP/1.1",
                "sourceIp": "127.0.0.1",
                "userAgent": "Slackbot 1.0 (+https://api.slack.com/robots)",
            },
            "requestId": request_id,
            "routeKey": "$default",
            "stage": "$default",
            "time": arrived.astimezone(UTC).strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(arrived.timestamp() * 1000),
        },
        "body": base64.b64encode(body.encode()).decode() if base64_body else body,
        "isBase64Encoded": base64_body,
    }


# -- routing and replay ------------------------------------------------------------------------------


def is_function_url_event(event: dict[str, Any]) -> bool:
    """A Lambda Function URL request (payload 2.0), recognised by ``requestContext.http``."""
    context = event.get("requestContext")
    return isinstance(context, dict) and isinstance(context.get("http"), dict)


def function_url_functions(template: Template) -> list[str]:
    """The functions the template gives a Function URL."""
    return [
        logical_id
        for logical_id, resource in template.resources.items()
        if resource.get("Type") == "AWS::Serverless::Function"
        and (resource.get("Properties") or {}).get("FunctionUrlConfig")
    ]


def arrival_time(event: dict[str, Any]) -> datetime | None:
    """When the request reached the Function URL (``requestContext.timeEpoch``, milliseconds)."""
    epoch = (event.get("requestContext") or {}).get("timeEpoch")
    return datetime.fromtimestamp(epoch / 1000, UTC) if isinstance(epoch, int | float) else None


def to_sink(event: dict[str, Any], sink: SlackSink, at: datetime) -> dict[str, Any]:
    """The request with its response_url pointed at the sink (nothing is ever sent to a real Slack), and a
    click on an element the stack posted aimed at the message that carries it here (a recorded click names its
    own workspace's channel and message; the same element posted by the local stack is in the sink). A request
    whose signature held is signed again over the new body with its own timestamp, so it still holds; a bad
    signature stays bad. A click on an element the stack never posted keeps its own message: refused. A body
    that cannot be read (``unreadable_body``) is left as it is, for the endpoint to refuse."""
    headers = headers_of(event)
    try:
        body = body_of(event).decode()
        payload = json.loads(parse_qs(body, strict_parsing=True)["payload"][0])
    except (Unauthorized, ValueError, KeyError, IndexError):
        return event
    url = payload.get("response_url") if isinstance(payload, dict) else None
    if not isinstance(url, str):
        return event
    payload["response_url"] = sink.response_url(urlsplit(url).path.rsplit("/", 1)[-1] or "local")
    _aim_at_posted(payload, sink)
    stamp = headers.get("x-slack-request-timestamp", "")
    held = stamp.isdigit() and headers.get("x-slack-signature") == sign(
        body, int(stamp), LOCAL_SIGNING_SECRET
    )
    new_body = form_body(payload)
    new_headers = dict(event.get("headers") or {})
    if held:
        for name in list(new_headers):
            if name.lower() == "x-slack-signature":
                new_headers[name] = sign(new_body, int(stamp), LOCAL_SIGNING_SECRET)
    encoded = base64.b64encode(new_body.encode()).decode() if event.get("isBase64Encoded") else new_body
    return {**event, "headers": new_headers, "body": encoded}


def _aim_at_posted(payload: dict[str, Any], sink: SlackSink) -> None:
    actions = payload.get("actions")
    element = actions[0] if isinstance(actions, list) and actions and isinstance(actions[0], dict) else {}
    option = element.get("selected_option")
    value = option.get("value") if isinstance(option, dict) else element.get("value")
    for offered in reversed(offered_elements(sink)):
        if offered.action_id == element.get("action_id") and offered.value == value:
            payload["channel"] = {**(payload.get("channel") or {}), "id": offered.channel}
            payload["container"] = {
                **(payload.get("container") or {}),
                "channel_id": offered.channel,
                "message_ts": offered.ts,
            }
            return


_JSON_KINDS: dict[type, str] = {
    bool: "boolean",
    int: "number",
    float: "number",
    dict: "object",
    list: "array",
}


def unreadable_body(event: dict[str, Any]) -> str | None:
    """Why the endpoint cannot read the request's body at all (not text; not base64 though it says so), else
    None: such a request is refused before any signature is checked."""
    body = event.get("body")
    if body is not None and not isinstance(body, str):
        return f"the body is not text but a JSON {_JSON_KINDS.get(type(body), type(body).__name__)}"
    try:
        body_of(event)
    except Unauthorized as refused:
        return refused.why
    return None


def enable_slack_app(stack: LocalStack) -> None:
    """Turn a running local stack into one with a Slack app (what LocalStack(slack_app=True) starts with): the
    interactions queues, the app form of the Slack secret and the functions' variables. A replay of
    interaction requests (the demo's, `costguard replay events/slack-interaction-*.json`) needs them."""
    import os

    import aws_lambda_powertools.utilities.parameters.base as parameters_base

    from costguard.aws import clients
    from costguard.local.stack import MAX_RECEIVE_COUNT

    stack.urls.update(create_interaction_queues(clients.client("sqs"), MAX_RECEIVE_COUNT))
    clients.client("secretsmanager").put_secret_value(
        SecretId=stack.urls["SlackWebhookSecret"], SecretString=json.dumps(app_secret(stack.routes))
    )
    parameters_base.DEFAULT_PROVIDERS.clear()  # type: ignore[attr-defined]  # the secret is read afresh
    environment = interaction_environment(stack.urls, stack.sink)
    os.environ.update({k: v for k, v in environment.items() if k not in stack.overrides})
    stack.slack_app = True


def replay_interaction(stack: LocalStack, result: ReplayResult, event: dict[str, Any]) -> ReplayResult:
    """The request through the endpoint at its arrival time, then the interactions queue's consumer and the
    notifier, as Lambda would run them. A request older than the stack's clock runs at its own time (the
    clock is set back for it, then restored): a replay verifies a recorded request as of when it came."""
    functions = function_url_functions(stack.template)
    if len(functions) != 1:
        result.error = (
            f"{result.event}: a Function URL request, and the template has {len(functions)} Function URLs"
        )
        return result
    result.function, result.route = functions[0], BY_FUNCTION_URL
    if not stack.slack_app:
        enable_slack_app(stack)
        result.notes.append(
            "the local stack now plays a Slack app (bot token, signing secret) for interactions"
        )
    before, now = len(stack.sink.messages), clock.now()
    arrived = arrival_time(event) or now
    clock.freeze(arrived)
    if arrived < now:
        result.notes.append(f"run at its arrival time {arrived:%Y-%m-%dT%H:%M:%SZ}, before the stack's clock")
    responses, ephemerals = len(stack.sink.responses), len(stack.sink.ephemerals)
    unreadable = unreadable_body(event)
    try:
        stack.window_passes(arrived)
        answer = stack.invoke(functions[0], to_sink(event, stack.sink, arrived)).result or {}
        result.output["http"] = {"statusCode": answer.get("statusCode"), "body": answer.get("body")}
        if unreadable:
            status = answer.get("statusCode")
            result.error = f"{result.event}: rejected by {functions[0]} (HTTP {status}): {unreadable}"
        for invocation in stack.drain("InteractionsQueue"):
            failures = (invocation.result or {}).get("batchItemFailures") or (invocation.result or {}).get(
                "error"
            )
            if failures:
                result.error = f"{result.event}: the interaction actions failed: {str(failures)[:500]}"
        stack.queued(
            arrived
        )  # told through the notifier, as the stack tells everything (its batching window)
    except Exception as error:  # what Lambda would answer 502 for: reported, and the next event still runs
        result.error = f"{result.event}: {functions[0]} raised {type(error).__name__}: {str(error)[:2000]}"
        result.trace = traceback.format_exc()
    finally:
        if arrived < now:
            clock.freeze(now)
    result.output["responses"] = stack.sink.responses[responses:]
    result.output["ephemerals"] = stack.sink.ephemerals[ephemerals:]
    result.slack = stack.sink.messages[before:]
    return result
