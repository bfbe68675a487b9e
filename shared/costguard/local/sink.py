"""A local HTTP server that plays the Slack incoming webhook, so the real slack_sdk client path runs."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self._server is not None, "sink not started"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/services/T000/B000/local"

    def url_for(self, channel: str) -> str:
        return self.url.replace("/local", f"/{channel}")

    def start(self) -> SlackSink:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with sink._lock:
                    if sink.script:
                        status = sink.script.popleft()
                    elif sink.answer is not None:
                        status = sink.answer(json.loads(body))
                    else:
                        status = sink.always or 200
                    sink.requests.append((self.path, status))
                    if status == 200:
                        sink.messages.append({"channel": self.path.rsplit("/", 1)[-1], **json.loads(body)})
                if status == 0:
                    threading.Event().wait(sink.stall_seconds)  # not time.sleep: tests record those
                    status = 504
                self.send_response(status)
                if status == 429:
                    self.send_header("Retry-After", str(sink.retry_after_seconds))
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok" if status == 200 else b"error")

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
