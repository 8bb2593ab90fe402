"""An adversarial OpenAI-compatible server on 127.0.0.1: it misbehaves the ways real and
hostile servers do, one mode at a time, and records what it was sent.

Modes (`HostileServer(mode)`):
  echo_key      completion requests fail with HTTP 400 whose body quotes the Authorization header
  echo_key_5xx  the same with HTTP 500 (retried, then an error item on file)
  echo_decoded  HTTP 500 quoting the Authorization header with Basic credentials decoded
  redirect      every request is redirected (307) to `target`, another origin
  record        an ordinary server that records every request's headers (a redirect's target)
  trickle_probe /metrics trickles one byte a second; everything else answers at once
  trickle_body  completion answers trickle at two bytes a second
  invalid_json  completion answers are HTTP 200 with a body that is not JSON
  wrong_types   completion answers are HTTP 200 with choices[0].text = 12345
  hostile_text  model ids, answers and /props carry escape sequences, BEL, CR and Markdown
  echo_body     the answer is the request body it received, as JSON text
  scripted      every answer comes from `script` (a Script): the fuzz suite's server, whose
                replies hypothesis generates
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.local_server import LocalServer

HOSTILE = "\x1b[2J\x1b]0;owned\x07\r# Heading [click](http://evil.example) **x** | y\x9b31m"


Answer = tuple[int, bytes]  # HTTP status and body


@dataclass
class Script:
    """The replies of a `scripted` server: GET paths answered from `gets` (404 when not
    listed), every POST by `post` given the request body and its Authorization header."""

    gets: dict[str, Answer] = field(default_factory=dict)
    post: Callable[[dict[str, Any], str], Answer] = lambda body, auth: (404, b"{}")


class HostileServer(LocalServer):
    def __init__(self, mode: str, target: str | None = None,
                 models: list[str] | None = None, props: dict[str, Any] | None = None,
                 metrics: str | None = None, script: Script | None = None) -> None:
        self.mode = mode
        self.script = script or Script()
        self.target = target  # the other origin a redirect points to
        self.model_ids = models or (["hostile" + HOSTILE] if mode == "hostile_text" else ["m"])
        self.props = props
        self.metrics = metrics
        self.seen: list[dict[str, Any]] = []  # method, path, headers (lower-case), body
        self._lock = threading.Lock()
        super().__init__(self._handler())

    def posts(self) -> list[dict[str, Any]]:
        return [s for s in self.seen if s["method"] == "POST"]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):

            disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _record(self, body: Any) -> None:
                with server._lock:
                    server.seen.append({"method": self.command, "path": self.path,
                                        "headers": {k.lower(): v for k, v in self.headers.items()},
                                        "body": body})

            def _send(self, status: int, data: bytes, kind: str = "application/json",
                      headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _trickle(self, data: bytes, per_second: float) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    for byte in data:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(1 / per_second)
                except OSError:
                    pass

            def _redirect(self) -> bool:
                if server.mode != "redirect":
                    return False
                self._send(307, b"", headers={"Location": f"{server.target}{self.path}"})
                return True

            def do_GET(self) -> None:  # noqa: N802
                self._record(None)
                if self._redirect():
                    return
                if server.mode == "scripted":
                    return self._send(*server.script.gets.get(self.path, (404, b"{}")))
                if self.path == "/v1/models":
                    data = {"object": "list", "data": [{"id": i} for i in server.model_ids]}
                    return self._send(200, json.dumps(data).encode())
                if self.path == "/metrics" and server.mode == "trickle_probe":
                    return self._trickle(b"vllm:cache_config_info{cache_dtype=\"auto\"} 1\n" * 4, 1)
                if self.path == "/metrics" and server.metrics is not None:
                    return self._send(200, server.metrics.encode(), "text/plain")
                if self.path == "/props" and (server.props or server.mode == "hostile_text"):
                    props = server.props or {"build_info": HOSTILE}
                    return self._send(200, json.dumps(props).encode())
                self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                body = json.loads(raw or b"{}")
                self._record(body)
                if self._redirect():
                    return
                if server.mode == "scripted":
                    auth = self.headers.get("Authorization") or ""
                    return self._send(*server.script.post(body, auth))
                self._complete(body)

            def _echo_key(self, mode: str) -> None:
                auth = self.headers.get("Authorization") or ""
                if mode == "echo_decoded" and auth.startswith("Basic "):
                    auth = base64.b64decode(auth.split()[1]).decode()
                message = f"invalid credentials: {auth}"
                status = 400 if mode == "echo_key" else 500
                self._send(status, json.dumps({"error": {"message": message}}).encode())

            def _complete(self, body: dict[str, Any]) -> None:
                mode = server.mode
                if mode in ("echo_key", "echo_key_5xx", "echo_decoded"):
                    return self._echo_key(mode)
                if mode == "invalid_json":
                    return self._send(200, b'{"choices": [{"text": "unterminated')
                if mode == "wrong_types":
                    return self._send(200, json.dumps(_reply(body, 12345)).encode())
                text: Any = "#### 42"
                if mode == "hostile_text":
                    text = "#### 42 " + HOSTILE
                if mode == "echo_body":
                    text = json.dumps(body, sort_keys=True)
                data = json.dumps(_reply(body, text)).encode()
                if mode == "trickle_body" and body.get("max_tokens") != 1:
                    return self._trickle(data, 2)
                self._send(200, data)

        return Handler


def _reply(body: dict[str, Any], text: Any) -> dict[str, Any]:
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    if "messages" in body:
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": text}}
    else:
        choice = {"index": 0, "finish_reason": "stop", "text": text}
    return {"id": "x", "object": "completion", "model": body.get("model"),
            "choices": [choice], "usage": usage}
