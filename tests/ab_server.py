"""A scripted OpenAI-compatible server process for `kveval ab`'s supervisor tests.

    python tests/ab_server.py --port P [--fault F] [--count FILE] [--pids FILE]
                              [--latency S] [--flip P] [--hold-at N]
                              [--cache-type-k T] [--cache-type-v T] [--echo-env NAME]

It serves /health, /v1/models, /v1/completions and /v1/chat/completions with a canned
answer, logs a llama.cpp-shaped KV cache line sized by the cache types, appends its pid to
`--pids` and one line per completion request (`pid max_tokens sha256(prompt)`) to `--count`.
Faults: `exit` (exits at start), `never` (never answers 200), `die:N` (dies at its N-th
completion request), `ignore-term` (ignores SIGTERM), `hold-port` (leaves a process outside
its group holding the port; its pid is appended to `--pids` too), `log-key` (logs the API key
each request carries, split across two lines). `--flip P`: a share P of the prompts answered
otherwise, drawn afresh at each start.
`--hold-at N`: once `--count` holds N answer requests (its servers' together), every
further one waits (120 s at most) until a file `<count>.release` exists, so a test interrupts
a run at a known place. It logs its command line and the value of each `--echo-env NAME`;
a flag it does not know (`--model-url URL`) is taken and left unused.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ANSWER = "The answer is 42.\n#### 42"
BYTES = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}  # per element
LOCK = threading.Lock()


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--fault", default="")
    p.add_argument("--count")
    p.add_argument("--pids")
    p.add_argument("--latency", type=float, default=0.0)
    p.add_argument("--flip", type=float, default=0.0)
    p.add_argument("--hold-at", type=int)
    p.add_argument("--cache-type-k", default="f16")
    p.add_argument("--cache-type-v", default="f16")
    p.add_argument("--api-key")
    p.add_argument("--echo-env", action="append", default=[])
    p.add_argument("--model-path")  # served as /props `model_path`, as llama-server does
    return p.parse_known_args()[0]  # any other flag (--model-url URL): taken, unused


def append(path: str | None, line: str) -> None:
    if path:
        with LOCK, open(path, "a") as fh:
            fh.write(line + "\n")


def hold(args: argparse.Namespace, body: dict[str, Any]) -> None:
    """Wait while --count holds --hold-at answer requests and no release file is there."""
    if args.hold_at is None or body.get("max_tokens") == 1 or not args.count:
        return
    release, deadline = Path(args.count + ".release"), time.monotonic() + 120
    while not release.exists() and time.monotonic() < deadline:
        with LOCK, open(args.count, "a+") as fh:
            fh.seek(0)
            if sum(line.split()[1] != "1" for line in fh.read().splitlines()) < args.hold_at:
                return
        time.sleep(0.05)


def kv_line(k: str, v: str) -> str:
    cells, layers, dim = 2048, 30, 192
    k_mib = cells * layers * dim * BYTES[k] / 2**20
    v_mib = cells * layers * dim * BYTES[v] / 2**20
    return (f"llama_kv_cache: size = {k_mib + v_mib:7.2f} MiB (  {cells} cells,  {layers} "
            f"layers,  1/1 seqs), K ({k}): {k_mib:7.2f} MiB, V ({v}): {v_mib:7.2f} MiB")


def usage_of(body: dict[str, Any], out: int = 5) -> dict[str, int]:
    words = len(str(body.get("prompt") or "").split()) or 10  # a word is a token here
    return {"prompt_tokens": words, "completion_tokens": out, "total_tokens": words + out}


def answer(prompt: str, flip: float) -> str:
    """The canned answer; with --flip P, another one for a share P of the prompts, drawn
    afresh at every start (a restart changes other answers)."""
    moved = flip and random.Random(f"{os.getpid()} {prompt}").random() < flip
    return ANSWER.replace("42", "41") if moved else ANSWER


def reply(body: dict[str, Any], flip: float = 0.0) -> dict[str, Any]:
    usage = usage_of(body)
    text = answer(json.dumps(body.get("prompt") or body.get("messages")), flip)
    if "messages" in body:
        return {"id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                             "message": {"role": "assistant", "content": text}}],
                "usage": usage}
    return {"id": "c", "object": "text_completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "text": text,
                         "logprobs": None}], "usage": usage}


def handler(args: argparse.Namespace) -> type[BaseHTTPRequestHandler]:
    seen, slowed = [0], [False]
    die_at = int(args.fault.split(":")[1]) if args.fault.startswith("die:") else 0
    # slow-first:S: the first answer request (no one-token probe) takes S seconds
    slow = float(args.fault.split(":")[1]) if args.fault.startswith("slow-first:") else 0.0

    class Handler(BaseHTTPRequestHandler):

        disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:
            pass

        def send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def stream(self, body: dict[str, Any]) -> None:
            """Server-sent events: one token a chunk, then the usage, then [DONE]."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            out = int(body.get("max_tokens") or 4)
            for _ in range(out):
                self.event({"id": "c", "object": "text_completion", "created": 0,
                            "model": body["model"],
                            "choices": [{"index": 0, "text": "x ", "finish_reason": None}]})
            self.event({"id": "c", "object": "text_completion", "created": 0,
                        "model": body["model"], "choices": [], "usage": usage_of(body, out)})
            self.wfile.write(b"data: [DONE]\n\n")
            self.close_connection = True

        def event(self, payload: dict[str, Any]) -> None:
            self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
            self.wfile.flush()

        def do_GET(self) -> None:  # noqa: N802
            if args.fault == "never":
                return self.send(503, {"error": {"message": "loading model"}})
            if self.path == "/health":
                return self.send(200, {"status": "ok"})
            if self.path == "/v1/models":
                return self.send(200, {"object": "list", "data": [{"id": "fake-model"}]})
            if self.path == "/props" and args.model_path:
                return self.send(200, {"model_path": args.model_path})
            self.send(404, {"error": {"message": "not found"}})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if self.path not in ("/v1/completions", "/v1/chat/completions"):
                return self.send(404, {"error": {"message": "not found"}})
            prompt = json.dumps(body.get("prompt") or body.get("messages"))
            with LOCK:
                seen[0] += 1
                number = seen[0]
            if die_at and number >= die_at:
                print("GGML_ASSERT: fake crash", flush=True)
                os._exit(134)
            hold(args, body)
            with LOCK:
                first = not slowed[0] and body.get("max_tokens") != 1
                slowed[0] = slowed[0] or first
            time.sleep(args.latency + (slow if first else 0.0))
            if args.fault == "log-key":  # the key it was sent, wrapped over two log lines
                key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                print(f"request auth: {key[:len(key) // 2]}", flush=True)
                time.sleep(0.1)  # two writes, read apart
                print(f"{key[len(key) // 2:]} (end)", flush=True)
            if body.get("stream"):
                return self.stream(body)
            append(args.count, f"{os.getpid()} {body.get('max_tokens')} "
                               f"{hashlib.sha256(prompt.encode()).hexdigest()[:16]}")
            self.send(200, reply(body, args.flip))

    return Handler


