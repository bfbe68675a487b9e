"""A local HTTP server that plays the Slack incoming webhook, so the real slack_sdk client path runs."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

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
    retry_after_seconds: int = 0
    # Status 0 in the script or from ``answer`` holds the request this long, records nothing, then answers
    # 504: a Slack that times out.
    stall_seconds: float = 0.0
    # Decides each status from the message when set (fault injection); the script still comes first.
    answer: Callable[[dict[str, Any]], int] | None = None
    # Answers 400 invalid_blocks, as Slack does, to a message over Block Kit's limits (block_problems).
    strict: bool = True
    # The body of each refusal by status (Slack's error code); ERROR_BODIES where not set.
    error_bodies: dict[int, str] = field(default_factory=dict)
    refused: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)  # status, body, message
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self._server is not None, "sink not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/services/T000/B000/local"

    def url_for(self, channel: str) -> str:
        return self.url.replace("/local", f"/{channel}")

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

    def start(self) -> SlackSink:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    message = json.loads(body)
                except ValueError:
                    message = None
                with sink._lock:
                    status, reply = sink._decide(message)
                    sink.requests.append((self.path, status))
                    if status == 200:
                        sink.messages.append({"channel": self.path.rsplit("/", 1)[-1], **message})
                    elif status != 0:
                        sink.refused.append((status, reply, message if isinstance(message, dict) else {}))
                if status == 0:
                    threading.Event().wait(sink.stall_seconds)  # not time.sleep: tests record those
                    status, reply = 504, "error"
                self.send_response(status)
                if status == 429:
                    self.send_header("Retry-After", str(sink.retry_after_seconds))
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(reply.encode())

            def log_message(self, *_: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
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
