"""A local HTTP server that plays Slack: the incoming webhook, the Web API calls costguard makes and an
interaction's response_url, so the real slack_sdk client paths run.

Web API faults can be injected per call (``fault``): a 429 with Retry-After, a 500 or 503, the Web API's own
``ok: false, error: ratelimited`` (HTTP 200), a stall past the client's timeout or a connection reset, each either
before the call is acted on or after it (``stall_after``, ``reset_after``: Slack took the post, the answer is
lost). ``api_error`` answers every Web API call with one refusal (``invalid_auth``: the app is gone).
``post_interval`` plays Slack's limit on ``chat.postMessage`` per channel (about one a second, thread replies
included): a post sooner than that after the channel's last one is answered 429 with Retry-After.
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
import struct
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

# What Slack's incoming webhooks answer with each refusal (the body is a plain-text error code).
ERROR_BODIES = {
    400: "invalid_blocks",
    403: "action_prohibited",
    404: "no_service",
    410: "channel_is_archived",
    429: "rate_limited",
    500: "internal_error",
}
# Block Kit's limits, as Slack enforces them (counted here in UTF-16 code units, as strictly as Slack can count).
_LIMITS = {"header": 150, "section": 3000, "field": 2000, "context": 3000, "button": 75}
_MAX_BLOCKS, _MAX_FIELDS, _MAX_ELEMENTS = 50, 10, 10
LOCAL_BOT_TOKEN = "xoxb-local-test-token"  # noqa: S105 - the sink's own, not a credential
# The Web API answers a refusal with HTTP 200 and ``ok: false`` (429 and 5xx keep their status); its error codes.
API_ERRORS = {
    400: "invalid_blocks",
    403: "not_in_channel",
    404: "channel_not_found",
    410: "is_archived",
    429: "ratelimited",
    500: "internal_error",
}
# What ``fault`` may answer for a Web API call: the status or refusal to answer instead, or what happens to the
# connection before the call is acted on (stall, reset) or after (stall_after, reset_after).
# Marks the answer to a call that stalled, when the sink tells stalls at once (``stall_at_once``).
STALL_HEADER = "X-Local-Sink-Stall"
FAULTS = frozenset({"429", "500", "503", "ratelimited", "stall", "reset", "stall_after", "reset_after"})
_HISTORY_PAGE = 100  # conversations.history's and .replies' default page
_API_TS_BASE = 1_700_000_000
# How often the serving loop looks up from waiting for a request: how long stop() waits at most.
POLL_SECONDS = 0.01


def _units(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def block_problems(message: dict[str, Any]) -> list[str]:
    """What Slack would refuse in a webhook payload with ``invalid_blocks`` (empty: it would take it)."""
    problems: list[str] = []
    blocks = message.get("blocks", [])
    if not isinstance(blocks, list) or len(blocks) > _MAX_BLOCKS:
        return ["blocks: not a list of at most 50"]

    def check(where: str, obj: Any, limit: int) -> None:
        text = obj.get("text") if isinstance(obj, dict) else None
        if not isinstance(text, str) or not text:
            problems.append(f"{where}: no text")
        elif _units(text) > limit:
            problems.append(f"{where}: {_units(text)} > {limit}")

    for i, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "header":
            check(f"blocks[{i}].text", block.get("text"), _LIMITS["header"])
        elif kind == "section":
            if "text" in block:
                check(f"blocks[{i}].text", block["text"], _LIMITS["section"])
            fields = block.get("fields", [])
            if len(fields) > _MAX_FIELDS:
                problems.append(f"blocks[{i}].fields: more than {_MAX_FIELDS}")
            for j, item in enumerate(fields):
                check(f"blocks[{i}].fields[{j}]", item, _LIMITS["field"])
        elif kind in ("context", "actions"):
            elements = block.get("elements", [])
            if len(elements) > _MAX_ELEMENTS:
                problems.append(f"blocks[{i}].elements: more than {_MAX_ELEMENTS}")
            for j, element in enumerate(elements):
                if isinstance(element, dict) and element.get("type") == "button":
                    check(f"blocks[{i}].elements[{j}].text", element.get("text"), _LIMITS["button"])
                elif isinstance(element, dict) and element.get("type") in ("mrkdwn", "plain_text"):
                    check(f"blocks[{i}].elements[{j}]", element, _LIMITS["context"])
    return problems


@dataclass
class SlackSink:
    """Records every accepted message; answers with scripted statuses first (e.g. 429 then 200)."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, int]] = field(default_factory=list)
    script: deque[int] = field(default_factory=deque)
    always: int | None = None  # a status to answer every time (Slack down), until cleared
    retry_after_seconds: float = 0  # Slack sends whole seconds; a played clock may want less
    # Status 0 in the script or from ``answer`` holds the request this long, records nothing, then answers
    # 504: a Slack that times out.
    stall_seconds: float = 0.0
    # A stall answered at once, 504 with STALL_HEADER, instead of held: for a test that plays the client's timeout
    # (it turns that answer into the timeout the client would have met), so no stall waits on the machine's clock.
    stall_at_once: bool = False
    # Every Web API answer held this long (seconds of the machine's clock) before it is sent: a loaded machine,
    # for the tests that must not hang on how fast it is.
    slow_seconds: float = 0.0
    # Decides each status from the message when set (fault injection); the script still comes first.
    answer: Callable[[dict[str, Any]], int] | None = None
    # Answers 400 invalid_blocks, as Slack does, to a message over Block Kit's limits (block_problems).
    strict: bool = True
    # The body of each refusal by status (Slack's error code); ERROR_BODIES where not set.
    error_bodies: dict[int, str] = field(default_factory=dict)
    refused: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)  # status, body, message
    # The Web API (/api/<method>): the bot token it expects, channels that do not exist, the workspace's users
    # (email -> user id) and user groups (id -> user ids), and what it recorded besides ``messages`` (each
    # chat.postMessage, with its "ts" and "method"; a chat.update is never one of them).
    bot_token: str = LOCAL_BOT_TOKEN
    missing_channels: set[str] = field(default_factory=set)
    # Channels the app's bot was removed from: Slack answers not_in_channel (HTTP 200) to a post or update there.
    removed_channels: set[str] = field(default_factory=set)
    users: dict[str, str] = field(default_factory=dict)
    usergroups: dict[str, list[str]] = field(default_factory=dict)
    updates: list[dict[str, Any]] = field(default_factory=list)
    ephemerals: list[dict[str, Any]] = field(default_factory=list)
    lookups: list[str] = field(default_factory=list)  # each users.lookupByEmail's email, cached or not
    responses: list[dict[str, Any]] = field(default_factory=list)  # POSTs to a response_url: path + payload
    # Decides a fault (FAULTS) for each Web API call from its method and arguments, or None to answer normally.
    fault: Callable[[str, dict[str, Any]], str | None] | None = None
    faults: Counter[str] = field(default_factory=Counter)  # the faults injected, by kind
    # Every Web API call (a valid token or not) is refused with this error: the app uninstalled, say.
    api_error: str | None = None
    # Slack's limit on chat.postMessage per channel: at most one post each ``post_interval`` seconds of ``clock``
    # (a test's played clock); a post sooner is answered 429 with Retry-After, in whole seconds as Slack sends
    # them. 0: no limit. ``limited`` counts the 429s so answered, by channel.
    post_interval: float = 0.0
    clock: Callable[[], float] = time.monotonic
    limited: Counter[str] = field(default_factory=Counter)
    _free_at: dict[str, float] = field(default_factory=dict)
    _current: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    _posted: int = 0
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self._server is not None, "sink not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/services/T000/B000/local"

    def url_for(self, channel: str) -> str:
        return self.url.replace("/local", f"/{channel}")

    @property
    def origin(self) -> str:
        """http://127.0.0.1:<port>, the server itself."""
        assert self._server is not None, "sink not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def api_url(self) -> str:
        """The Web API base URL to give WebClient (``base_url``)."""
        return f"{self.origin}/api/"

    def response_url(self, name: str) -> str:
        """A response_url, as Slack gives one with each interaction."""
        return f"{self.origin}/response/{name}"

    def current(self, channel: str, ts: str) -> dict[str, Any]:
        """The latest version of a posted message (after its chat.update calls)."""
        with self._lock:
            return dict(self._current[(channel, ts)])

    def thread(self, channel: str, ts: str) -> list[dict[str, Any]]:
        """The replies in a message's thread, oldest first."""
        with self._lock:
            return [m for m in self.messages if m.get("channel") == channel and m.get("thread_ts") == ts]

    def _decide(self, message: Any) -> tuple[int, str]:
        """The status and body to answer (the lock is held)."""
        if not isinstance(message, dict) or not isinstance(message.get("text", ""), str):
            return 400, "invalid_payload"
        if self.script:
            status = self.script.popleft()
        elif self.answer is not None:
            status = self.answer(message)
        else:
            status = self.always or 200
        if status == 200 and self.strict and block_problems(message):
            status = 400
        if status == 200:
            return 200, "ok"
        return status, self.error_bodies.get(status, ERROR_BODIES.get(status, "error"))

    def _next_ts(self) -> str:
        self._posted += 100
        return f"{_API_TS_BASE + self._posted // 1_000_000}.{self._posted % 1_000_000:06d}"

    def posts(self, channel: str) -> list[dict[str, Any]]:
        """Every Web API post to ``channel``, oldest first, as it stands now (after its updates)."""
        with self._lock:
            return [
                dict(self._current[(channel, m["ts"])])
                for m in self.messages
                if m.get("method") == "chat.postMessage" and m.get("channel") == channel
            ]

    def _limited_api(
        self, method: str, params: dict[str, Any], token: str | None
    ) -> tuple[int, dict[str, Any], str | None, float | None]:
        """_api behind Slack's per-channel limit on chat.postMessage (the lock is held), and the Retry-After of a
        429 it answers (None: the call went through, and a post makes its channel busy for ``post_interval``)."""
        if method == "chat.postMessage" and self.post_interval > 0:
            channel, now = str(params.get("channel", "")), self.clock()
            free_at = self._free_at.get(channel, now)
            if now < free_at:
                self.limited[channel] += 1
                self.refused.append((429, "ratelimited", params))
                wait = float(max(1, math.ceil(free_at - now)))  # whole seconds, as Slack sends them
                return 429, {"ok": False, "error": "ratelimited"}, None, wait
            self._free_at[channel] = now + self.post_interval
        return (*self._api(method, params, token), None)

    def _api(
        self, method: str, params: dict[str, Any], token: str | None
    ) -> tuple[int, dict[str, Any], str | None]:
        """The Web API's status, answer and what then happens to the connection (None, "stall", "reset") for one
        call (the lock is held). Status 0: stall (or reset) before acting."""
        if token != self.bot_token or self.api_error:
            error = "invalid_auth" if token != self.bot_token else str(self.api_error)
            self.refused.append((200, error, params))
            return 200, {"ok": False, "error": error}, None
        fault = self.fault(method, params) if self.fault is not None else None
        if fault is not None:
            assert fault in FAULTS, f"unknown fault {fault!r}"
            self.faults[fault] += 1
            if fault in ("stall", "reset"):
                return 0, {}, fault
            if fault == "ratelimited":
                self.refused.append((200, "ratelimited", params))
                return 200, {"ok": False, "error": "ratelimited"}, None
            if fault in ("429", "500", "503"):
                status = int(fault)
                error = API_ERRORS.get(status, "service_unavailable")
                self.refused.append((status, error, params))
                return status, {"ok": False, "error": error}, None
        status, answer = self._api_call(method, params)
        after = fault.removesuffix("_after") if fault in ("stall_after", "reset_after") else None
        return status, answer, after

    def _api_call(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The Web API's status and answer once the call is let through (the lock is held). Status 0: stall."""
        if method in ("chat.postMessage", "chat.update", "chat.postEphemeral"):
            status, _ = self._decide(params)
        else:  # look-ups: only the script and ``always`` (Slack down, throttling) apply
            status = self.script.popleft() if self.script else self.always or 200
        if status == 0:
            return 0, {}
        if status != 200:
            error = (
                "invalid_arguments"
                if status == 400 and not isinstance(params.get("text", ""), str)
                else self.error_bodies.get(status, API_ERRORS.get(status, "error"))
            )
            self.refused.append((status, error, params))
            return (status if status == 429 or status >= 500 else 200), {"ok": False, "error": error}
        answer = self._api_ok(method, params)
        if not answer.get("ok"):
            self.refused.append((200, str(answer.get("error")), params))
        return 200, answer

    def _api_ok(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """What each method does once the call is let through (the lock is held)."""
        channel = str(params.get("channel", ""))
        if method in ("chat.postMessage", "chat.update", "chat.postEphemeral") and (
            not channel or channel in self.missing_channels
        ):
            return {"ok": False, "error": "channel_not_found"}
        if method in ("chat.postMessage", "chat.update") and channel in self.removed_channels:
            return {"ok": False, "error": "not_in_channel"}
        if method == "chat.postMessage":
            ts = self._next_ts()
            record = {**params, "channel": channel, "ts": ts, "method": method}
            if not record.get("thread_ts"):
                record.pop("thread_ts", None)
            self.messages.append(record)
            self._current[(channel, ts)] = dict(record)
            return {"ok": True, "channel": channel, "ts": ts, "message": {"text": params.get("text", "")}}
        if method == "chat.update":
            ts = str(params.get("ts", ""))
            if (channel, ts) not in self._current:
                return {"ok": False, "error": "message_not_found"}
            self.updates.append({**params, "channel": channel, "ts": ts})
            latest = self._current[(channel, ts)]
            for key in ("text", "blocks", "metadata"):
                if key in params:
                    latest[key] = params[key]
            return {"ok": True, "channel": channel, "ts": ts, "text": params.get("text", "")}
        if method == "chat.postEphemeral":
            self.ephemerals.append({**params, "channel": channel})
            return {"ok": True, "message_ts": self._next_ts()}
        if method == "users.lookupByEmail":
            email = str(params.get("email", ""))
            self.lookups.append(email)
            user = self.users.get(email)
            if user is None:
                return {"ok": False, "error": "users_not_found"}
            return {"ok": True, "user": {"id": user, "profile": {"email": email}}}
        if method in ("conversations.history", "conversations.replies"):
            return self._history(method, channel, params)
        if method == "usergroups.users.list":
            members = self.usergroups.get(str(params.get("usergroup", "")))
            if members is None:
                return {"ok": False, "error": "no_such_subteam"}
            return {"ok": True, "users": list(members)}
        return {"ok": False, "error": "unknown_method"}

    def _history(self, method: str, channel: str, params: dict[str, Any]) -> dict[str, Any]:
        """conversations.history (top-level messages, newest first) or .replies (the parent, then its replies,
        oldest first), a page at a time; the metadata only with ``include_all_metadata``."""
        if not channel or channel in self.missing_channels:
            return {"ok": False, "error": "channel_not_found"}
        posted = [
            self._current[(channel, m["ts"])]
            for m in self.messages
            if m.get("method") == "chat.postMessage" and m.get("channel") == channel
        ]
        if method == "conversations.history":
            found = [m for m in reversed(posted) if not m.get("thread_ts")]
        else:
            parent = str(params.get("ts", ""))
            if (channel, parent) not in self._current:
                return {"ok": False, "error": "thread_not_found"}
            found = [self._current[(channel, parent)], *(m for m in posted if m.get("thread_ts") == parent)]
        try:
            start = int(params.get("cursor") or 0)
            limit = max(1, min(999, int(params.get("limit") or _HISTORY_PAGE)))
        except ValueError:
            return {"ok": False, "error": "invalid_cursor"}
        metadata = str(params.get("include_all_metadata", "")).lower() in ("1", "true")
        keep = ("type", "ts", "text", "blocks", "thread_ts") + (("metadata",) if metadata else ())
        page = [
            {k: v for k, v in {"type": "message", **m}.items() if k in keep}
            for m in found[start : start + limit]
        ]
        more = start + limit < len(found)
        return {
            "ok": True,
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def _hold(self, stalled: bool) -> bool:
        """Hold a Web API answer as long as the machine is slow, and a stall past the client's timeout unless
        stalls are told at once; whether it stalled."""
        if self.slow_seconds:
            threading.Event().wait(self.slow_seconds)  # not time.sleep: tests record those
        if stalled and not self.stall_at_once:
            threading.Event().wait(self.stall_seconds)  # past the client's timeout: nobody reads it
        return stalled

    def start(self) -> SlackSink:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                path = urlsplit(self.path).path
                if path.startswith("/api/"):
                    self._web_api(path.removeprefix("/api/"), body)
                    return
                try:
                    message = json.loads(body)
                except ValueError:
                    message = None
                with sink._lock:
                    status, reply = sink._decide(message)
                    sink.requests.append((self.path, status))
                    if status == 200 and path.startswith("/response/"):
                        sink.responses.append({"path": path, **message})
                    elif status == 200:
                        sink.messages.append({"channel": self.path.rsplit("/", 1)[-1], **message})
                    elif status != 0:
                        sink.refused.append((status, reply, message if isinstance(message, dict) else {}))
                if status == 0:
                    threading.Event().wait(sink.stall_seconds)  # not time.sleep: tests record those
                    status, reply = 504, "error"
                self._answer(status, reply.encode(), "text/plain")

            def _web_api(self, method: str, body: bytes) -> None:
                params = _params(self.path, body, self.headers.get("Content-Type", ""))
                token = _token(self.headers.get("Authorization", ""), params)
                with sink._lock:
                    status, answer, then, wait = sink._limited_api(method, params, token)
                    sink.requests.append((self.path, status))
                if then == "reset":
                    self._reset()
                    return
                stalled = sink._hold(status == 0 or then == "stall")
                if stalled and (status == 0 or sink.stall_at_once):
                    status, answer = 504, {"ok": False, "error": "request_timeout"}
                reply, told = json.dumps(answer).encode(), stalled and sink.stall_at_once
                try:
                    self._answer(status, reply, "application/json; charset=utf-8", wait, told)
                except OSError:  # the client gave up waiting
                    self.close_connection = True

            def _reset(self) -> None:
                """Drop the connection without an answer: a reset (RST) where the platform allows it."""
                with contextlib.suppress(OSError):
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()

            def _answer(
                self, status: int, reply: bytes, kind: str, wait: float | None = None, told: bool = False
            ) -> None:
                self.send_response(status)
                if told:  # a stall told at once
                    self.send_header(STALL_HEADER, "1")
                if status == 429 or b'"ratelimited"' in reply:
                    self.send_header("Retry-After", f"{sink.retry_after_seconds if wait is None else wait:g}")
                self.send_header("Content-Type", kind)
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *_: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a reset or a client that gave up: the sink plays them on purpose

        self._server = Server(("127.0.0.1", 0), Handler)
        # stop() waits for the loop's poll: at the default half-second, every stack would wait that long to end.
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": POLL_SECONDS}, daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> SlackSink:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def _token(authorization: str, params: dict[str, Any]) -> str | None:
    """The bot token of a Web API call: its Authorization header, else its ``token`` argument (taken out of
    ``params`` either way: never recorded)."""
    given = params.pop("token", None) or None
    token = authorization.removeprefix("Bearer ").strip() if authorization.startswith("Bearer ") else None
    return token or given


def _params(path: str, body: bytes, content_type: str) -> dict[str, Any]:
    """A Web API call's arguments: the query string, then a JSON or form body (JSON strings in a form decoded)."""
    params: dict[str, Any] = dict(parse_qsl(urlsplit(path).query))
    text = body.decode("utf-8", "replace")
    if "json" in content_type or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            params.update(data)
        return params
    for key, value in parse_qsl(text, keep_blank_values=True):
        if key in ("blocks", "attachments", "metadata"):
            try:
                params[key] = json.loads(value)
                continue
            except ValueError:
                pass
        params[key] = value
    return params
