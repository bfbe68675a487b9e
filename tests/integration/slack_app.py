"""A Slack app on moto and the local sink, without the rest of the stack: what the notifier's deliver_batch needs
(the state table, the Slack secret in its app form, the Web API's base URL), its notices, and a hook that makes
two notifiers decide on the same state, as two invocations at once do."""

from __future__ import annotations

import json
import os
import re
import threading
import urllib.error
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime, timedelta
from typing import Any

from costguard.act.executor import Outcome
from costguard.aws import clients
from costguard.local.interactions import LOCAL_SIGNING_SECRET
from costguard.local.sink import LOCAL_BOT_TOKEN, STALL_HEADER, SlackSink
from costguard.model import Action, Decision, Finding, Reason, Resource, ResourceKind
from costguard.notify.conversation import Conversation, DynamoConversationStore
from costguard.notify.notice import Notice
from costguard.settings import Settings

# How long the client's socket waits for an answer when its stalls are played: far past any call a loaded machine
# makes, so only a stall the sink tells is a timeout.
SOCKET_TIMEOUT_SECONDS = 30.0


def playing_stalls(
    monkeypatch: Any, sink: SlackSink, waited: Callable[[float], object] = lambda seconds: None
) -> None:
    """Stalls on the played clock: the sink tells a stall at once, and the client meets its timeout there, as it
    would have after waiting its timeout (``waited(timeout)``: the test's clock moves on by as much). Every other
    call's answer is waited for as long as a loaded machine needs, so a slow answer is never a lost one."""
    from slack_sdk.web.base_client import BaseClient as SlackClient

    sink.stall_at_once = True
    request = SlackClient._perform_urllib_http_request_internal

    def call(self: SlackClient, url: str, req: Any) -> dict[str, Any]:
        timeout = self.timeout
        self.timeout = int(SOCKET_TIMEOUT_SECONDS)
        try:
            return request(self, url, req)
        except urllib.error.HTTPError as error:
            if error.headers.get(STALL_HEADER):
                waited(timeout)
                raise TimeoutError("The read operation timed out") from None
            raise
        finally:
            self.timeout = timeout

    monkeypatch.setattr(SlackClient, "_perform_urllib_http_request_internal", call)


def playing_wall(monkeypatch: Any, at: float = 1_800_000_000.0) -> list[float]:
    """The wall clock that claims and leases are judged by (costguard.clock.wall), played: a one-item list the
    test moves on."""
    from costguard import clock

    wall = [at]
    monkeypatch.setattr(clock, "_played_wall", lambda: wall[0])
    return wall


CHANNEL = "C0APP000001"
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
TABLE = "state"
_RESOURCE = re.compile(r"trainer-(\d+)\b")


