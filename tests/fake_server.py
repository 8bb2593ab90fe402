"""A fake OpenAI-compatible server on 127.0.0.1 for tests and benchmarks.

It records every request body, answers completions and chat completions through a
function the test supplies, and can misbehave on purpose: 503s, dropped connections,
slow answers, errors for chosen prompts. It can answer a number of completions and hold the
rest until the test releases them, so a test that interrupts a run mid-way or acts while it
runs never races it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.local_server import LocalServer

HOLD_S = 120.0  # a held request is answered after this at the latest (a test that forgot it)

# The answer text; for chat, a dict instead is the reply's message (content may be None, with
# reasoning_content or reasoning beside it) and may carry the choice's finish_reason.
Answer = Callable[[dict[str, Any]], Any]


def echo_answer(body: dict[str, Any]) -> str:
    return "The answer is 42.\n#### 42"


@dataclass
class Behaviour:
    answer: Answer = echo_answer
    models: list[dict[str, Any]] = field(default_factory=lambda: [{"id": "fake-model"}])
    latency_s: float = 0.0
    fail_first: int = 0  # answer the first N completion requests with HTTP 503
    drop_first: int = 0  # close the connection without answering the first N
    status_for: Callable[[dict[str, Any]], int | None] = lambda body: None  # forced HTTP status
    extra_routes: dict[str, Any] = field(default_factory=dict)  # GET path -> JSON or text
    tokenize: Callable[[str], int] | None = None  # POST /extras/tokenize when set
    post_routes: dict[str, Callable[[dict[str, Any]], Any]] = field(default_factory=dict)
    # POST path -> the JSON answered for a request body, e.g. vLLM's /tokenize
    models_status: int = 200  # e.g. 401 for a server that refuses the API key
    # the choice's "logprobs" for a request and its answer text (None: "logprobs": null)
    logprobs: Callable[[dict[str, Any], str], Any] | None = None
    error_message: str | None = None  # the message of a status_for error, e.g. vLLM's own
    # answer this many completions (a run's pre-flight request among them), hold the rest
    # until release()
    hold_after: int | None = None


class FakeServer(LocalServer):
    def __init__(self, behaviour: Behaviour | None = None) -> None:
        self.behaviour = behaviour or Behaviour()
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        self._completions = 0
        self._released = threading.Event()
        super().__init__(self._handler())

    def _count(self) -> int:
        with self._lock:
            self._completions += 1
            return self._completions

    def release(self) -> None:
        """Answer the held requests and every later one at once."""
        self.behaviour.hold_after = None
        self._released.set()

    def _hold(self, number: int) -> None:
        after = self.behaviour.hold_after
        if after is not None and number > after:
            self._released.wait(HOLD_S)

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        super().__exit__(*exc)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):

            disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: Any,
                      content_type: str = "application/json") -> None:
                data = payload if isinstance(payload, bytes) else (
                    payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                server.paths.append(self.path)
                b = server.behaviour
                if self.path == "/v1/models":
                    self._send(b.models_status, {"object": "list", "data": b.models})
                elif self.path in b.extra_routes:
                    value = b.extra_routes[self.path]
                    kind = "text/plain" if isinstance(value, str) else "application/json"
                    self._send(200, value, kind)
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:  # noqa: N802
                server.paths.append(self.path)
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path == "/extras/tokenize" or self.path == "/v1/extras/tokenize":
                    return self._tokenize(body)
                if self.path in server.behaviour.post_routes:
                    return self._send(200, server.behaviour.post_routes[self.path](body))
                if self.path not in ("/v1/completions", "/v1/chat/completions"):
                    return self._send(404, {"error": {"message": "not found"}})
                self._complete(body)

            def _tokenize(self, body: dict[str, Any]) -> None:
                counter = server.behaviour.tokenize
                if counter is None:
                    return self._send(404, {"error": {"message": "not found"}})
                self._send(200, {"tokens": list(range(counter(body.get("input", ""))))})

            def _complete(self, body: dict[str, Any]) -> None:
                b = server.behaviour
                number = server._count()
                if number <= b.drop_first:
                    self.close_connection = True
                    self.connection.close()
                    return
                with server._lock:
                    server.requests.append(body)
                if number <= b.drop_first + b.fail_first:
                    return self._send(503, {"error": {"message": "overloaded"}})
                forced = b.status_for(body)
                if forced:
                    message = b.error_message or f"forced {forced}"
                    return self._send(forced, {"error": {"message": message,
                                                         "type": "invalid_request_error"}})
                server._hold(number)
                if b.latency_s:
                    time.sleep(b.latency_s)
                text = b.answer(body)
                self._send(200, _reply(body, text, b.logprobs(body, text) if b.logprobs else None))

        return Handler


def _reply(body: dict[str, Any], text: Any, logprobs: Any = None) -> dict[str, Any]:
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    if "messages" in body:
        message = dict(text) if isinstance(text, dict) else {"content": text}
        finish = message.pop("finish_reason", "stop")
        return {"id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": finish, "logprobs": logprobs,
                             "message": {"role": "assistant", **message}}],
                "usage": usage}
    return {"id": "c", "object": "text_completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "text": text,
                         "logprobs": logprobs}],
            "usage": usage}