def hold_port(port: int, pids: str | None) -> None:
    """A process in a session of its own that keeps the port bound (SO_REUSEPORT, as the
    server's own socket, so both may) for a minute: it answers nothing."""
    code = ("import socket,time;s=socket.socket();"
            "s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEPORT,1);"
            f"s.bind(('127.0.0.1',{port}));time.sleep(60)")
    child = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    append(pids, str(child.pid))
    time.sleep(0.3)


class Server(ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        super().server_bind()

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that went away
            super().handle_error(request, client_address)


def main() -> None:
    args = parse()
    append(args.pids, str(os.getpid()))
    print(f"fake server: starting on port {args.port}", flush=True)
    print(f"fake server: argv {' '.join(sys.argv[1:])}", flush=True)
    for name in args.echo_env:
        print(f"fake server: env {name}={os.environ.get(name)}", flush=True)
    if args.fault == "exit":
        print("error: failed to load model 'missing.gguf'", flush=True)
        sys.exit(1)
    if args.fault == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if not args.model_path:  # llama-server tells its KV cache only at -lv 4
        print(kv_line(args.cache_type_k, args.cache_type_v), flush=True)
    server = Server(("127.0.0.1", args.port), handler(args))
    if args.fault == "hold-port":
        hold_port(args.port, args.pids)
    print(f"server is listening on http://127.0.0.1:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