@contextmanager
def atomic_dynamodb() -> Iterator[None]:
    """moto's DynamoDB and SQS answering one request at a time, as DynamoDB applies each (conditional) write
    atomically and SQS hands a message to one receiver: moto checks a condition and writes, or picks a message
    and removes it, without a lock, so two threads could both pass (or fail on a list both changed)."""
    from moto.dynamodb.responses import DynamoHandler
    from moto.sqs.responses import SQSResponse

    lock = threading.RLock()
    originals = {handler: handler.call_action for handler in (DynamoHandler, SQSResponse)}

    def serialized(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def call_action(self: Any) -> Any:
            with lock:
                return original(self)

        return call_action

    for handler, original in originals.items():
        handler.call_action = serialized(original)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for handler, original in originals.items():
            handler.call_action = original  # type: ignore[method-assign]


@contextmanager
def slack_app(sink: SlackSink, **overrides: Any) -> Iterator[Settings]:
    """The settings of a notifier posting to CHANNEL as a Slack app (moto must be running)."""
    import aws_lambda_powertools.utilities.parameters.base as parameters_base

    from costguard.notify.slack_api import API_URL_VARIABLE, reset_cache

    clients.client("dynamodb").create_table(
        TableName=TABLE,
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    secret = json.dumps(
        {"bot_token": LOCAL_BOT_TOKEN, "signing_secret": LOCAL_SIGNING_SECRET, "default": CHANNEL}
    )
    arn = clients.client("secretsmanager").create_secret(Name="costguard/slack", SecretString=secret)["ARN"]
    parameters_base.DEFAULT_PROVIDERS.clear()  # type: ignore[attr-defined]
    reset_cache()
    saved = os.environ.get(API_URL_VARIABLE)
    os.environ[API_URL_VARIABLE] = sink.api_url
    try:
        yield Settings(state_table=TABLE, slack_secret_id=arn, **overrides)
    finally:
        if saved is None:
            os.environ.pop(API_URL_VARIABLE, None)
        else:
            os.environ[API_URL_VARIABLE] = saved
        reset_cache()
        parameters_base.DEFAULT_PROVIDERS.clear()  # type: ignore[attr-defined]


def notice(resource: int, step: int = 0) -> Notice:
    """News ``step`` about instance ``trainer-<resource>``: one conversation per resource, the steps in the order
    they were decided. A row and a message both show ``step <n>`` (the decision's note)."""
    subject = Resource(
        kind=ResourceKind.EC2_INSTANCE,
        id=f"i-{resource:017x}",
        account="123456789012",
        region="us-east-1",
        name=f"trainer-{resource}",
        instance_type="p4d.24xlarge",
        tags={"team": "ml"},
    )
    at = NOW + timedelta(minutes=step)
    finding = Finding(
        reason=Reason.GPU_IDLE,
        resource=subject,
        summary=f"trainer-{resource} idle, news {step}",
        observed_at=at,
        hourly_usd=32.77,
        event_id=f"event-{resource}-{step}",
    )
    decision = Decision(
        action=Action.NOTIFY,
        reason=Reason.GPU_IDLE,
        finding=finding,
        dry_run=True,
        note=f"step {step}",
        decided_at=at,
    )
    return Notice(decision=decision, outcome=Outcome(done=False, detail="no change to the resource"))


def resource_of(message: dict[str, Any]) -> int | None:
    found = _RESOURCE.search(str(message.get("text", "")))
    return int(found[1]) if found else None


def parents(sink: SlackSink) -> list[dict[str, Any]]:
    """The top-level posts to CHANNEL, oldest first."""
    return [
        m
        for m in sink.messages
        if m.get("method") == "chat.postMessage" and m.get("channel") == CHANNEL and not m.get("thread_ts")
    ]


def parents_of(sink: SlackSink, resource: int) -> list[dict[str, Any]]:
    """The top-level posts that tell ``resource``: its own, or a group with its row."""
    return [
        m for m in parents(sink) if resource_of(m) == resource or f"|trainer-{resource}>" in json.dumps(m)
    ]


def stored(settings: Settings, resource: int) -> Conversation:
    key = notice(resource).decision.finding.conversation
    return DynamoConversationStore(settings.state_table).get_many(CHANNEL, [key])[key]


def shown(sink: SlackSink, ts: str) -> str:
    """What a message shows now (after its updates), as text."""
    return json.dumps(sink.current(CHANNEL, ts).get("blocks"))


@contextmanager
def both_read_first(operation: str, prefix: str, parties: int = 2) -> Iterator[None]:
    """Each of ``parties`` notifiers, having read an item whose id starts with ``prefix`` (``operation``: the
    DynamoDB call, GetItem or BatchGetItem) for the first time, waits until the others have too: they decide on
    the same state, as invocations running at once do."""
    barrier = threading.Barrier(parties, timeout=10)
    seen: set[int] = set()
    lock = threading.Lock()
    client = clients.client("dynamodb")

    def before(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if "Key" in params:
            ids = [params["Key"]["id"]["S"]]
        else:
            ids = [
                k["id"]["S"] for request in params.get("RequestItems", {}).values() for k in request["Keys"]
            ]
        context["read_ids"] = ids

    def after(context: dict[str, Any], **_: Any) -> None:
        if not any(i.startswith(prefix) for i in context.get("read_ids", [])):
            return
        with lock:
            if threading.get_ident() in seen:
                return
            seen.add(threading.get_ident())
        with suppress(threading.BrokenBarrierError):
            barrier.wait()

    client.meta.events.register(f"before-parameter-build.dynamodb.{operation}", before)
    client.meta.events.register(f"after-call.dynamodb.{operation}", after)
    try:
        yield
    finally:
        client.meta.events.unregister(f"before-parameter-build.dynamodb.{operation}", before)
        client.meta.events.unregister(f"after-call.dynamodb.{operation}", after)


def together(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls in threads at once; their results, in order (an exception in one is raised here)."""
    results: list[Any] = [None] * len(calls)
    errors: list[BaseException] = []

    def run(index: int, call: Callable[[], Any]) -> None:
        try:
            results[index] = call()
        except BaseException as error:  # handed to the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    if errors:
        raise errors[0]
    return results
